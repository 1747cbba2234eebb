"""probe: backends listening, captures running, probes sent one at a time.

Probes run strictly one after another so that each one's captures, backend arrivals and
rule hits belong to it alone. The rules a probe met are read from the kernel's trace: of the probe's
forward packets in nftables mode (`nft monitor trace`: nftables keeps no counters on kube-proxy's
rules), of every packet with iptables-nft (counted as its counters count them); iptables-legacy's from
its packet counters. One Evidence per actor whose rules are read (lab.probe.evidence), as lab replay
reads its node's.
"""

from __future__ import annotations

import random
import re
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from lab.describe.topology import ProbeSpec, Topology
from lab.install.conntrack import Entry, parse_entries
from lab.install.echo import EchoServers, Listener
from lab.install.sync_failure import failed_sync
from lab.install.tools import run_command
from lab.probe.capture import Captures, Frame, write_pcaps
from lab.probe.client import ClientResult, send
from lab.probe.craft import CRAFTS, Segment, crafted_segment, next_from, send_from, send_raw, spoofed_answer
from lab.probe.evidence.base import Evidence, RuleHit
from lab.probe.evidence.counters import CounterEvidence
from lab.probe.evidence.nftrace import TCP_SYN, TraceEvidence
from lab.probe.evidence.snmp import Counters, moved, read_counters
from lab.probe.evidence.xtrace import XtablesTraceEvidence
from lab.probe.fib import input_refusal
from lab.probe.flows import KeptFlow, history_lines
from lab.probe.icmp_sent import icmp_ratelimit, icmp_sent
from lab.probe.pmtu import path_mtu
from lab.probe.sockets import destination, silent_taker
from lab.probe.why import (
    BACKING_OFF,
    SentIcmp,
    crafted_fate,
    explain,
    path_lines,
    retransmitting,
    silent_reject,
    stray_answer,
    tcp_flags,
)
from lab.realize.build import Realized
from lab.realize.terminate import close_all, deferred


@dataclass(frozen=True)
class Observation:
    outcome: str
    backend: str | None = None
    node: str | None = None
    source_ip: str | None = None
    source: str | None = None  # the name of source_ip, if the topology has one
    error: str = ""
    path: tuple[str, ...] = ()
    rules: tuple[tuple[str, RuleHit], ...] = ()  # (node, rule) whose counters moved
    explanation: str = ""
    seconds: float = 0.0
    pcaps: tuple[str, ...] = field(default=())
    entry: str | None = None  # the node the connection entered the cluster through (first node it was seen on)
    # Several connections: the sources they saw named from each one's entry node ("entry", "entry/tunl0"),
    # which stays the same across runs where the entries a router picks do not.
    source_by_entry: str | None = None
    # A flow from a fixed source port, or kept: its conntrack entries after the attempt, "node: entry" as
    # conntrack -L prints them.
    conntrack: tuple[str, ...] = ()
    # A kept flow checked: what its exchanges met since the previous check, step by step (lab/probe/flows.py).
    flow: tuple[str, ...] = ()
    hops: tuple[Hop, ...] = ()  # `path` as data: where each frame was seen, with its addresses there
    # Several connections (judge/attempts.py): each one's hops, in the order they were sent (`hops` is one of them).
    connections: tuple[tuple[Hop, ...], ...] = ()
    # The kernel's SNMP counters that moved during the probe, on each node and the client (lab/probe/evidence/snmp.py).
    counters: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()


@dataclass(frozen=True)
class Hop:
    """A frame of the probe where a capture saw it: the actor, its interface, the direction, and the packet's
    addresses there (after every NAT before that point), as `src:port > dst:port proto [flags]`."""

    actor: str
    ifname: str
    outgoing: bool
    packet: str


def listeners(realized: Realized) -> list[Listener]:
    topo = realized.topology
    wanted: dict[str, set[tuple[int, str]]] = {
        p.name: {(pp.port, pp.protocol) for pp in p.ports} for p in topo.built_pods
    }
    for svc in topo.services:
        for port in svc.ports:
            for ep in port.endpoints:  # a hand-written EndpointSlice's endpoint may be an external host
                wanted.setdefault(ep.pod, set()).add((ep.port, port.protocol))
    nodes = {p.name: p.node for p in topo.built_pods}
    # A crafted segment, a kept flow or a sized request needs a connection that stays established: then every
    # TCP backend holds its connections.
    hold = any(probe.craft or probe.keep_every or probe.size for probe in topo.probes)
    return [
        Listener(name, nodes.get(name, ""), realized.ns_of(name), port, proto, hold=hold and proto == "TCP")
        for name, ports in wanted.items()
        for port, proto in sorted(ports)
    ]


