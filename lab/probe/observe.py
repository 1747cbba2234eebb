"""What a probe's packets did, read after it was sent: the frames the captures saw of it (not an earlier
connection's), the backends it reached, the rules it met (each actor's Evidence, read only where its packets
went), the kernel counters it moved, its flow's conntrack entries. Kept from probe to probe: the client sockets
used so far, the captures' mark, each node's counters and the ICMP each node sent (lab/probe/icmp_sent.py)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

from lab.describe.topology import ProbeSpec, Topology
from lab.install.conntrack import Entry
from lab.install.echo import Arrival, EchoServers
from lab.probe.arp import arp_answers
from lab.probe.capture import Captures, Frame
from lab.probe.client import ClientResult
from lab.probe.craft import Segment
from lab.probe.evidence.base import Evidence, EvidenceError, RuleHit
from lab.probe.evidence.nftrace import TCP_SYN
from lab.probe.evidence.snmp import CounterFiles, Counters, moved
from lab.probe.flows import flow_entries
from lab.probe.icmp_sent import icmp_sent
from lab.probe.observation import ArpAnswer, Hop, Observation
from lab.probe.send import Sent
from lab.probe.why import SentIcmp, path_lines
from lab.realize.build import Realized
from lab.realize.families import host_port

_DPORT = re.compile(r" (tcp|udp) dport (\d+)\b")


@dataclass(frozen=True)
class Before:
    """Where the captures, backends and each actor's evidence stood before a probe, and the counters then of the
    actors it counts (the nodes, and the client)."""

    frames: int
    arrivals: int
    evidence: dict[str, object]  # each actor's mark, or the EvidenceError that kept it from being taken
    counted: list[str]
    counters: list[Counters]


@dataclass(frozen=True)
class Seen:
    """A probe's packets as observed: what the explanation (lab/probe/explain.py) is made of."""

    probe: ProbeSpec
    sent: Sent
    outcome: str
    frames: list[Frame]  # the probe's own frames, in the order captured
    shown: list[Frame]  # those that tell where it went
    arrivals: list[Arrival]
    hits: list[tuple[str, RuleHit]]  # the rules it met, in path order
    unread: list[str]  # "actor: why" for each actor whose rules could not be read
    deltas: dict[str, Counters]  # the counters that moved, per counted actor
    counts_limits: bool  # whether this kernel counts the ICMP errors it rate-limits
    entries: list[tuple[str, Entry]]  # its flow's conntrack entries, when its source port is known
    answered: tuple[str | None, str | None, str | None]  # the backend, its node and the source it saw, if any
    arp: tuple[ArpAnswer, ...] = ()  # the ARP answers the client got for the probe's destination

    def observation(
        self, names: Mapping[str, str], explanation: str, pcaps: tuple[str, ...], seconds: float
    ) -> Observation:
        """What judge and report read of the probe, with its why (lab/probe/explain.py) and its pcap files."""
        backend, node, source_ip = self.answered
        return Observation(
            outcome=self.outcome,
            backend=backend,
            node=node,
            source_ip=source_ip,
            source=names.get(source_ip or ""),
            error=self.sent.result.error,
            path=path_lines(self.shown),
            hops=_hops(self.shown),
            rules=tuple(self.hits),
            unread=tuple(self.unread),
            explanation=explanation,
            seconds=seconds,
            pcaps=pcaps,
            entry=entered.actor if (entered := _entered(self.frames, self.sent.result.local)) else None,
            entered_at=entered.at if entered else None,
            conntrack=tuple(f"{actor}: {entry.text}" for actor, entry in self.entries),
            flow=self.sent.history,
            counters=tuple((actor, tuple(delta.items())) for actor, delta in self.deltas.items() if delta),
            arp=self.arp,
        )


