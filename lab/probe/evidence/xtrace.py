"""iptables-nft's rules as the kernel traced them, named as iptables-save names them.

With iptables' nf_tables backend every rule is an nftables rule, so the kernel reports each one a packet meets
(nftrace set by the lab-trace table, nftrace.py). Read that way a probe costs the packets it sent, where
`iptables-save -c` before and after costs every rule of every node it crossed (thousands with a Service of many
endpoints). What comes out is what the counters would have said: every packet that met a rule counts, replies
included, and the hits are ordered the same way (counters.counter_hits).

Two readers per node, because neither alone is enough:
- the kernel's trace events, read from its netlink group (nltrace.py), say which rules (table, chain, handle) each
  packet met. They are read with a 16 MiB buffer, as nft reads them; a burst (a routing loop's 64 hops) does not
  overflow it. Read there, no ruleset is loaded first, as `nft monitor trace` loads one on every node.
- `xtables-monitor --trace` prints each rule met as iptables-save writes it, which is how the evidence names
  rules. It reads with the default buffer and exits when a burst overflows it; then it is started again, and the
  rules it did not name are read from the node's tables (`nft -a list table` for the handles, in each chain's
  order, beside `iptables-nft-save` for the text).

Both families: ip6tables-nft's rules are the `ip6` family's tables, traced alike; a rule is known by its family,
table, chain and handle (each family's tables number their handles apart). xtables-monitor 1.8.9 prints an ip6
rule's text empty ("Parsing nftables rule failed"), so those are named from the listing (`nft -a list table ip6`,
`ip6tables-nft-save`). A probe travels in one family, so its hits are reported, as counters would be, by table
and chain.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack

from lab.install.tools import run_command
from lab.probe.evidence.base import EvidenceError, RuleHit
from lab.probe.evidence.counters import Counters, counter_hits
from lab.probe.evidence.nftrace import MARKER_PORT, MonitorLines, marker_missing
from lab.probe.evidence.nltrace import (
    NFPROTO,
    NFT_TRACETYPE_POLICY,
    NFT_TRACETYPE_RULE,
    ChainLister,
    NetlinkTrace,
    TraceRecord,
)
from lab.realize.terminate import close_all

RuleKey = tuple[str, str, str, int]  # family ("ip", "ip6"), table, chain, handle
_SAVE = {"ip": "iptables-nft-save", "ip6": "ip6tables-nft-save"}

# "TRACE: 2 72995f49 nat:OUTPUT:rule:0x3:JUMP:KUBE-SERVICES  -4 -t nat -A OUTPUT -m comment ... -j KUBE-SERVICES"
_PRINTED = re.compile(r"^TRACE: \d+ \w+ (\S+?):(\S+?):rule:(0x[0-9a-f]+):\S*\s+-4 -t \S+ -A \S+ (.*)$")
_CHAIN = re.compile(r"^\s*chain (\S+) \{")
_LISTED_RULE = re.compile(r" # handle (\d+)$")


def printed_rules(lines: list[str]) -> dict[RuleKey, str]:
    """xtables-monitor's lines → each IPv4 rule it printed, by family, table, chain and handle."""
    return {
        ("ip", m.group(1), m.group(2), int(m.group(3), 16)): m.group(4)
        for line in lines
        if (m := _PRINTED.match(line.strip()))
    }


def traced_counts(records: list[TraceRecord]) -> dict[tuple[str, str, str, int, str], int]:
    """The kernel's trace events → packets per (family, table, chain, handle, "") for a rule and (family, table,
    chain, -1, "policy VERDICT") for a policy, in iptables-nft's and ip6tables-nft's tables (families ip, ip6). A
    packet whose headers came before the window (the previous barrier's marker, still being traced) is not counted,
    nor the markers'."""
    counts: dict[tuple[str, str, str, int, str], int] = {}
    counted: dict[int, bool] = {}  # trace id → its latest headers are a packet to count (ids are reused)
    for record in records:
        if record.packet is not None:
            counted[record.trace_id] = record.family in _SAVE and not record.packet.is_marker()
        if record.family not in _SAVE or not counted.get(record.trace_id, False):
            continue
        if record.kind == NFT_TRACETYPE_RULE and record.handle >= 0:
            key = (record.family, record.table, record.chain, record.handle, "")
        elif record.kind == NFT_TRACETYPE_POLICY:
            key = (record.family, record.table, record.chain, -1, f"policy {record.policy}")
        else:
            continue
        counts[key] = counts.get(key, 0) + 1
    return counts


def listed_handles(nft_listing: str) -> dict[str, list[int]]:
    """Each chain's rule handles in the chain's order, from `nft -a list table ip TABLE` (a rule inserted at
    the top of a chain has a higher handle than the rules below it)."""
    handles: dict[str, list[int]] = {}
    chain = ""
    for line in nft_listing.splitlines():
        if match := _CHAIN.match(line):
            chain = match.group(1)
            handles[chain] = []
        elif chain and (match := _LISTED_RULE.search(line)):
            handles[chain].append(int(match.group(1)))
    return handles