class ProbeSession:
    def __init__(self, realized: Realized, timeout: float = 0.5, pcap_dir: Path | None = None) -> None:
        self.realized = realized
        self.topo: Topology = realized.topology
        self.timeout = timeout
        self.pcap_dir = pcap_dir
        self.echo = EchoServers()
        self.captures = Captures()
        self.names = self.topo.address_names()
        self.evidence: dict[str, Evidence] = {}
        self.flows: dict[str, KeptFlow] = {}  # by the name of the probe that kept it
        self.ports: set[int] = set()  # where the backends listen: a probe's packets go to these or its own port
        self.client_sockets: set[str] = set()  # "ip:port" of every client socket a probe used so far
        self.sync_failures: dict[str, tuple[str, str]] = {}  # node -> (what failed, why) of its last sync
        # Actors whose rules are read: the nodes, and the fabric or routers when they hold rules.
        self.rule_actors = [n.name for n in self.topo.nodes] + _actors_with_rules(self.topo)
        self.traced = {n.name for n in self.topo.nodes} if self.topo.cluster.proxy_mode == "nftables" else set()
        self.ebtables = self.topo.cluster.cni == "bridge" and self.topo.cluster.hairpin_mode == "promiscuous-bridge"
        self.sent_icmp: list[SentIcmp] = []  # what each node's ICMP counters say it sent, probe by probe
        self.last_counters: dict[str, Counters] = {}  # each node's, after the previous probe
        self.frames_end = 0  # the captures' mark after the previous probe's frames

    def __enter__(self) -> ProbeSession:
        try:
            for listener in listeners(self.realized):
                self.echo.listen(listener)
                self.ports.add(listener.port)
            for node in self.topo.nodes:
                ns = self.realized.namespaces[node.name]
                ports = {
                    self.realized.pod_ports[p.name]
                    for p in self.topo.pods_on(node.name)
                    if p.name in self.realized.pod_ports
                }
                tunnel = {self.realized.tunnel_device} - {""}
                self.captures.add(node.name, ns, {"eth0", *ports, *tunnel})
            self.echo.start()
            self.captures.start()
            self._start_evidence()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        closeables = (*self.flows.values(), self.echo, self.captures, *self.evidence.values())
        close_all(closeable.close for closeable in closeables)

    def _start_evidence(self) -> None:
        """Every rule actor's evidence, started side by side: a tracer's start is mostly waiting for its monitor
        to subscribe, which at a hundred nodes one after another took seconds. What started is kept (and closed
        on leaving) even when another failed; SIGTERM waits for them all (a tracer started after the run stopped
        waiting would never be stopped)."""
        with deferred():
            with ThreadPoolExecutor(max_workers=16, thread_name_prefix="evidence") as pool:
                started = {
                    actor: pool.submit(self._evidence, self.realized.namespaces[actor], actor in self.traced)
                    for actor in self.rule_actors
                }
            done = {actor: future for actor, future in started.items() if future.exception() is None}
            self.evidence = {actor: future.result() for actor, future in done.items()}
        failures = [future.exception() for future in started.values() if future.exception() is not None]
        if failures:
            raise failures[0]  # type: ignore[misc]  # an exception, as exception() returned it

    def _evidence(self, ns: str, traced: bool) -> Evidence:
        kept = any(probe.keep_every for probe in self.topo.probes)  # packets flow between probes
        if traced:
            return TraceEvidence(ns, traffic_between=kept)
        backend = self.topo.cluster.iptables_backend
        if backend == "nft" and not self.ebtables:
            # The kernel's trace of iptables-nft's rules: a probe costs its packets, not the rules' number.
            return XtablesTraceEvidence(ns, traffic_between=kept)
        # iptables-legacy keeps its rules' counters only; kubelet's KUBE-DEDUP (promiscuous-bridge) is ebtables'.
        return CounterEvidence(ns, backend, bridge=self.ebtables, traffic_between=kept)

    def note(self, text: str) -> None:
        """Something done to the cluster now, in every kept flow's history."""
        for flow in self.flows.values():
            flow.note(text)

    def kube_proxy_synced(self, said: tuple[str, ...]) -> None:
        """What a kube-proxy sync on every node said ("node: line"): the nodes where it failed, until a later sync
        there succeeds."""
        self.sync_failures = {
            node: failed for node, _, line in (entry.partition(": ") for entry in said) if (failed := failed_sync(line))
        }

    def rules_changed(self, topo: Topology) -> None:
        """Rules were replaced (a step), now kube-proxy's for `topo`: their counters start again from zero."""
        self.topo = topo
        for evidence in self.evidence.values():
            evidence.restart()

    def run(self, probe: ProbeSpec) -> Observation:
        """The probe, with every kept flow waiting meanwhile; a flow the probe keeps goes on after it."""
        with ExitStack() as stack:
            for flow in self.flows.values():
                stack.enter_context(flow.paused())
            observed = self._observe(probe)
        if probe.name in self.flows and probe.keep_every:
            self.flows[probe.name].resume()
        return observed

    def _observe(self, probe: ProbeSpec) -> Observation:
        start = time.perf_counter()
        arrivals_mark, frames_mark = self.echo.mark(), self.captures.mark()
        marks = {actor: evidence.mark() for actor, evidence in self.evidence.items()}
        nodes = [n.name for n in self.topo.nodes]
        counted = nodes + [probe.source] * (probe.source not in nodes)  # the nodes, and the client
        counters_before = read_counters([self.realized.ns_of(actor) for actor in counted])
        # What the nodes sent between probes (a kept flow's datagrams during steps), and where the captures saw it
        # go (a live lab forgets its frames between probes: then nothing was seen).
        between = {a: moved(self.last_counters.get(a, c), c) for a, c in zip(counted, counters_before, strict=True)}
        seen = self.captures.since(self.frames_end) if self.frames_end <= frames_mark else []
        self.sent_icmp += icmp_sent(
            f"between probes, before {probe.name}", self.topo.nodes, seen, between, None, self.topo.cluster.underlay
        )
        source = self.realized.ns_of(probe.source)
        crafted, reached, history, port, entries = "", True, [], probe.source_port, []
        if probe.craft:
            result, crafted, reached, entries = self._crafted(probe, frames_mark)
        elif probe.source_address:
            result = self._spoofed(probe, source, frames_mark, arrivals_mark)
        elif probe.flow:
            kept = self.flows[probe.flow]
            result = kept.exchange()
            history = history_lines(kept.since_check(), kept.history[0].at)
            port = kept.port
        elif probe.keep_every:
            kept = KeptFlow(source, probe.dst_ip, probe.dst_port, probe.protocol, self.timeout, port, probe.keep_every)
            self.flows[probe.name], result, port = kept, kept.first, kept.port
        else:
            result = send(
                source, probe.dst_ip, probe.dst_port, probe.protocol, self.timeout, port=port, size=probe.size
            )
        # An earlier connection's last packets (the client's RST, a FIN) can reach a capture after this probe's
        # mark on a busy machine: frames from or to an earlier socket of a client are not this probe's.
        earlier = self.client_sockets - {result.local}
        frames = [f for f in self.captures.since(frames_mark) if not earlier.intersection(f.sockets or ())]
        self.frames_end = self.captures.mark()
        if result.local:
            self.client_sockets.add(result.local)
        arrivals = self.echo.arrivals_since(arrivals_mark)
        counters_after = read_counters([self.realized.ns_of(actor) for actor in counted])
        deltas = {a: moved(b, c) for a, b, c in zip(counted, counters_before, counters_after, strict=True)}
        self.last_counters = dict(zip(counted, counters_after, strict=True))
        counts_limits = "IcmpOutRateLimitHost" in counters_after[0]
        unanswered = partial(self._unanswered, frames=frames, deltas=deltas, counts_limits=counts_limits)
        forward = partial(_forward_packet, protocol=probe.protocol, ports=self.ports | {probe.dst_port})
        hits = []
        for actor in _by_first_sight(self._met(probe, frames), frames):
            hits += [(actor, hit) for hit in self.evidence[actor].hits(marks[actor], forward)]
        backend = node_name = source_ip = None
        if result.reply:
            backend, node_name = result.reply.get("backend"), result.reply.get("node")
            source_ip = result.reply.get("peer", "").rsplit(":", 1)[0]
        elif arrivals:
            backend, node_name, source_ip = arrivals[0].backend, arrivals[0].node, arrivals[0].peer_ip
        pcaps: tuple[str, ...] = ()
        if self.pcap_dir is not None:
            directory = self.pcap_dir / self.topo.scenario / _slug(self.topo.variant_label) / _slug(probe.name)
            pcaps = tuple(str(p) for p in write_pcaps(frames, directory))
        outcome = result.outcome
        if outcome == "dropped" and result.connected and not arrivals:
            outcome = "accepted"  # a socket that is no backend completed the handshake
        entries = entries or (self._flow_entries(probe.protocol, port) if port else [])
        # The frames that tell where the probe went: its opening and ending ones, and a kept connection's
        # requests, which are data segments.
        shown = [f for f in frames if f.opens_or_ends or (probe.flow and Segment.of(f) is not None)]
        explanation = (
            self._accepted(frames)
            if outcome == "accepted"
            else stray_answer(outcome, frames, f"{probe.dst_ip}:{probe.dst_port}")
            or explain(
                outcome, hits, shown, arrivals != [] and not result.reply, self._answer(result), self._lost, unanswered
            )
        )
        if probe.flow and outcome == "dropped" and not shown and probe.protocol == "TCP":
            explanation = _held_back(explanation, retransmitting(self.flows[probe.flow]), deltas[probe.source])
        self.sent_icmp += icmp_sent(
            f"at probe {probe.name}", self.topo.nodes, frames, deltas, time.perf_counter(), self.topo.cluster.underlay
        )
        if outcome == "dropped" and (followed := self._followed(entries)):
            explanation = f"{followed}; {explanation}"
        if crafted and not reached:
            drops = [f"{node} by {hit}" for node, hit in hits if hit.verdict == "DROP"]
            crafted += f", dropped on {drops[-1]}" if drops else ""
        if crafted:
            explanation = f"{crafted}; then: {explanation}" if explanation else crafted
        if probe.size and result.local:
            target = f"{probe.dst_ip}:{probe.dst_port}"
            said = path_mtu(frames, result.local, target, self.names, self.topo.cluster.proxy_mode)
            # Once connected, the generic why (about the handshake and its answer) says nothing of the big request.
            explanation = said if result.connected or not explanation else f"{explanation}; {said}"
        if self.sync_failures:  # whatever happened, it happened without the Service rules of that sync
            failed = "; ".join(f"{what} on {node}: {why}" for node, (what, why) in self.sync_failures.items())
            explanation = f"{failed}; {explanation}" if explanation else failed
        return Observation(
            outcome=outcome,
            backend=backend,
            node=node_name,
            source_ip=source_ip,
            source=self.names.get(source_ip or ""),
            error=result.error,
            path=path_lines(shown),
            hops=_hops(shown),
            rules=tuple(hits),
            explanation=explanation,
            seconds=time.perf_counter() - start,
            pcaps=pcaps,
            entry=_entry(frames, result.local),
            conntrack=tuple(f"{node}: {entry.text}" for node, entry in entries),
            flow=tuple(history),
            counters=tuple((actor, tuple(delta.items())) for actor, delta in deltas.items() if delta),
        )

    def _unanswered(self, node: str, frames: list[Frame], deltas: dict[str, Counters], counts_limits: bool) -> str:
        """Why `node` sent no ICMP error for the probe's packet it rejected: its counters, and the ICMP it had sent
        the packet's source (as the node received it) before."""
        received = [f for f in frames if f.actor == node and not f.outgoing and f.addresses]
        host = received[-1].addresses[0] if received and received[-1].addresses else "the client"
        ms = icmp_ratelimit(self.realized.namespaces[node])
        return silent_reject(node, host, deltas.get(node, {}), counts_limits, self.sent_icmp, ms, time.perf_counter())

    def _met(self, probe: ProbeSpec, frames: list[Frame]) -> list[str]:
        """The actors whose rules the probe's packets can have met: the nodes a capture saw them on, the source's
        node (its own traffic to itself stays on lo, which no capture watches), and the actors beyond the nodes
        that hold rules (the fabric, routers). A node no capture saw them on kept its counters and its trace
        empty, so it is not read: a probe costs the nodes it crossed, not the cluster's size."""
        nodes = {n.name for n in self.topo.nodes}
        pod = next((p for p in self.topo.built_pods if p.name == probe.source), None)
        # IPv4 frames only: an ARP broadcast reaches every node's eth0 and says nothing of where the probe went.
        met = {f.actor for f in frames if f.addresses is not None} | {pod.node if pod else probe.source}
        return [a for a in self.rule_actors if a in met or a not in nodes]

    def _crafted(self, probe: ProbeSpec, frames_mark: int) -> tuple[ClientResult, str, bool, list[tuple[str, Entry]]]:
        """Open a connection that stays established, have the backend's side send the probe's crafted segment
        (lab/probe/craft.py), then send one more request on the connection: its result, what became of the
        crafted segment, whether it reached the client, and the connection's conntrack entries then (before it
        is closed)."""
        craft = CRAFTS[probe.craft]
        held = KeptFlow(self.realized.ns_of(probe.source), probe.dst_ip, probe.dst_port, "TCP", self.timeout)
        try:
            first = held.first
            if first.outcome != "delivered" or not first.reply:
                return first, "the connection was never established: nothing to craft on", True, []
            (b_ip, b_port), (c_ip, c_port) = (_address(first.reply[k]) for k in ("local", "peer"))
            time.sleep(0.05)  # the backend's answer reaches the captures
            following = next_from(self.captures.since(frames_mark), b_ip, b_port, c_ip, c_port)
            if following is None:
                return first, "the backend's answer was not captured: its sequence numbers are unknown", True, []
            mark = self.captures.mark()
            packet = crafted_segment(craft, b_ip, b_port, c_ip, c_port, *following)
            send_raw(self.realized.ns_of(first.reply["backend"]), packet, c_ip)
            time.sleep(0.2)
            seq = (following[0] + craft.offset) % (1 << 32)
            said, reached = crafted_fate(self.captures.since(mark), craft, seq, c_ip, self.names)
            result = held.exchange()
            return result, said, reached, self._flow_entries("TCP", held.port)
        finally:
            held.close()

    def _spoofed(self, probe: ProbeSpec, netns: str, frames_mark: int, arrivals_mark: int) -> ClientResult:
        """A SYN or datagram from probe.source_address, which the sender does not own: no socket hears the
        answer, so what the captures and the backends saw (until the probe's timeout) says what happened."""
        sport = probe.source_port or random.randint(32768, 60999)
        send_from(netns, probe.source_address, probe.dst_ip, probe.dst_port, probe.protocol, sport)
        deadline = time.monotonic() + self.timeout
        while True:
            # Frames first: a backend records its arrival before it answers, so whatever the frames show of the
            # answer's fate, the arrival is already there.
            frames = self.captures.since(frames_mark)
            arrivals = self.echo.arrivals_since(arrivals_mark)
            seen = spoofed_answer(frames, arrivals, self.realized.pod_ports, probe.protocol, probe.source_address)
            if seen is not None or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        sent = f"{probe.source_address}:{sport}"
        return seen or ClientResult("dropped", error=f"nothing answered {sent} before the timeout", local=sent)

    def _flow_entries(self, protocol: str, port: int) -> list[tuple[str, Entry]]:
        """The conntrack entries of a flow (its client's source port) on every node."""
        found = []
        for node in self.topo.nodes:
            listing = run_command(
                self.realized.ns_of(node.name),
                ("conntrack", "-L", "-p", protocol.lower(), "--orig-port-src", str(port)),
            )
            found += [(node.name, entry) for entry in parse_entries(listing)]
        return found

    def _followed(self, flow: list[tuple[str, Entry]]) -> str:
        """A dropped flow that kept a conntrack entry NATed to a pod that is gone: it followed that entry."""
        running = {p.ip for p in self.topo.pods}
        for node, entry in flow:
            if entry.reply_src in self.names and entry.reply_src not in running and entry.reply_src != entry.orig_dst:
                who = self.names[entry.reply_src]
                return (
                    f"followed {node}'s conntrack entry to {entry.reply_src} ({who}, deleted), which no kube-proxy "
                    f"cleanup removed: {entry.text}"
                )
        return ""

    def _answer(self, result: ClientResult) -> str:
        """What came back to the client as it says it, an ICMP error's sender named."""
        if result.icmp is None:
            return result.error
        icmp, sender = result.icmp, result.icmp.sender
        if sender == self.topo.cluster.gateway_ip:
            who = f"{sender} (the underlay's gateway, outside the cluster: not Kubernetes)"
        else:
            who = f"{sender} ({self.names[sender]})" if sender in self.names else sender
        return f"ICMP {icmp.name} (type {icmp.type} code {icmp.code}) from {who}"

    def _accepted(self, frames: list[Frame]) -> str:
        """Who completed the handshake of a connection nothing answered: the SYN-ACK where it was first seen."""
        said = "the TCP handshake completed, but nothing answered before the timeout"
        synack = next((f for f in frames if tcp_flags(f) == "S."), None)
        if synack is None or synack.addresses is None or (seg := Segment.of(synack)) is None:
            return said
        said += f"; the SYN-ACK was first seen {synack.where} ({synack.summary()})"
        taker = silent_taker(self.topo, synack.actor, self.realized.ns_of(synack.actor), "TCP", seg.src, seg.sport)
        return f"{said}: {taker}" if taker else said

    def _lost(self, last: Frame, hits: list[tuple[str, RuleHit]]) -> str:
        """Where the packet last seen as `last` went, no rule having dropped it."""
        seen = f"last seen {last.where} ({last.summary()})"
        receiver = self._receiver(last)
        if receiver is None:
            return f"{seen}; not seen again: lost beyond {last.actor}, where no capture watches (the underlay, hosts)"
        actor, iif = receiver
        if (flooded := self._flooded(last, actor)) is not None:
            return f"{seen}; {flooded}"
        addresses = last.addresses
        if addresses and (refused := input_refusal(self.realized.ns_of(actor), *addresses, iif)):
            return f"{seen}; {actor}'s kernel refuses it on input: {refused}"
        if (aimed := destination(last)) and (
            taker := silent_taker(self.topo, actor, self.realized.ns_of(actor), *aimed)
        ):
            return f"{seen}; {taker}"
        nat = [h for n, h in hits if n == actor and h.table == "nat"]
        after = f" after nat {nat[-1].chain}" if nat else ""
        return f"{seen}; lost on {actor}{after} without a rule dropping it"

    def _flooded(self, frame: Frame, pod: str) -> str | None:
        """A frame leaving a node by a pod's veth that is addressed to another MAC: the bridge flooded it (it
        knows no port for that MAC, e.g. the pod that had it is gone) and the pod discards it before routing."""
        if not (frame.outgoing and frame.ifname in self.realized.pod_ports.values()) or len(frame.data) < 6:
            return None
        wanted = ":".join(f"{b:02x}" for b in frame.data[:6])
        own = run_command(self.realized.ns_of(pod), ("cat", "/sys/class/net/eth0/address")).strip()
        if wanted == own:
            return None
        return (
            f"it is addressed to MAC {wanted}, not {pod}'s ({own}): {frame.actor}'s bridge flooded it to every port, "
            f"knowing no port for that MAC (as for a deleted pod's, which the node's neighbour cache still holds), "
            f"and {pod} discards a frame that is not its own"
        )

    def _receiver(self, frame: Frame) -> tuple[str, str] | None:
        """Who receives the frame, and on which interface its route lookup sees it (None: it left for the
        underlay or a tunnel). A frame leaving a node by a pod's veth arrives in that pod; one arriving on a
        bridge port is routed as arriving on the bridge."""
        pods = {port: pod for pod, port in self.realized.pod_ports.items()}
        if frame.outgoing:
            return (pods[frame.ifname], "eth0") if frame.ifname in pods else None
        bridged = frame.ifname in pods and self.topo.cluster.cni == "bridge"
        return frame.actor, "cni0" if bridged else frame.ifname


