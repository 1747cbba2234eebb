"""The actors around the cluster, installed after kube-proxy's rules: what a cloud or a data centre adds.

- kube-proxy's health check servers on every node (lab/install/health.py): healthCheckNodePort per Service
  with externalTrafficPolicy Local, and /healthz on 10256;
- each external L4 load balancer (`loadBalancers`): it health-checks its pool over the underlay, from its
  own address, when the scenario is built — Local Services on healthCheckNodePort (200 = local
  endpoints), Cluster Services on kube-proxy's /healthz — and forwards each VIP:port to the first healthy
  node of the pool (every node of the pool if none answers: cloud load balancers fail open). nodePort
  forwarding DNATs to node:NodePort; vip forwarding routes the VIP unchanged to that node. With
  `avoidSourceBackend` it never picks a node whose address is the packet's source (what Tencent's CLB
  does), and with `source: snat` it rewrites the source to its own address;
- the egress gateway: traffic from a node (or its pods) to a public destination leaves with that node's
  public address (or the gateway's);
- ip-masq-agent's nat IP-MASQ-AGENT chain on the nodes that run it;
- each layer 2 load balancer's speaker (lab/install/speaker.py): the announcing node answers ARP for its VIPs;
- a router that masquerades its LAN.

Load balancers and the egress gateway live in the fabric (the underlay's router), whose conntrack also
sees bridged traffic (lab/realize/build.py), so the LB's NAT is undone on answers wherever they go, as in a
cloud network. The rules are rendered by pure functions (unit-tested) and fed to iptables-restore.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

from lab.describe.topology import FrontendSpec, LoadBalancerSpec, MasqAgentSpec, Topology
from lab.install.health import HEALTHZ_PORT, CheckResult, HealthListener, HealthServers, http_check
from lab.install.speaker import Announced, Speakers
from lab.install.tools import Xtables, ip_batch, iptables_restore, xtables
from lab.realize.build import FABRIC, Realized
from lab.render.kubeproxy.because import MASQUERADES, Because, Setting
from lab.render.kubeproxy.healthcheck import local_endpoints
from lab.render.kubeproxy.versions import Release

CHECK_TIMEOUT = 0.5


@dataclass(frozen=True)
class Decision:
    """Where one load balancer frontend forwards, and the health checks that decided it."""

    lb: LoadBalancerSpec
    frontend: FrontendSpec
    checks: tuple[CheckResult, ...]
    backends: tuple[str, ...]  # node names, in order of preference

    @property
    def summary(self) -> str:
        checked = ", ".join(f"{c.node} {c.status or c.error or 'no answer'}" for c in self.checks)
        failed_open = self.checks and not any(c.healthy for c in self.checks)
        how = f"health {checked}" + ("; none healthy: fail open" if failed_open else "") if self.checks else "no check"
        return f"{self.lb.name} {self.frontend.service}: {how}"


def health_listeners(realized: Realized) -> list[HealthListener]:
    topo = realized.topology
    release = Release.of(topo.cluster.kube_version)
    listeners = []
    for node in topo.nodes:
        ns = realized.namespaces[node.name]
        listeners.append(HealthListener(node.name, ns, HEALTHZ_PORT, release=release))
        for svc in topo.services:
            if svc.health_check_node_port:
                key = f"{svc.namespace}/{svc.name}"
                count = local_endpoints(topo, key, node.name)
                listeners.append(HealthListener(node.name, ns, svc.health_check_node_port, key, count, release))
    return listeners


def masq_agent_rules(agent: MasqAgentSpec) -> str:
    """ip-masq-agent's chain as report 4's nodes show it (docs/reports.md), for iptables-restore --noflush."""
    not_local = "-m addrtype ! --dst-type LOCAL"
    lines = [
        "*nat",
        ":IP-MASQ-AGENT - [0:0]",
        '-A POSTROUTING -m comment --comment "ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL '
        f'destination traffic to our custom IP-MASQ-AGENT chain" {not_local} -j IP-MASQ-AGENT',
    ]
    for cidr in agent.non_masquerade_cidrs:
        lines.append(
            f'-A IP-MASQ-AGENT -d {cidr} -m comment --comment "ip-masq-agent: cluster-local traffic should not be '
            f'subject to MASQUERADE" {not_local} -j RETURN'
        )
    lines.append(
        '-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: outbound traffic should be subject to MASQUERADE '
        f'(this match must come after cluster-local CIDR matches)" {not_local} -j MASQUERADE'
    )
    return "\n".join([*lines, "COMMIT", ""])


def masq_agent_reasons(agent: MasqAgentSpec) -> tuple[Because, ...]:
    """Why ip-masq-agent's last rule masquerades (render/kubeproxy/because.py): every destination outside its
    nonMasqueradeCIDRs, which its RETURN rules let through first."""
    meaning = "ip-masq-agent masquerades what leaves for any destination outside these"
    setting = Setting("nonMasqueradeCIDRs", ", ".join(agent.non_masquerade_cidrs), "ip-masq-agent", meaning)
    # No text to match: iptables-legacy's counters show it as `-j MASQUERADE`, the nft trace as `masquerade`.
    return (Because(MASQUERADES, "nat", "IP-MASQ-AGENT", (), setting),)


def _match(f: FrontendSpec) -> str:
    proto = f.protocol.lower()
    return f"-d {f.vip}/32 -p {proto} -m {proto} --dport {f.port}"


def fabric_rules(topo: Topology, decisions: list[Decision]) -> str:
    """The fabric's nat table: the load balancers' DNAT and SNAT, and the egress gateway's SNAT. IPv4 only (`/32`,
    iptables-restore): describe refuses an IPv6 load balancer, VIP or egress gateway in words (docs/ipv6.md)."""
    nodes = {n.name: n for n in topo.nodes}
    lines = [
        "*nat",
        ":PREROUTING ACCEPT [0:0]",
        ":INPUT ACCEPT [0:0]",
        ":OUTPUT ACCEPT [0:0]",
        ":POSTROUTING ACCEPT [0:0]",
        ":LOAD-BALANCER - [0:0]",
        ":LB-SNAT - [0:0]",
        ":EGRESS-GATEWAY - [0:0]",
        '-A PREROUTING -m comment --comment "external load balancers" -j LOAD-BALANCER',
        '-A POSTROUTING -m comment --comment "load balancers that rewrite the source" -j LB-SNAT',
        '-A POSTROUTING -m comment --comment "egress gateway" -j EGRESS-GATEWAY',
    ]
    for d in decisions:
        f, lb = d.frontend, d.lb
        comment = f'-m comment --comment "{d.summary}"'
        if lb.forward == "nodePort":
            # The LB compares the source it sees with its backends' addresses; behind the egress gateway it
            # only ever sees public addresses, which are no node's.
            avoid = lb.avoid_source_backend and not f.behind_egress
            for name in d.backends if avoid and len(d.backends) > 1 else ():
                node = nodes[name]
                lines.append(
                    f"-A LOAD-BALANCER {_match(f)} ! -s {node.ip}/32 {comment} "
                    f"-j DNAT --to-destination {node.ip}:{f.node_port}"
                )
            first = nodes[d.backends[0]]
            lines.append(f"-A LOAD-BALANCER {_match(f)} {comment} -j DNAT --to-destination {first.ip}:{f.node_port}")
        if lb.source == "snat":
            proto = f.protocol.lower()
            lines.append(
                f"-A LB-SNAT -p {proto} -m conntrack --ctorigdst {f.vip}/32 --ctorigdstport {f.port} "
                f'-m comment --comment "{lb.name}: source becomes the load balancer" -j SNAT --to-source {lb.address}'
            )
    if topo.egress:
        egress = topo.egress
        for dest in egress.destinations:
            for node in topo.nodes:
                public = egress.address_of(node.name)
                if not public:
                    continue
                for source in (f"{node.ip}/32", node.pod_cidr):
                    lines.append(
                        f"-A EGRESS-GATEWAY -s {source} -m conntrack --ctorigdst {dest} "
                        f'-m comment --comment "{node.name} leaves with its public address" '
                        f"-j SNAT --to-source {public}"
                    )
            if egress.address:
                for source in (topo.cluster.underlay, topo.cluster.cluster_cidr):
                    lines.append(
                        f"-A EGRESS-GATEWAY -s {source} -m conntrack --ctorigdst {dest} "
                        f'-m comment --comment "NAT gateway" -j SNAT --to-source {egress.address}'
                    )
    return "\n".join([*lines, "COMMIT", ""])


def _check(realized: Realized, lb: LoadBalancerSpec, f: FrontendSpec, node: str) -> CheckResult:
    topo = realized.topology
    address = topo.node(node).ip
    port, path = (f.health_check_node_port, "/healthz") if f.health_check_node_port else (HEALTHZ_PORT, "/healthz")
    return http_check(realized.namespaces[FABRIC], lb.address, node, address, port, path, CHECK_TIMEOUT)


def decide(realized: Realized) -> list[Decision]:
    """Run every load balancer's health checks over the underlay and pick the backends."""
    decisions = []
    cache: dict[tuple[str, str, int, str], CheckResult] = {}
    for lb in realized.topology.load_balancers:
        for f in lb.frontends:
            checks = []
            if lb.health_check:
                for node in lb.pool:
                    key = (lb.address, f.service, f.health_check_node_port, node)
                    if key not in cache:
                        cache[key] = _check(realized, lb, f, node)
                    checks.append(cache[key])
            healthy = tuple(c.node for c in checks if c.healthy) if checks else lb.pool
            decisions.append(Decision(lb, f, tuple(checks), healthy or lb.pool))
    return decisions


