"""iptables-nft's rules as the kernel traced them: `xtables-monitor --trace` inside a node namespace.

With iptables' nf_tables backend every rule is an nftables rule, so the kernel reports each one a packet meets
(nftrace set by the lab-trace table, nftrace.py), and xtables-monitor prints it as iptables-save writes it. Read
that way a probe costs the packets it sent, where `iptables-save -c` before and after costs every rule of every
node it crossed (thousands with a Service of many endpoints). What comes out is what the counters would have
said: every packet that met a rule counts, replies included, and the hits are ordered the same way
(counters.counter_hits), so a probe's evidence is the same either way.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from lab.probe.evidence.base import RuleHit
from lab.probe.evidence.counters import Counters, counter_hits
from lab.probe.evidence.nftrace import MARKER_PORT, KernelTrace

_PACKET = re.compile(r"^PACKET: \d+ (\w+) (.*)$")
# "TRACE: 2 72995f49 nat:OUTPUT:rule:0x3:JUMP:KUBE-SERVICES  -4 -t nat -A OUTPUT -m comment ... -j KUBE-SERVICES"
_RULE = re.compile(r"^TRACE: \d+ (\w+) (\S+?):(\S+?):rule:(0x[0-9a-f]+):\S*\s+-4 -t \S+ -A \S+ (.*)$")
_POLICY = re.compile(r"^TRACE: \d+ (\w+) (\S+?):(\S+?):policy:(\w+)\s*$")
LOOPBACK_ONLY = " SRC=127.0.0.1 DST=127.0.0.1 "  # the tracer's markers and the ICMP errors they cause


def traced_counters(lines: list[str]) -> Counters:
    """xtables-monitor's lines → packets per rule, keyed as parse_counters keys `iptables-save -c` (the rule's
    handle for its position: handles grow in the order iptables-restore wrote the rules)."""
    counts: Counters = {}
    # trace id → its latest PACKET line is loopback-only (ids are reused). An id whose PACKET line came before the
    # window is a packet from before the probe (the previous barrier's marker, still being traced): not counted.
    marker: dict[str, bool] = {}
    for line in lines:
        line = line.strip()
        if packet := _PACKET.match(line):
            marker[packet.group(1)] = LOOPBACK_ONLY in f" {packet.group(2)} "
            continue
        if rule := _RULE.match(line):
            trace_id, table, chain, handle, text = rule.groups()
            key = (table, chain, int(handle, 16), text)
        elif policy := _POLICY.match(line):
            trace_id, table, chain, verdict = policy.groups()
            key = (table, chain, -1, f"policy {verdict}")
        else:
            continue
        if table != "lab-trace" and not marker.get(trace_id, True):
            counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: item[0][:3]))


class XtablesTraceEvidence(KernelTrace):
    """iptables-nft's rules met since the probe's mark, counted per packet like its counters."""

    def __init__(self, netns: str) -> None:
        super().__init__(netns, ("xtables-monitor", "--trace"), lambda sport: f"SPORT={sport} DPORT={MARKER_PORT} ")

    def hits(self, mark: object, wanted: Callable[[str], bool]) -> list[RuleHit]:
        return counter_hits({}, traced_counters(self.lines_since(mark)))  # type: ignore[arg-type]