class Observer:
    """Reads what probes did from the session's captures, backends and evidence, one probe after another."""

    def __init__(
        self,
        realized: Realized,
        captures: Captures,
        echo: EchoServers,
        evidence: Mapping[str, Evidence],
        rule_actors: list[str],
        ports: set[int],
        snmp: CounterFiles,
    ) -> None:
        # The session's own resources (its evidence and ports are filled as it starts), read here, never closed.
        self.realized, self.captures, self.echo, self.evidence = realized, captures, echo, evidence
        self.rule_actors = rule_actors  # the actors whose rules are read, in the session's order
        self.ports = ports  # where the backends listen: a probe's packets go to these or its own port
        self.snmp = snmp  # each node's SNMP counters
        self.client_sockets: set[str] = set()  # "ip:port" of every client socket a probe used so far
        self.sent_icmp: list[SentIcmp] = []  # what each node's ICMP counters say it sent, probe by probe
        self.last_counters: dict[str, Counters] = {}  # each node's, after the previous probe
        self.frames_end = 0  # the captures' mark after the previous probe's frames

    def before(self, probe: ProbeSpec, running: Topology) -> Before:
        """The marks before `probe`, and what the nodes sent since the previous one (a kept flow's datagrams during
        steps) where the captures saw it go (a live lab forgets its frames between probes: then nothing was seen)."""
        arrivals, frames = self.echo.mark(), self.captures.mark()
        marks = {actor: _marked(evidence) for actor, evidence in self.evidence.items()}
        nodes = [n.name for n in running.nodes]
        counted = nodes + [probe.source] * (probe.source not in nodes)  # the nodes, and the client
        counters = self.snmp.read([self.realized.ns_of(actor) for actor in counted], _ipv6(running))
        between = {a: moved(self.last_counters.get(a, c), c) for a, c in zip(counted, counters, strict=True)}
        seen = self.captures.since(self.frames_end) if self.frames_end <= frames else []
        self.sent_icmp += icmp_sent(
            f"between probes, before {probe.name}", running.nodes, seen, between, None, _underlays(running)
        )
        return Before(frames, arrivals, marks, counted, counters)

    def observe(self, probe: ProbeSpec, running: Topology, sent: Sent, before: Before) -> Seen:
        """What `sent` did in the cluster running `running`, read since `before`."""
        result = sent.result
        # An earlier connection's last packets (the client's RST, a FIN) can reach a capture after this probe's
        # mark on a busy machine: frames from or to an earlier socket of a client are not this probe's.
        earlier = self.client_sockets - {result.local}
        frames = [f for f in self.captures.since(before.frames) if not earlier.intersection(f.sockets or ())]
        self.frames_end = self.captures.mark()
        if result.local:
            self.client_sockets.add(result.local)
        arrivals = self.echo.arrivals_since(before.arrivals)
        counted = before.counted
        counters_after = self.snmp.read([self.realized.ns_of(actor) for actor in counted], _ipv6(running))
        deltas = {a: moved(b, c) for a, b, c in zip(counted, before.counters, counters_after, strict=True)}
        self.last_counters = dict(zip(counted, counters_after, strict=True))
        # The rules' evidence right after the counters, before the nodes are asked anything else, in the order the
        # session has always read them.
        hits, unread = self._rule_hits(probe, running, frames, before)
        outcome = result.outcome
        if outcome == "dropped" and result.connected and not arrivals:
            outcome = "accepted"  # a socket that is no backend completed the handshake
        port = sent.port
        entries = list(sent.entries) or (
            flow_entries(self.realized, running.nodes, probe.protocol, port, probe.dst_ip) if port else []
        )
        # The frames that tell where the probe went: its opening and ending ones, and a kept connection's
        # requests, which are data segments.
        shown = [f for f in frames if f.opens_or_ends or (probe.flow and Segment.of(f) is not None)]
        return Seen(
            probe=probe,
            sent=sent,
            outcome=outcome,
            frames=frames,
            shown=shown,
            arrivals=arrivals,
            hits=hits,
            unread=unread,
            deltas=deltas,
            counts_limits="IcmpOutRateLimitHost" in counters_after[0],
            entries=entries,
            answered=_answered(result, arrivals),
            arp=arp_answers(frames, (n.name for n in running.nodes), probe.dst_ip),
        )

    def _rule_hits(
        self, probe: ProbeSpec, running: Topology, frames: list[Frame], before: Before
    ) -> tuple[list[tuple[str, RuleHit]], list[str]]:
        """The rules the probe's forward packets met on each actor they can have crossed, in path order, and the
        actors whose rules could not be read, with why. A trace whose marker is late (a machine too busy to deliver
        the kernel's events in time) costs this probe that actor's rules, not the run: captures and backends still
        tell what happened, and the probe says which rules it lacks."""
        forward = partial(_forward_packet, protocol=probe.protocol, ports=self.ports | {probe.dst_port})
        hits, unread = [], []
        for actor in _by_first_sight(met(probe, running, frames, self.rule_actors), frames):
            mark = before.evidence[actor]
            try:
                if isinstance(mark, EvidenceError):
                    raise mark
                hits += [(actor, hit) for hit in self.evidence[actor].hits(mark, forward)]
            except EvidenceError as exc:
                unread.append(f"{actor}: {exc}")
        return hits, unread

    def record_icmp(self, probe: ProbeSpec, running: Topology, seen: Seen) -> None:
        """The ICMP the nodes sent during the probe, for the probes after it."""
        self.sent_icmp += icmp_sent(
            f"at probe {probe.name}",
            running.nodes,
            seen.frames,
            seen.deltas,
            time.perf_counter(),
            _underlays(running),
        )