def speakers(realized: Realized) -> list[Announced]:
    """Each announcing node with the layer 2 VIPs its speaker answers for (none for a VIP nobody announces)."""
    by_node: dict[str, list[str]] = {}
    for a in realized.topology.announcements:
        if a.announcer:
            by_node.setdefault(a.announcer, []).append(a.vip)
    return [Announced(node, realized.namespaces[node], tuple(vips)) for node, vips in by_node.items()]


def start_speakers(realized: Realized, closers: ExitStack) -> None:
    """The layer 2 speakers' ARP answers, until `closers` unwinds."""
    loop = Speakers()
    closers.callback(loop.close)
    for announced in speakers(realized):
        loop.announce(announced)
    loop.start()


def install_actors(realized: Realized, closers: ExitStack) -> list[Decision]:
    """Start kube-proxy's health servers, run the load balancers' checks, install every actor's rules.
    The servers are stopped by `closers`, which the pipeline unwinds before the namespaces go."""
    topo = realized.topology
    machine = Xtables(topo.cluster.iptables_backend)  # the external hosts' and the fabric's: this machine's
    if topo.masq_agent:
        text = masq_agent_rules(topo.masq_agent)
        for node in topo.masq_agent.nodes:  # a node's other writer: the host's iptables (cluster.tools)
            ns = realized.namespaces[node]
            iptables_restore(ns, text, xtables(topo, "host"), noflush=True, what="ip-masq-agent rules")
    for ext in topo.externals:
        if ext.masquerade:
            text = f"*nat\n-A POSTROUTING -s {ext.network} -o eth0 -j MASQUERADE\nCOMMIT\n"
            iptables_restore(realized.namespaces[ext.name], text, machine)
    if topo.announcements:
        start_speakers(realized, closers)
    if not topo.load_balancers and not topo.egress:
        return []
    decisions: list[Decision] = []
    if topo.load_balancers:
        servers = HealthServers()
        closers.callback(servers.close)
        for listener in health_listeners(realized):
            servers.listen(listener)
        servers.start()
        decisions = decide(realized)
    fabric = realized.namespaces[FABRIC]
    iptables_restore(fabric, fabric_rules(topo, decisions), machine)
    routes = [
        f"route replace {d.frontend.vip}/32 via {topo.node(d.backends[0]).ip}"
        for d in decisions
        if d.lb.forward == "vip"
    ]
    if routes:
        ip_batch(fabric, list(dict.fromkeys(routes)))
    return decisions
