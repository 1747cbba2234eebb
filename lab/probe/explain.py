"""A probe's `why`, from what was observed of it (lab/probe/observe.py): the generic why of lab/probe/why.py,
then what a kind of probe adds (a kept connection's request no capture saw, a crafted segment's fate, a big
request's path MTU), a conntrack entry a dropped flow followed, and a failed kube-proxy sync. Where the frames
do not say enough, the kernel is asked, and only then: where a packet went that no rule dropped (its route
lookup, the socket that took it, the MAC it was flooded to), why a node sent no ICMP error (its rate limit)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from functools import partial

from lab.describe.topology import Topology
from lab.install.actors import masq_agent_reasons
from lab.install.conntrack import Entry
from lab.install.tools import run_command
from lab.probe.capture import Frame
from lab.probe.client import ClientResult
from lab.probe.craft import Segment
from lab.probe.diagnosis import Bridge, PlacedReasons, diagnose
from lab.probe.evidence.base import RuleHit
from lab.probe.evidence.snmp import Counters
from lab.probe.fib import input_refusal
from lab.probe.icmp_sent import icmp_budget
from lab.probe.observation import Observation
from lab.probe.observe import Seen
from lab.probe.pmtu import path_mtu
from lab.probe.send import Crafted
from lab.probe.sockets import destination, silent_taker
from lab.probe.why import BACKING_OFF, SentIcmp, crafted_fate, explain, silent_reject, stray_answer, tcp_flags
from lab.realize.build import Realized
from lab.realize.families import address
from lab.render.dataplane import NodeDataplane, rule_reasons
from lab.render.kubeproxy.because import Because, kubelet_hairpin_mode


class RuleReasons:
    """Why each node's rules were written (render/kubeproxy/because.py): kube-proxy's, rendered once per node for
    the workload the probes run against and again after a step changes it, and ip-masq-agent's where it runs."""

    def __init__(self) -> None:
        self.running: Topology | None = None
        self.by_node: dict[str, tuple[Because, ...]] = {}
        self._placed: dict[str, PlacedReasons] = {}

    def rendered(self, running: Topology, planes: Mapping[str, NodeDataplane]) -> None:
        """The reasons render gave with `planes`, what kube-proxy writes for `running` on every node: the probes
        of a cluster of a hundred nodes and ten thousand endpoints asked for them again node by node, each node
        rendered alone (without the rules the nodes share) for seconds a probe."""
        self.running, self._placed = running, {}
        self.by_node = {node: plane.reasons + _agent_reasons(running, node) for node, plane in planes.items()}

    def of(self, running: Topology, node: str) -> tuple[Because, ...]:
        if running is not self.running:
            self.running, self.by_node, self._placed = running, {}, {}
        if node not in self.by_node:
            self.by_node[node] = rule_reasons(running, node) + _agent_reasons(running, node)
        return self.by_node[node]

    def placed(self, running: Topology, node: str) -> PlacedReasons:
        """The node's reasons indexed for diagnoses, once per workload rather than once per probe's attempt."""
        reasons = self.of(running, node)
        if node not in self._placed:
            self._placed[node] = PlacedReasons.of(reasons)
        return self._placed[node]


def _agent_reasons(running: Topology, node: str) -> tuple[Because, ...]:
    """ip-masq-agent's reasons on the node, where it runs."""
    agent = running.masq_agent
    return masq_agent_reasons(agent) if agent is not None and node in agent.nodes else ()


