"""probe: backends listening, captures running, probes sent one at a time.

Probes run strictly one after another so that each one's captures, backend arrivals and
rule hits belong to it alone. The rules a probe met are read from the kernel's trace: of the probe's
forward packets in nftables mode (`nft monitor trace`: nftables keeps no counters on kube-proxy's
rules), of every packet with iptables-nft (counted as its counters count them); iptables-legacy's from
its packet counters. One Evidence per actor whose rules are read (lab.probe.evidence), as lab replay
reads its node's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from lab.describe.resolve.workload import StandInBlocks
from lab.describe.topology import PodSpec, ProbeSpec, ServiceSpec, Topology
from lab.install.echo import EchoServers, Listener
from lab.install.speaker import ETH_P_ARP
from lab.install.sync_failure import failed_sync
from lab.install.tools import reading_nft, run_command
from lab.probe.capture import Captures, write_pcaps
from lab.probe.choices import SpreadReader
from lab.probe.evidence.base import Evidence
from lab.probe.evidence.counters import BothBackends, CounterEvidence, OtherBackendEvidence
from lab.probe.evidence.nftrace import TraceEvidence
from lab.probe.evidence.snmp import CounterFiles
from lab.probe.evidence.xtrace import XtablesTraceEvidence
from lab.probe.explain import Explainer, RuleReasons
from lab.probe.flows import KeptFlow
from lab.probe.observation import Observation
from lab.probe.observe import Observer
from lab.probe.send import Sender
from lab.realize.build import FABRIC, Realized
from lab.realize.standins import STAND_INS
from lab.realize.terminate import close_all, deferred

# Rule actors whose evidence starts at once: a tracer's start is mostly waiting for its monitor to subscribe.
EVIDENCE_WORKERS = 16


def listeners(realized: Realized) -> list[Listener]:
    """Every backend of the build: its pods' ports, and the Services' endpoints (a hand-written EndpointSlice's
    endpoint may be an external host)."""
    topo = realized.topology
    blocks = StandInBlocks(topo.stand_ins)
    return backends(realized, topo.built_pods, endpoints(topo.services, blocks)) + stand_in_listeners(realized, blocks)


def stand_in_listeners(realized: Realized, blocks: StandInBlocks) -> list[Listener]:
    """A listener per port and protocol the stand-in pods serve, in the stand-in namespace on the wildcard address:
    it answers from whichever pod address a connection came to, named by it (the stand-in pod's name) and by the
    stand-in whose podCIDR holds it. A stand-in pod is known by its address, not by the nodeName its endpoint
    gives: an EndpointSlice may name any node, and kube-proxy reads that name only to tell local endpoints."""
    owners: dict[tuple[int, str], dict[str, tuple[str, str]]] = {}
    for svc in realized.topology.services:
        for port in svc.ports:
            for ep in port.endpoints:
                if (node := blocks.node_of(ep.ip)) is not None:
                    owners.setdefault((ep.port, port.protocol), {})[ep.ip] = (ep.pod, node)
    ns = realized.namespaces.get(STAND_INS, "")
    return [Listener("", "", ns, port, proto, owners=named) for (port, proto), named in sorted(owners.items())]


def endpoints(services: Sequence[ServiceSpec], stand_ins: StandInBlocks | None = None) -> list[tuple[str, int, str]]:
    """(actor, port, protocol) of every endpoint of the Services but the stand-in pods, those whose address is in a
    stand-in node's podCIDR (`stand_ins`)."""
    return [
        (ep.pod, ep.port, port.protocol)
        for svc in services
        for port in svc.ports
        for ep in port.endpoints
        if stand_ins is None or stand_ins.node_of(ep.ip) is None
    ]


def backends(realized: Realized, pods: Sequence[PodSpec], serving: Sequence[tuple[str, int, str]]) -> list[Listener]:
    """The listeners of `pods` (their ports) and of the endpoints `serving`, (actor, port, protocol)."""
    wanted: dict[str, set[tuple[int, str]]] = {p.name: {(pp.port, pp.protocol) for pp in p.ports} for p in pods}
    for actor, port, protocol in serving:
        wanted.setdefault(actor, set()).add((port, protocol))
    nodes = {p.name: p.node for p in pods}
    # A socket per family of the cluster: every pod has an address of each (status.podIPs), a host-network one its
    # node's, and a program listening on the wildcard of each family is what a backend is.
    families = realized.topology.cluster.families
    # A crafted segment, a kept flow or a sized request needs a connection that stays established: then every
    # TCP backend holds its connections.
    hold = any(probe.craft or probe.keep_every or probe.size for probe in realized.topology.probes)
    return [
        Listener(
            name,
            nodes.get(name, ""),
            realized.ns_of(name),
            port,
            proto,
            hold=hold and proto == "TCP",
            families=families,
        )
        for name, ports in wanted.items()
        for port, proto in sorted(ports)
    ]


class ProbeSession:
    """What lives as long as the probes of one built lab: the backends listening, the captures, each rule actor's
    evidence (trace monitors, counters), the flows probes keep, and what kube-proxy's last sync said. A probe is
    sent (lab/probe/send.py), observed (lab/probe/observe.py) and explained (lab/probe/explain.py) against the
    topology the cluster runs then, which the caller passes."""

    def __init__(self, realized: Realized, timeout: float = 0.5, pcap_dir: Path | None = None) -> None:
        self.realized = realized
        built = realized.topology
        self.timeout = timeout
        self.pcap_dir = pcap_dir
        self.echo = EchoServers()
        self.captures = Captures()
        self.names = built.address_names()  # every address the lab built, a pod a step deleted too
        self.evidence: dict[str, Evidence] = {}
        self.flows: dict[str, KeptFlow] = {}  # by the name of the probe that kept it
        self.ports: set[int] = set()  # where the backends listen: a probe's packets go to these or its own port
        self.sync_failures: dict[str, tuple[str, str]] = {}  # node -> (what failed, why) of its last sync
        # Actors whose rules are read: the nodes, and the fabric or routers when they hold rules.
        self.rule_actors = [n.name for n in built.nodes] + _actors_with_rules(built)
        self.traced = {n.name for n in built.nodes} if built.cluster.proxy_mode == "nftables" else set()
        self.asking_arp = _asking_arp(built)
        self.previous: ProbeSpec | None = None  # the probe the last connection was sent for (attempts repeat it)
        self.ebtables = built.cluster.cni == "bridge" and built.cluster.hairpin_mode == "promiscuous-bridge"
        self.sender = Sender(realized, timeout, self.captures, self.echo)
        self.snmp = CounterFiles()
        self.reasons = RuleReasons()  # why each node's rules were written, for the probes' diagnoses
        self.spreads = SpreadReader(realized.namespaces, built.cluster.proxy_mode, built.cluster.iptables_backend)
        self.observer = Observer(
            realized, self.captures, self.echo, self.evidence, self.rule_actors, self.ports, self.snmp
        )

    def __enter__(self) -> ProbeSession:
        built = self.realized.topology
        try:
            self._listen(listeners(self.realized))
            for node in built.nodes:
                ns = self.realized.namespaces[node.name]
                ports = {
                    self.realized.pod_ports[p.name]
                    for p in built.pods_on(node.name)
                    if p.name in self.realized.pod_ports
                }
                tunnel = {self.realized.tunnel_device} - {""}
                self.captures.add(node.name, ns, {"eth0", *ports, *tunnel})
            for host in self.asking_arp:
                self.captures.add(host, self.realized.namespaces[host], {"eth0"}, ETH_P_ARP)
            self.echo.start()
            self.captures.start()
            self._start_evidence()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        closeables = (*self.flows.values(), self.echo, self.captures, self.snmp)
        close_all((*(closeable.close for closeable in closeables), self._close_evidence))

    def _close_evidence(self) -> None:
        """Every rule actor's evidence, closed side by side: closing a tracer is mostly waiting for its monitor's
        process to end, which at a hundred nodes one after another took seconds. Each is closed whatever another
        raised; the first failure is raised once all are closed."""
        with ThreadPoolExecutor(max_workers=EVIDENCE_WORKERS, thread_name_prefix="evidence") as pool:
            closing = [pool.submit(evidence.close) for evidence in self.evidence.values()]
        if failures := [future.exception() for future in closing if future.exception() is not None]:
            raise failures[0]  # type: ignore[misc]  # an exception, as exception() returned it

    def _listen(self, backends: list[Listener]) -> None:
        self.echo.listen_all(backends)
        self.ports.update(listener.port for listener in backends)

    def pods_added(self, pods: Sequence[PodSpec], running: Topology) -> None:
        """Pods a step plugged in after the build (lab.realize.build.plug_pods): their backends listen, their ports
        on the node are captured, their addresses are named, as the build's pods' are from the start."""
        new = {pod.name for pod in pods}
        self._listen(backends(self.realized, pods, [e for e in endpoints(running.services) if e[0] in new]))
        for pod in pods:
            self.captures.add(pod.node, self.realized.namespaces[pod.node], {self.realized.pod_ports[pod.name]})
            self.names.update(dict.fromkeys(pod.ips, pod.name))

    def _start_evidence(self) -> None:
        """Every rule actor's evidence, started side by side: a tracer's start is mostly waiting for its monitor
        to subscribe, which at a hundred nodes one after another took seconds. What started is kept (and closed
        on leaving) even when another failed; SIGTERM waits for them all (a tracer started after the run stopped
        waiting would never be stopped)."""
        with deferred():
            with ThreadPoolExecutor(max_workers=EVIDENCE_WORKERS, thread_name_prefix="evidence") as pool:
                started = {
                    actor: pool.submit(self._evidence, self.realized.namespaces[actor], actor in self.traced)
                    for actor in self.rule_actors
                }
            done = {actor: future for actor, future in started.items() if future.exception() is None}
            self.evidence.update({actor: future.result() for actor, future in done.items()})
        failures = [future.exception() for future in started.values() if future.exception() is not None]
        if failures:
            raise failures[0]  # type: ignore[misc]  # an exception, as exception() returned it

    def _evidence(self, ns: str, traced: bool) -> Evidence:
        """kube-proxy's rules' evidence, and beside it the counters of the other iptables backend where the node's
        other writers write there (cluster.tools.host.iptablesBackend)."""
        kube_proxy = self._kube_proxy_evidence(ns, traced)
        cluster = self.realized.topology.cluster
        if cluster.host_iptables_backend == cluster.iptables_backend:
            return kube_proxy
        kept = any(probe.keep_every for probe in self.realized.topology.probes)  # packets flow between probes
        other = OtherBackendEvidence(
            ns, cluster.host_iptables_backend, traffic_between=kept, ipv6="IPv6" in cluster.families
        )
        return BothBackends(kube_proxy, other)

    def _kube_proxy_evidence(self, ns: str, traced: bool) -> Evidence:
        built = self.realized.topology
        kept = any(probe.keep_every for probe in built.probes)  # packets flow between probes
        if traced:
            return TraceEvidence(ns, traffic_between=kept, nft=reading_nft(built))
        backend = built.cluster.iptables_backend
        if backend == "nft" and not self.ebtables:
            # The kernel's trace of iptables-nft's rules: a probe costs its packets, not the rules' number.
            return XtablesTraceEvidence(ns, traffic_between=kept)
        # iptables-legacy keeps its rules' counters only; kubelet's KUBE-DEDUP (promiscuous-bridge) is ebtables'.
        ipv6 = "IPv6" in built.cluster.families
        return CounterEvidence(ns, backend, bridge=self.ebtables, traffic_between=kept, ipv6=ipv6)

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

    def rules_changed(self) -> None:
        """Rules were replaced (a step): their counters start again from zero."""
        for evidence in self.evidence.values():
            evidence.restart()
        self.spreads.forget()

    def run(self, probe: ProbeSpec, running: Topology) -> Observation:
        """The probe, sent to the cluster running `running` (the workload the last steps left), with every kept
        flow waiting meanwhile; a flow the probe keeps goes on after it."""
        with ExitStack() as stack:
            for flow in self.flows.values():
                stack.enter_context(flow.paused())
            observed = self._probe(probe, running)
        if probe.name in self.flows and probe.keep_every:
            self.flows[probe.name].resume()
        return observed

    def _probe(self, probe: ProbeSpec, running: Topology) -> Observation:
        """Send the probe, observe what its packets did, explain it: each step hands the next what it found."""
        start = time.perf_counter()
        self._ask_arp_afresh(probe, running)
        before = self.observer.before(probe, running)
        sent = self.sender.send(probe, running, self.flows, before.frames, before.arrivals)
        if sent.kept is not None:
            self.flows[probe.name] = sent.kept
        seen = self.observer.observe(probe, running, sent, before)
        pcaps: tuple[str, ...] = ()
        if self.pcap_dir is not None:
            directory = self.pcap_dir / running.scenario / _slug(running.variant_label) / _slug(probe.name)
            pcaps = tuple(str(p) for p in write_pcaps(seen.frames, directory))
        explainer = Explainer(self.realized, running, self.names, self.reasons)
        explanation = explainer.why(seen, self.observer.sent_icmp, self.sync_failures)
        self.observer.record_icmp(probe, running, seen)
        observed = explainer.diagnosed(seen.observation(self.names, explanation, pcaps, time.perf_counter() - start))
        # A probe that reaches every endpoint the draw can give needs to know how many there are.
        return replace(observed, spread=self.spreads.spread(probe, observed)) if probe.every_choice else observed

    def _ask_arp_afresh(self, probe: ProbeSpec, running: Topology) -> None:
        """A probe to a layer 2 VIP from a host on the underlay starts as a client that has not resolved the VIP
        yet: its neighbour entry for it is removed, so the ARP answers the probe shows (lab/probe/arp.py) and the
        node it enters are its own, not an earlier probe's. Its later attempts keep the entry, as a client keeps
        it (each exchange costs a round trip to a userspace speaker, which under emulation outlasted a connection's
        timeout); nor while a kept flow is open: its connection goes on where it entered."""
        first, self.previous = probe is not self.previous, probe
        if not first or self.flows or probe.source not in self.asking_arp:
            return
        if probe.dst_ip in {a.vip for a in running.announcements}:
            run_command(self.realized.ns_of(probe.source), ("ip", "neigh", "flush", "to", probe.dst_ip))


def _asking_arp(topo: Topology) -> list[str]:
    """The hosts on the underlay, which ask ARP for a layer 2 VIP themselves: their eth0's ARP frames are
    captured when the lab has such VIPs (lab/probe/arp.py reads who answered)."""
    return [e.name for e in topo.externals if not e.behind] if topo.announcements else []


def _actors_with_rules(topo: Topology) -> list[str]:
    fabric = [FABRIC] if topo.load_balancers or topo.egress else []
    return fabric + [e.name for e in topo.externals if e.masquerade]


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)