def _ipv6(running: Topology) -> bool:
    """Whether the cluster runs IPv6: then its nodes' IPv6 counters are read too."""
    return "IPv6" in running.cluster.families


def _underlays(running: Topology) -> tuple[str, str]:
    return running.cluster.underlay, running.cluster.secondary_underlay


def _marked(evidence: Evidence) -> object:
    """Where `evidence` stands before a probe, or the error that kept it from saying (read in _rule_hits)."""
    try:
        return evidence.mark()
    except EvidenceError as exc:
        return exc


def _answered(result: ClientResult, arrivals: list[Arrival]) -> tuple[str | None, str | None, str | None]:
    """The backend that answered, its node and the source address it saw: from its reply, else from its first
    arrival (a datagram or a spoofed packet no client socket hears the answer to)."""
    if result.reply:
        peer = result.reply.get("peer")
        return result.reply.get("backend"), result.reply.get("node"), host_port(peer)[0] if peer else ""
    if arrivals:
        return arrivals[0].backend, arrivals[0].node, arrivals[0].peer_ip
    return None, None, None


def met(probe: ProbeSpec, running: Topology, frames: list[Frame], rule_actors: list[str]) -> list[str]:
    """The actors whose rules the probe's packets can have met: the nodes a capture saw them on, the source's
    node (its own traffic to itself stays on lo, which no capture watches), and the actors beyond the nodes
    that hold rules (the fabric, routers). A node no capture saw them on kept its counters and its trace
    empty, so it is not read: a probe costs the nodes it crossed, not the cluster's size."""
    nodes = {n.name for n in running.nodes}
    pod = next((p for p in running.built_pods if p.name == probe.source), None)
    # IPv4 frames only: an ARP broadcast reaches every node's eth0 and says nothing of where the probe went.
    crossed = {f.actor for f in frames if f.addresses is not None} | {pod.node if pod else probe.source}
    return [a for a in rule_actors if a in crossed or a not in nodes]


def _entered(frames: list[Frame], local: str) -> Frame | None:
    """The frame the probe's connection entered the cluster with, its actor the node: the first to carry the
    client's own socket ("ip:port", as it left the client); else the first frame. A late packet of an earlier
    connection, NATed on its way (so no longer of that connection's socket), can reach a capture before this
    connection's first packet does."""
    own = next((f for f in frames if local and local in (f.sockets or ())), None)
    return own or next((f for f in frames if f.summary()), None)


def _hops(frames: list[Frame]) -> tuple[Hop, ...]:
    """The frames as hops, a repeat of the one before left out (as path_lines leaves it out)."""
    hops: list[Hop] = []
    for frame in frames:
        hop = Hop(frame.actor, frame.ifname, frame.outgoing, frame.summary() or "")
        if not hops or hops[-1] != hop:
            hops.append(hop)
    return tuple(hops)


def _forward_packet(packet: str, protocol: str, ports: set[int]) -> bool:
    """Is this traced packet one a probe sends towards its backend (its TCP SYN, or a datagram)?
    Replies are addressed to the client's port, which is none of the Service's or backends' ports."""
    match = _DPORT.search(packet)
    if not match or match.group(1) != protocol.lower() or int(match.group(2)) not in ports:
        return False
    return protocol.upper() != "TCP" or bool(TCP_SYN.search(packet))


def _by_first_sight(actors: list[str], frames: list[Frame]) -> list[str]:
    """Actors in the order the packet met them, so rule hits read in path order."""
    order = {}
    for frame in frames:
        order.setdefault(frame.actor, len(order))
    return sorted(actors, key=lambda a: order.get(a, len(order)))
