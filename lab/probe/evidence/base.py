"""What every kind of evidence answers: the rules a probe's packets met, as RuleHits in the order met."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class EvidenceError(RuntimeError):
    """The kernel's evidence could not be read (a tracer that never answered): the run cannot say which rules
    acted, and stops rather than report without them."""


def in_backend(backend: str, table: str) -> str:
    """A table of the iptables backend other than kube-proxy's, named with it for the user (`iptables-legacy nat`):
    where both backends hold rules, the kernel runs both tables of one name (OtherBackendEvidence)."""
    return f"iptables-{backend} {table}"


_BACKEND = re.compile(r"^iptables-(?:nft|legacy) ")


@dataclass(frozen=True)
class RuleHit:
    table: str  # with its backend where it is the other one's (in_backend)
    chain: str
    rule: str  # the rule as iptables-save prints it, or "policy ACCEPT" for a chain's policy
    packets: int
    # What the rule did, when its text does not say it the iptables way (`-j X`): nftables' trace.
    action: str = ""

    @property
    def verdict(self) -> str:
        if self.action:
            return self.action
        match = re.search(r"-j (\S+)", self.rule)
        return match.group(1) if match else self.rule.split()[-1]

    @property
    def written_table(self) -> str:
        """The table as its writer wrote in it, without the backend it is named with (`nat` of `iptables-legacy
        nat`): a rule's reason is its writer's, whichever backend it writes in."""
        return _BACKEND.sub("", self.table)

    def __str__(self) -> str:
        return f"{self.table} {self.chain}: {self.rule}"


class Evidence(Protocol):
    """One namespace's rules, asked after each probe what they did to it."""

    def mark(self) -> object:
        """Taken just before a probe is sent."""
        ...

    def hits(self, mark: object, wanted: Callable[[str], bool]) -> list[RuleHit]:
        """The rules the probe's packets met since `mark`, in the order met. `wanted` tells the probe's
        packets from others by a trace's `packet:` line; counters count every packet alike and ignore it."""
        ...

    def restart(self) -> None:
        """The rules were replaced (a step): what was read of the old ones no longer applies."""
        ...

    def close(self) -> None: ...