class Explainer:
    """Explains probes of the lab `realized`, running `running`; `names` names the addresses it built, `reasons`
    tells why each node's rules were written."""

    def __init__(
        self, realized: Realized, running: Topology, names: Mapping[str, str], reasons: RuleReasons | None = None
    ) -> None:
        self.realized, self.running, self.names = realized, running, names
        self.reasons = reasons or RuleReasons()

    def diagnosed(self, observed: Observation) -> Observation:
        """The observation with its translation chain (lab/probe/diagnosis.py), from the rules it met and its hops."""
        cluster = self.running.cluster
        ports = frozenset(self.realized.pod_ports.values())
        bridge = (
            Bridge("cni0", ports, kubelet_hairpin_mode(cluster.hairpin_mode))
            if cluster.cni != "routed-tunnel"
            else None
        )
        reasons = partial(self.reasons.placed, self.running)
        return replace(observed, diagnosis=diagnose(observed.rules, observed.hops, reasons, self.names, bridge))

    def why(self, seen: Seen, sent_icmp: list[SentIcmp], sync_failures: Mapping[str, tuple[str, str]]) -> str:
        """The probe's why: the generic one, with what follows from the flow's conntrack entries, a crafted segment,
        a big request, and the nodes whose last kube-proxy sync failed; `sent_icmp` is the ICMP the nodes sent
        before the probe."""
        probe, result, outcome = seen.probe, seen.sent.result, seen.outcome
        explanation = self._generic(seen, sent_icmp)
        if outcome == "dropped" and (followed := self._followed(seen.entries)):
            explanation = f"{followed}; {explanation}"
        if seen.sent.crafted is not None:
            crafted = self._crafted(seen.sent.crafted, seen.hits)
            explanation = f"{crafted}; then: {explanation}" if explanation else crafted
        if probe.size and result.local:
            target = probe.destination
            mtu = path_mtu(seen.frames, result.local, target, self.names, self.running.cluster.proxy_mode)
            # Once connected, the generic why (about the handshake and its answer) says nothing of the big request.
            explanation = mtu if result.connected or not explanation else f"{explanation}; {mtu}"
        if seen.unread:  # the rules it names are those of the other actors only
            lacking = "; ".join(seen.unread)
            explanation = (
                f"{explanation}; the rules that acted cannot be read on {lacking}"
                if explanation
                else (f"the rules that acted cannot be read on {lacking}")
            )
        if sync_failures:  # whatever happened, it happened without the Service rules of that sync
            failed = "; ".join(f"{what} on {node}: {why}" for node, (what, why) in sync_failures.items())
            explanation = f"{failed}; {explanation}" if explanation else failed
        return explanation

    def _generic(self, seen: Seen, sent_icmp: list[SentIcmp]) -> str:
        """Why the probe went as it did from its frames, rules and answer (lab/probe/why.py), a kept connection's
        request no capture saw put down to what the client's counters say."""
        probe, result, frames, outcome = seen.probe, seen.sent.result, seen.frames, seen.outcome
        unanswered = partial(
            self._unanswered,
            frames=frames,
            deltas=seen.deltas,
            counts_limits=seen.counts_limits,
            sent_icmp=sent_icmp,
            version=address(probe.dst_ip).version,
        )
        if outcome == "accepted":
            explanation = self._accepted(frames)
        else:
            explanation = stray_answer(outcome, frames, probe.destination) or explain(
                outcome,
                seen.hits,
                seen.shown,
                seen.arrivals != [] and not result.reply,
                self._answer(result),
                self._lost,
                unanswered,
            )
        if probe.flow and outcome == "dropped" and not seen.shown and probe.protocol == "TCP":
            explanation = held_back(explanation, seen.sent.retransmitting, seen.deltas[probe.source])
        return explanation

    def _crafted(self, crafted: Crafted, hits: list[tuple[str, RuleHit]]) -> str:
        """What became of the crafted segment: where it was last seen, and where it was dropped if it did not reach
        the client."""
        if crafted.unsent:
            return crafted.unsent
        said, reached = crafted_fate(list(crafted.frames), crafted.craft, crafted.seq, crafted.client, self.names)
        if not reached:
            drops = [f"{node} by {hit}" for node, hit in hits if hit.verdict == "DROP"]
            said += f", dropped on {drops[-1]}" if drops else ""
        return said

    def _unanswered(
        self,
        node: str,
        frames: list[Frame],
        deltas: dict[str, Counters],
        counts_limits: bool,
        sent_icmp: list[SentIcmp],
        version: int,
    ) -> str:
        """Why `node` sent no ICMP error for the probe's packet it rejected: its counters, and the ICMP it had sent
        the packet's source (as the node received it) before; ICMPv6's for a probe of IP `version` 6."""
        received = [f for f in frames if f.actor == node and not f.outgoing and f.addresses]
        host = received[-1].addresses[0] if received and received[-1].addresses else "the client"
        budget = icmp_budget(self.realized.namespaces[node], version)
        return silent_reject(node, host, deltas.get(node, {}), counts_limits, sent_icmp, budget, time.perf_counter())

    def _followed(self, flow: list[tuple[str, Entry]]) -> str:
        """A dropped flow that kept a conntrack entry NATed to a pod that is gone: it followed that entry."""
        running = {ip for p in self.running.pods for ip in p.ips}
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
        cluster = self.running.cluster
        if sender in (cluster.gateway_ip, cluster.secondary_gateway_ip):
            who = f"{sender} (the underlay's gateway, outside the cluster: not Kubernetes)"
        else:
            who = f"{sender} ({self.names[sender]})" if sender in self.names else sender
        return f"{icmp.protocol} {icmp.name} (type {icmp.type} code {icmp.code}) from {who}"

    def _accepted(self, frames: list[Frame]) -> str:
        """Who completed the handshake of a connection nothing answered: the SYN-ACK where it was first seen."""
        said = "the TCP handshake completed, but nothing answered before the timeout"
        synack = next((f for f in frames if tcp_flags(f) == "S."), None)
        if synack is None or synack.addresses is None or (seg := Segment.of(synack)) is None:
            return said
        said += f"; the SYN-ACK was first seen {synack.where} ({synack.summary()})"
        netns = self.realized.ns_of(synack.actor)
        taker = silent_taker(self.running, synack.actor, netns, "TCP", seg.src, seg.sport)
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
            taker := silent_taker(self.running, actor, self.realized.ns_of(actor), *aimed)
        ):
            return f"{seen}; {taker}"
        return f"{seen}; lost on {actor}{after_nat(hits, actor)} without a rule dropping it"

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
        bridged = frame.ifname in pods and self.running.cluster.cni != "routed-tunnel"  # cni0: bridge, flannel
        return frame.actor, "cni0" if bridged else frame.ifname


def after_nat(hits: list[tuple[str, RuleHit]], actor: str) -> str:
    """The actor's last nat chain the packet met, in whichever backend its writer wrote (kube-proxy's
    iptables-nft beside a CNI's iptables-legacy): ` after nat CHAIN`, or nothing."""
    nat = [hit for node, hit in hits if node == actor and hit.written_table == "nat"]
    return f" after nat {nat[-1].chain}" if nat else ""


def held_back(explanation: str, retransmitting: bool, client: Counters) -> str:
    """A kept connection's request no capture saw: the client's own counters say whether its kernel sent it."""
    sent = client.get("TcpOutSegs", 0)
    if sent:
        return f"{explanation}: the client's kernel counted TcpOutSegs +{sent}, which no capture saw"
    said = f"{explanation}: the client's kernel sent no segment during the probe (TcpOutSegs +0)"
    return f"{said}; {BACKING_OFF}" if retransmitting else said
