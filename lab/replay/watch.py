"""What a probe's packet met in the node's rules: iptables' counters, or the kernel's nftables trace.

Both watchers answer the same question for the replay loop (lab.replay.run): after one connection,
which rules did its first packet meet (readable lines, in order), did one of them DROP or REJECT it,
and among how many endpoints did the load-balancing rule that picked its endpoint choose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from lab.install import counter_hits, iptables_save, parse_counters
from lab.probe.client import ClientResult
from lab.probe.nftrace import TCP_SYN, NftTracer, packet_events, rule_hits
from lab.replay.dump import chain_candidates
from lab.replay.env import Setup


@dataclass(frozen=True)
class Seen:
    trace: tuple[str, ...]  # "table chain: rule", in the order the packet met the rules
    verdicts: frozenset[str]  # what those rules did, in iptables' words: DROP, REJECT, KUBE-SEP-..., ...
    spread: int = 1  # endpoints the rule that picked this packet's endpoint chose among (1: none)


class Watcher(Protocol):
    def mark(self) -> object:
        """Taken just before a probe is sent."""
        ...

    def seen(self, mark: object, client: ClientResult) -> Seen:
        """What the probe sent since `mark` met; `client` is what the client saw."""
        ...

    def close(self) -> None: ...


class CounterWatcher:
    """iptables: the rules whose packet counters moved (`iptables-save -c` before and after)."""

    def __init__(self, netns: str, backend: str, rules: str) -> None:
        self.netns, self.backend, self.rules = netns, backend, rules
        self._last = self._snapshot()

    def _snapshot(self) -> dict[tuple[str, str, int, str], int]:
        return parse_counters(iptables_save(self.netns, self.backend, counters=True))

    def mark(self) -> object:
        return self._last  # the snapshot after the previous probe is the one before this one

    def seen(self, mark: object, client: ClientResult) -> Seen:
        after = self._snapshot()
        hits = counter_hits(mark, after)  # type: ignore[arg-type]
        self._last = after
        # -m statistic: the chain that jumped to the endpoint's KUBE-SEP chain, and its other choices.
        picks = [set(chain_candidates(self.rules, h.chain)) for h in hits if h.verdict.startswith("KUBE-SEP-")]
        spread = max(1, len(picks[0])) if picks else 1
        return Seen(tuple(map(str, hits)), frozenset(h.verdict for h in hits), spread)

    def close(self) -> None:
        pass


_NUMGEN = re.compile(r"\bnumgen (?:random|inc) mod (\d+)\b")


def is_probe_packet(packet: str, setup: Setup, client: ClientResult) -> bool:
    """Is this packet (a trace's `packet:` line) the probe's first packet (its TCP SYN, or its UDP datagram)?

    Its source address is the one the probe was sent from at every hook of the node (masquerade
    happens last, in postrouting, after the line is printed); replies come from elsewhere or, for
    a pod reaching itself, from the Service port. A TCP SYN is told from the rest of its
    connection by its flags; a datagram by the client's port.
    """
    if f" ip saddr {setup.source} " not in packet:
        return False
    if setup.protocol.upper() == "TCP":
        return bool(TCP_SYN.search(packet))
    port = client.local.rpartition(":")[2]
    return f" udp sport {port} " in f"{packet} " if port else " udp sport " in packet


class NftTraceWatcher:
    """nftables: the kernel's own trace of the probe's first packet (`nft monitor trace`)."""

    def __init__(self, netns: str, setup: Setup) -> None:
        self.setup = setup
        self.tracer = NftTracer(netns)

    def mark(self) -> object:
        return self.tracer.mark()

    def seen(self, mark: object, client: ClientResult) -> Seen:
        events = self.tracer.since(mark)  # type: ignore[arg-type]
        hits = rule_hits(packet_events(events, partial(is_probe_packet, setup=self.setup, client=client)))
        spread = next((int(m.group(1)) for h in hits if (m := _NUMGEN.search(h.rule))), 1)
        return Seen(tuple(map(str, hits)), frozenset(h.verdict for h in hits), spread)

    def close(self) -> None:
        self.tracer.close()