def listed_rules(nft_listing: str, save_text: str, table: str, family: str = "ip") -> dict[RuleKey, str]:
    """One table's rules by handle: `nft -a list table FAMILY TABLE` gives each chain's handles in order, and
    `iptables-nft-save -t TABLE` (ip6tables-nft-save for ip6) each chain's rules in the same order."""
    handles = listed_handles(nft_listing)
    texts: dict[str, list[str]] = {}
    for line in save_text.splitlines():
        if line.startswith("-A "):
            name, _, rule = line[3:].partition(" ")
            texts.setdefault(name, []).append(rule)
    rules = {}
    for name, chain_handles in handles.items():
        if len(chain_handles) != len(texts.get(name, [])):
            continue  # a chain the two listings disagree on is left unnamed: its rules are then refused
        rules |= {(family, table, name, h): text for h, text in zip(chain_handles, texts.get(name, []), strict=True)}
    return rules


class XtablesTraceEvidence:
    """iptables-nft's rules met since the probe's mark, counted per packet like its counters."""

    def __init__(self, netns: str, traffic_between: bool = False) -> None:
        self.netns = netns
        with ExitStack() as undo:  # what started is stopped if the rest fails: no object is returned to close it
            self.printer = MonitorLines(netns, ("xtables-monitor", "--trace"))
            undo.callback(self.printer.close)
            self.trace = NetlinkTrace(netns, traffic_between=traffic_between)
            undo.callback(self.trace.close)
            self.lister = ChainLister(netns)
            undo.callback(self.lister.close)
            self._printer_subscribed()
            undo.pop_all()
        self.printed = 0  # the printer's lines read so far
        self.names: dict[RuleKey, str] = {}
        self.positions: dict[RuleKey, int] = {}  # where each rule stands in its chain, as counters list them

    def _printer_subscribed(self, timeout: float = 60.0) -> None:
        """The trace's reader subscribes at once, the printer once its process has started: markers until the
        printer has printed one, so that it names every rule a probe meets (as long as the trace's first barrier
        may take, on a busy emulated machine)."""
        started = time.monotonic()
        while not self.printer.wait_for(self._printed_marker(), 0, 0.05):
            waited = time.monotonic() - started
            if waited >= timeout or not self.printer.alive():
                stopped = "" if self.printer.alive() else "exited"
                raise EvidenceError(marker_missing(self.netns, waited, stopped, 0, "xtables-monitor --trace"))
            self.trace.barrier()

    def _printed_marker(self) -> str:
        """How xtables-monitor prints the last barrier's marker packet."""
        return f"SPORT={self.trace.marker_port} DPORT={MARKER_PORT} "

    def mark(self) -> int:
        return self.trace.mark()

    def hits(self, mark: object, wanted: Callable[[str], bool]) -> list[RuleHit]:
        self.trace.barrier()
        counts = traced_counts(self.trace.records(mark))  # type: ignore[arg-type]
        met = {key[:4] for key in counts if key[3] >= 0}
        self._name(met - self.names.keys())
        # A rule's place orders it only beside another entry of its chain (a rule, or the policy): a chain with one
        # (a Service's chain of a thousand endpoints, where one was picked) is never listed.
        entries = Counter(key[:3] for key in counts)
        self._position({key for key in met if entries[key[:3]] > 1} - self.positions.keys())
        # In chain order, as the counters list them: not by handle (a step's `iptables -I` rule stands first).
        in_order = sorted(counts.items(), key=lambda item: (*item[0][:3], self.positions.get(item[0][:4], -1)))
        counters: Counters = {}
        for (family, table, chain, handle, text), packets in in_order:
            key = (table, chain, handle, text or self.names[(family, table, chain, handle)])
            counters[key] = counters.get(key, 0) + packets
        return counter_hits({}, counters)

    def _name(self, unnamed: set[RuleKey]) -> None:
        """Learn the text of rules met: from what xtables-monitor printed (once it has printed this barrier's
        marker, it has printed everything before it), else from the node's tables."""
        if not unnamed:
            return
        if self.printer.alive():
            self.printer.wait_for(self._printed_marker(), self.printed, timeout=2.0)
        lines = self.printer.lines(self.printed)
        self.printed += len(lines)
        self.names |= printed_rules(lines)
        if not self.printer.alive():  # overflowed by a burst: start it again for the next probe
            self.printer.close()
            self.printer, self.printed = MonitorLines(self.netns, ("xtables-monitor", "--trace")), 0
        for family, table in sorted({(family, table) for family, table, _, _ in unnamed - self.names.keys()}):
            nft = run_command(self.netns, ("nft", "-a", "list", "table", family, table))
            save = run_command(self.netns, (_SAVE[family], "-t", table))
            self.names |= listed_rules(nft, save, table, family)
        if missing := sorted(unnamed - self.names.keys()):
            family, table, chain, handle = missing[0]
            raise EvidenceError(
                f"{self.netns}: the trace names rule handle {handle} of {family} {table} {chain}, which neither "
                "xtables-monitor nor the table's listing names: the rules that acted cannot be read"
            )

    def _position(self, unplaced: set[RuleKey]) -> None:
        """Learn where the rules met stand in their chains, from each chain's listing (once per chain until its
        rules change: a rule not seen before sends for the listing again). A chain alone costs its own rules, where
        its table's listing cost every endpoint's; asked over netlink, it costs no process."""
        for family, table, chain in sorted({key[:3] for key in unplaced}):
            handles = self.lister.handles(NFPROTO[family], table, chain)
            self.positions |= {(family, table, chain, handle): i for i, handle in enumerate(handles)}

    def restart(self) -> None:
        """New rules: handles are not reused within a table, but a restore may replace every rule."""
        self.names.clear()
        self.positions.clear()

    def close(self) -> None:
        close_all((self.printer.close, self.trace.close, self.lister.close))
