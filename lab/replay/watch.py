"""What a probe's packet met in the node's rules: the node's evidence (lab.probe.evidence), read for replay.

Counters and the nftables trace answer the same question for the replay loop (lab.replay.run): after one
connection, which rules did its first packet meet (readable lines, in order), did one of them DROP or REJECT
it, and among how many endpoints did the load-balancing rule that picked its endpoint choose.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from lab.probe.choices import jump_choices, numgen_spread, picking_chain
from lab.probe.client import ClientResult
from lab.probe.evidence.base import Evidence, RuleHit
from lab.probe.evidence.counters import CounterEvidence
from lab.probe.evidence.nftrace import TCP_SYN, TraceEvidence
from lab.replay.env import Setup


@dataclass(frozen=True)
class Seen:
    trace: tuple[str, ...]  # "table chain: rule", in the order the packet met the rules
    verdicts: frozenset[str]  # what those rules did, in iptables' words: DROP, REJECT, KUBE-SEP-..., ...
    spread: int = 1  # endpoints the rule that picked this packet's endpoint chose among (1: none)


@dataclass(frozen=True)
class Watcher:
    """The node's evidence, and how replay reads a probe's spread and first packet from it."""

    evidence: Evidence
    spread: Callable[[list[RuleHit]], int]
    # Is a trace's `packet:` line the probe's first packet, given what the client saw?
    first_packet: Callable[[str, ClientResult], bool]

    def seen(self, mark: object, client: ClientResult) -> Seen:
        """What the probe sent since `mark` met; `client` is what the client saw."""
        hits = self.evidence.hits(mark, partial(self.first_packet, client=client))
        return Seen(tuple(map(str, hits)), frozenset(h.verdict for h in hits), self.spread(hits))


def counter_watcher(netns: str, backend: str, rules: str, version: int = 4) -> Watcher:
    """iptables: the rules whose packet counters moved (`iptables-save -c`, and `ip6tables-save -c` for an IPv6
    packet, before and after); only the packet's family's move."""
    evidence = CounterEvidence(netns, backend, ipv6=version == 6)
    return Watcher(evidence, partial(_statistic_spread, rules=rules), _any_packet)


def nft_trace_watcher(netns: str, setup: Setup) -> Watcher:
    """nftables: the kernel's own trace of the probe's first packet (`nft monitor trace`)."""
    return Watcher(TraceEvidence(netns), numgen_spread, partial(is_probe_packet, setup=setup))


def _any_packet(packet: str, client: ClientResult) -> bool:
    return True  # counters are not asked: they count every packet alike


def _statistic_spread(hits: list[RuleHit], rules: str) -> int:
    """-m statistic: the chain whose rule drew this packet's choice, and its other choices."""
    chains = [chain for h in hits if (chain := picking_chain(h))]
    return max(1, len(jump_choices(rules, chains[0]))) if chains else 1


def is_probe_packet(packet: str, setup: Setup, client: ClientResult) -> bool:
    """Is this packet (a trace's `packet:` line) the probe's first packet (its TCP SYN, or its UDP datagram)?

    Its source address is the one the probe was sent from at every hook of the node (masquerade
    happens last, in postrouting, after the line is printed); replies come from elsewhere or, for
    a pod reaching itself, from the Service port. A TCP SYN is told from the rest of its
    connection by its flags; a datagram by the client's port.
    """
    if f" {'ip6' if setup.version == 6 else 'ip'} saddr {setup.source} " not in packet:
        return False
    if setup.protocol.upper() == "TCP":
        return bool(TCP_SYN.search(packet))
    port = client.local.rpartition(":")[2]
    return f" udp sport {port} " in f"{packet} " if port else " udp sport " in packet