_DPORT = re.compile(r" (tcp|udp) dport (\d+)\b")


def _entry(frames: list[Frame], local: str) -> str | None:
    """The node the probe's connection entered through: the first to see the client's own socket ("ip:port", as
    it left the client); else the first frame's. A late packet of an earlier connection, NATed on its way (so no
    longer of that connection's socket), can reach a capture before this connection's first packet does."""
    own = next((f.actor for f in frames if local and local in (f.sockets or ())), None)
    return own or next((f.actor for f in frames if f.summary()), None)


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


def _actors_with_rules(topo: Topology) -> list[str]:
    fabric = ["fabric"] if topo.load_balancers or topo.egress else []
    return fabric + [e.name for e in topo.externals if e.masquerade]


def _by_first_sight(actors: list[str], frames: list[Frame]) -> list[str]:
    """Actors in the order the packet met them, so rule hits read in path order."""
    order = {}
    for frame in frames:
        order.setdefault(frame.actor, len(order))
    return sorted(actors, key=lambda a: order.get(a, len(order)))


def _held_back(explanation: str, retransmitting: bool, client: Counters) -> str:
    """A kept connection's request no capture saw: the client's own counters say whether its kernel sent it."""
    sent = client.get("TcpOutSegs", 0)
    if sent:
        return f"{explanation}: the client's kernel counted TcpOutSegs +{sent}, which no capture saw"
    said = f"{explanation}: the client's kernel sent no segment during the probe (TcpOutSegs +0)"
    return f"{said}; {BACKING_OFF}" if retransmitting else said


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def _address(text: str) -> tuple[str, int]:
    ip, _, port = text.rpartition(":")
    return ip, int(port)
