"""iptables' packet counters as evidence: `iptables-save -c` before and after a probe, the rules that moved.

On nodes with kubelet's ebtables KUBE-DEDUP chain (promiscuous-bridge) the bridge's counters are read
with them: that chain drops frames too. In a cluster with IPv6, `ip6tables-save -c` is read beside iptables': a
probe travels in one family, and a rule written alike in both families' tables counts the packets of either.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from lab.install.tools import run_command
from lab.probe.evidence.base import Evidence, RuleHit, in_backend

Counters = dict[tuple[str, str, int, str], int]  # (table, chain, position, rule) → packets

_COUNTED_RULE = re.compile(r"^\[(\d+):\d+\] -A (\S+) (.*)$")
_POLICY = re.compile(r"^:(\S+) (ACCEPT|DROP) \[(\d+):\d+\]$")


def parse_counters(save_text: str) -> Counters:
    """`iptables-save -c` → {(table, chain, position, rule): packets}; position keeps equal rules apart."""
    counters: Counters = {}
    table = ""
    positions: dict[tuple[str, str], int] = {}
    for line in save_text.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif policy := _POLICY.match(line):
            counters[(table, policy.group(1), -1, f"policy {policy.group(2)}")] = int(policy.group(3))
        elif rule := _COUNTED_RULE.match(line):
            chain = rule.group(2)
            pos = positions.get((table, chain), 0)
            positions[(table, chain)] = pos + 1
            counters[(table, chain, pos, rule.group(3))] = int(rule.group(1))
    return counters


# The order a forwarded or locally generated packet meets the hooks kube-proxy uses.
HOOK_ORDER = [
    ("raw", "PREROUTING"),
    ("mangle", "PREROUTING"),
    ("nat", "PREROUTING"),
    ("filter", "INPUT"),
    ("nat", "INPUT"),
    ("filter", "FORWARD"),
    ("raw", "OUTPUT"),
    ("mangle", "OUTPUT"),
    ("nat", "OUTPUT"),
    ("filter", "OUTPUT"),
    ("nat", "POSTROUTING"),
]


def counter_hits(before: Counters, after: Counters) -> list[RuleHit]:
    """Rules whose packet counters moved between two snapshots, in the order a packet walks them.

    Each built-in chain is walked in hook order and every jump to a user chain is followed where
    it was taken, so the list reads like a trace. ACCEPT policies are left out: they are where
    every packet that nothing stopped ends up, replies included.
    """
    moved = {key: packets - before.get(key, 0) for key, packets in after.items() if packets > before.get(key, 0)}
    by_chain: dict[tuple[str, str], list[RuleHit]] = {}
    for (table, chain, _, rule), packets in moved.items():
        by_chain.setdefault((table, chain), []).append(RuleHit(table, chain, rule, packets))
    ordered: list[RuleHit] = []
    seen: set[tuple[str, str]] = set()

    def walk(table: str, chain: str) -> None:
        if (table, chain) in seen:
            return
        seen.add((table, chain))
        for hit in by_chain.get((table, chain), []):
            if hit.rule != "policy ACCEPT":
                ordered.append(hit)
            if (table, hit.verdict) in by_chain:
                walk(table, hit.verdict)

    for table, chain in HOOK_ORDER:
        walk(table, chain)
    for table, chain in by_chain:
        walk(table, chain)
    return ordered


class CounterEvidence:
    """The rules whose packet counters moved since the snapshot taken after the previous probe, or, when
    packets flow between probes (kept flows), since the probe's own mark."""

    def __init__(
        self, netns: str, backend: str, bridge: bool = False, traffic_between: bool = False, ipv6: bool = False
    ) -> None:
        self.netns, self.backend, self.bridge, self.ipv6 = netns, backend, bridge, ipv6
        self.traffic_between = traffic_between
        self._last = self._snapshot()

    def _snapshot(self) -> Counters:
        counters = parse_counters(run_command(self.netns, (f"iptables-{self.backend}-save", "-c")))
        if self.ipv6:
            for key, packets in parse_counters(
                run_command(self.netns, (f"ip6tables-{self.backend}-save", "-c"))
            ).items():
                counters[key] = counters.get(key, 0) + packets
        if self.bridge:
            # The bridge's tables are named apart from iptables' of the same name.
            bridged = parse_counters(run_command(self.netns, ("ebtables-save", "-c")))
            counters |= {(f"bridge {table}", *rest): packets for (table, *rest), packets in bridged.items()}
        return counters

    def mark(self) -> object:
        if self.traffic_between:
            self._last = self._snapshot()
        return self._last  # else the snapshot after the previous probe is the one before this one

    def hits(self, mark: object, wanted: Callable[[str], bool]) -> list[RuleHit]:
        after = self._snapshot()
        hits = counter_hits(mark, after)  # type: ignore[arg-type]
        self._last = after
        return hits

    def restart(self) -> None:
        self._last = self._snapshot()  # replaced rules count from zero

    def close(self) -> None:
        """Nothing runs between two snapshots."""


class OtherBackendEvidence(CounterEvidence):
    """The counters of the iptables backend the node's other writers write in where kube-proxy writes in the other
    (cluster.tools.host.iptablesBackend): the kernel runs both backends' hooks, so a packet kube-proxy's rules
    accept may still be dropped there. Each rule met is named with its backend (`iptables-legacy filter FORWARD`)."""

    def hits(self, mark: object, wanted: Callable[[str], bool]) -> list[RuleHit]:
        return [replace(hit, table=in_backend(self.backend, hit.table)) for hit in super().hits(mark, wanted)]


class BothBackends:
    """A node's evidence where its rules are in both iptables backends: kube-proxy's (its trace or counters) and the
    other writers' (OtherBackendEvidence). A probe's hits are kube-proxy's then the other backend's: counters give
    no order between the two."""

    def __init__(self, kube_proxy: Evidence, other: OtherBackendEvidence) -> None:
        self.parts = (kube_proxy, other)

    def mark(self) -> object:
        return tuple(part.mark() for part in self.parts)

    def hits(self, mark: object, wanted: Callable[[str], bool]) -> list[RuleHit]:
        marks: tuple[object, ...] = mark  # type: ignore[assignment]  # what mark() returned
        return [hit for part, one in zip(self.parts, marks, strict=True) for hit in part.hits(one, wanted)]

    def restart(self) -> None:
        for part in self.parts:
            part.restart()

    def close(self) -> None:
        for part in self.parts:
            part.close()
