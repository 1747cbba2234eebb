"""What the cloud provides around the cluster: external load balancers (which Services each serves, on which
VIPs and ports), the gateway's routes for the VIPs no load balancer serves, the egress gateway and ip-masq-agent."""

from __future__ import annotations

import hashlib

from lab.describe import schema
from lab.describe.families import family_of
from lab.describe.refs import ObjectRef
from lab.describe.resolve.checks import disjoint, inside, node_names, unique
from lab.describe.topology import (
    AnnouncementSpec,
    ClusterSpec,
    EgressSpec,
    ExternalSpec,
    FrontendSpec,
    LoadBalancerSpec,
    MasqAgentSpec,
    NodeSpec,
    ServiceSpec,
)
from lab.describe.yamlsrc import FieldPath, Source


def resolve_egress(
    src: Source, g: schema.EgressGateway | None, cluster: ClusterSpec, nodes: tuple[NodeSpec, ...]
) -> EgressSpec | None:
    """Destinations outside the cluster, and public addresses (every node's, or one per node) outside it too."""
    if g is None:
        return None
    path: FieldPath = ("egressGateway",)
    for k, cidr in enumerate(g.destinations):
        disjoint(src, (*path, "destinations", k), cidr, cluster, "destination")
    known = {n.name for n in nodes}
    for node in g.node_addresses:
        if node not in known:
            raise src.error(
                (*path, "nodeAddresses", node), f"unknown node {node!r}; expected one of {', '.join(sorted(known))}"
            )
    public = [((*path, "address"), g.address)] if g.address else []
    public += [((*path, "nodeAddresses", n), a) for n, a in g.node_addresses.items()]
    for where, address in public:
        for net in (cluster.underlay, cluster.cluster_cidr, cluster.service_cidr):
            if inside(address, net):
                raise src.error(where, f"{address} is inside {net}: a public address is outside the cluster")
    unique(src, "public address", [(where, a) for where, a in public])
    if not public:
        raise src.error(path, "give `address` (every node's) or `nodeAddresses` (an elastic IP per node)")
    return EgressSpec(tuple(g.destinations), g.address or "", tuple(g.node_addresses.items()))


def resolve_masq_agent(src: Source, a: schema.IpMasqAgent | None, nodes: tuple[NodeSpec, ...]) -> MasqAgentSpec | None:
    """ip-masq-agent on the nodes it names, or on every node."""
    if a is None:
        return None
    chosen = node_names(src, ("ipMasqAgent", "nodes"), a.nodes, nodes) if a.nodes is not None else None
    return MasqAgentSpec(tuple(a.non_masquerade_cidrs), chosen or tuple(n.name for n in nodes))


def resolve_load_balancers(
    src: Source,
    declared: list[schema.LoadBalancer],
    cluster: ClusterSpec,
    nodes: tuple[NodeSpec, ...],
    externals: tuple[ExternalSpec, ...],
    services: tuple[ServiceSpec, ...],
    egress: EgressSpec | None,
) -> tuple[tuple[LoadBalancerSpec, ...], tuple[AnnouncementSpec, ...]]:
    """Each load balancer with the Services it names; the one that names none serves every other Service with
    a load balancer IP. An external one is a host in the fabric; a layer 2 one is its VIPs' announcements."""
    named = _named_services(src, declared, services)
    defaults = [i for i, lb in enumerate(declared) if lb.services is None]
    if len(defaults) > 1:
        raise src.error(("loadBalancers", defaults[1]), "only one load balancer may leave out `services`")
    claimed = {f"{s.namespace}/{s.name}" for chosen in named for s in chosen}
    rest = [
        s for s in services if s.type == "LoadBalancer" and s.ingress_ips and f"{s.namespace}/{s.name}" not in claimed
    ]
    served = [
        (i, lb, rest if lb.services is None else chosen)
        for i, (lb, chosen) in enumerate(zip(declared, named, strict=True))
    ]
    balancers = tuple(
        _balancer(src, ("loadBalancers", i), lb, chosen, cluster, nodes, externals, egress)
        for i, lb, chosen in served
        if lb.mode == "external"
    )
    others = (cluster.gateway_ip, cluster.secondary_gateway_ip, *(b.address for b in balancers))
    taken = addresses_taken(nodes, externals, others)
    announcements = tuple(
        a
        for i, lb, chosen in served
        if lb.mode == "layer2"
        for a in _announce(src, ("loadBalancers", i), lb, chosen, cluster, nodes, taken)
    )
    unique(src, "load balancer name", [(("loadBalancers", i, "name"), lb.name) for i, lb in enumerate(declared)])
    vips = [
        (("loadBalancers", i), f"{f.vip}:{f.port}/{f.protocol}") for i, b in enumerate(balancers) for f in b.frontends
    ]
    unique(src, "load balancer frontend", vips)
    return balancers, announcements


def unannounced(
    src: Source, declared: list[schema.LoadBalancer], announcements: tuple[AnnouncementSpec, ...]
) -> tuple[str, ...]:
    """A warning for each layer 2 VIP no node announces: allowed (MetalLB announces nothing then), and every
    packet to it is lost on the underlay for want of an ARP answer; said in case it is not what was meant."""
    index = {lb.name: i for i, lb in enumerate(declared)}
    return tuple(
        str(
            src.error(
                ("loadBalancers", index[a.balancer]), f"nobody answers ARP for {a.service}'s VIP {a.vip}: {a.how}"
            )
        )
        for a in announcements
        if not a.announcer
    )


def addresses_taken(
    nodes: tuple[NodeSpec, ...], externals: tuple[ExternalSpec, ...], others: tuple[str, ...]
) -> dict[str, str]:
    """Every address a host the lab builds holds on the underlay, with whose it is."""
    taken = {a: f"{n.name}'s" for n in nodes for a in (n.ip, n.secondary_ip) if a}
    taken |= {a: f"{e.name}'s" for e in externals for a in (e.ip, e.secondary_ip) if a}
    return taken | {a: "the fabric's" for a in others if a}


# What only a load balancer host has: a layer 2 VIP is answered by a node, with nothing in between.
_EXTERNAL_ONLY = {
    "address": "address",
    "source": "source",
    "forward": "forward",
    "health_check": "healthCheck",
    "avoid_source_backend": "avoidSourceBackend",
}


def _announce(
    src: Source,
    path: FieldPath,
    lb: schema.LoadBalancer,
    chosen: list[ServiceSpec],
    cluster: ClusterSpec,
    nodes: tuple[NodeSpec, ...],
    taken: dict[str, str],
) -> list[AnnouncementSpec]:
    """A layer 2 load balancer's VIPs, each with the node whose speaker answers ARP for it: `announcer`, or the
    node MetalLB's election picks among the speakers (`nodes`, default every node)."""
    for name, key in _EXTERNAL_ONLY.items():
        if name in lb.model_fields_set:
            raise src.error(
                (*path, key),
                f"`{key}` is a load balancer host's; with `mode: layer2` there is none: a node's speaker answers ARP"
                " for the VIP and the packet enters that node unchanged (leave it out, or use `mode: external`)",
            )
    speakers = node_names(src, (*path, "nodes"), lb.nodes, nodes) if lb.nodes is not None else None
    pool = speakers or tuple(n.name for n in nodes)
    if lb.announcer is not None and lb.announcer not in pool:
        raise src.error((*path, "announcer"), f"{lb.announcer!r} is not a node of `nodes` ({', '.join(pool)})")
    announcements = []
    for svc in chosen:
        for vip in svc.ingress_ips:
            _announceable(src, path, svc, vip, cluster, taken)
        candidates = _candidates(svc, pool)
        if lb.announcer is not None and lb.announcer not in candidates:
            raise src.error(
                (*path, "announcer"),
                f"MetalLB never elects {lb.announcer} for {svc.namespace}/{svc.name}: "
                + _no_candidate_reason(svc, lb.announcer),
            )
        node, how = _elect(svc, candidates, lb.announcer)
        announcements += [
            AnnouncementSpec(lb.name, f"{svc.namespace}/{svc.name}", v, node, how) for v in svc.ingress_ips
        ]
    unique(src, "layer 2 VIP", [(path, a.vip) for a in announcements])
    return announcements


def _announceable(
    src: Source, path: FieldPath, svc: ServiceSpec, vip: str, cluster: ClusterSpec, taken: dict[str, str]
) -> None:
    """A VIP a speaker can announce in the lab: IPv4 (ARP), inside the underlay, no host's address."""
    where = (*path, "services")
    name = f"{svc.namespace}/{svc.name}"
    if family_of(vip) == "IPv6":
        raise src.error(
            where,
            f"{name}'s load balancer IP {vip} is IPv6: a layer 2 speaker answers NDP for it, which the lab does not"
            " model yet (ARP only); leave it out of this load balancer",
        )
    if not inside(vip, cluster.underlay):
        raise src.error(
            where,
            f"{name}'s load balancer IP {vip} is outside the underlay {cluster.underlay}: a layer 2 VIP is answered"
            " on the nodes' own link, so it must lie inside it (use `mode: external` for a VIP routed elsewhere)",
        )
    if vip in taken:
        raise src.error(where, f"{name}'s load balancer IP {vip} is already {taken[vip]} address on the underlay")


def _ready_nodes(svc: ServiceSpec) -> set[str]:
    return {ep.node for p in svc.ports for ep in p.endpoints if ep.ready}


def _candidates(svc: ServiceSpec, pool: tuple[str, ...]) -> tuple[str, ...]:
    """The speakers' nodes MetalLB's election takes: none without a ready endpoint anywhere; for
    externalTrafficPolicy Local only those with a ready local endpoint (ShouldAnnounce and usableNodes in
    metallb/metallb speaker/layer2_controller.go at abd9bc4819df12c3b902ccf99b213dfd3a1bee11)."""
    ready = _ready_nodes(svc)
    if not ready:
        return ()
    return tuple(n for n in pool if n in ready) if svc.external_policy == "Local" else pool


def _no_candidate_reason(svc: ServiceSpec, node: str) -> str:
    """Why `node` (or, for "", every node of the load balancer's `nodes`) never announces the Service."""
    if not _ready_nodes(svc):
        return "the Service has no ready endpoint, so no speaker announces it"
    which = f"{node} has" if node else "no node of `nodes` has"
    return f"externalTrafficPolicy Local announces only from a node with a ready local endpoint, and {which} one"


def _elect(svc: ServiceSpec, candidates: tuple[str, ...], pinned: str | None) -> tuple[str, str]:
    """The announcing node and how it was chosen. MetalLB sorts the candidates by sha256(node + "#" + the
    Service's first load balancer IP) and the first announces (ShouldAnnounce, as cited in _candidates)."""
    if pinned is not None:
        return pinned, "pinned by `announcer`"
    if not candidates:
        return "", "no node may announce: " + _no_candidate_reason(svc, "")
    first_ip = svc.ingress_ips[0]
    ranked = sorted(candidates, key=lambda n: hashlib.sha256(f"{n}#{first_ip}".encode()).digest())
    return ranked[0], f"elected by MetalLB's hash among {', '.join(ranked)}"


def _named_services(
    src: Source, declared: list[schema.LoadBalancer], services: tuple[ServiceSpec, ...]
) -> list[list[ServiceSpec]]:
    """The Services each load balancer names (none when it leaves out `services`): each one with a load balancer
    IP, and served by one load balancer only."""
    claimed: dict[str, FieldPath] = {}
    named = []
    for i, lb in enumerate(declared):
        chosen = []
        for k, ref in enumerate(lb.services or []):
            named_ref = ObjectRef.parse(ref)
            svc = next((s for s in services if (s.namespace, s.name) == (named_ref.namespace, named_ref.name)), None)
            spath: FieldPath = ("loadBalancers", i, "services", k)
            if svc is None:
                raise src.error(spath, f"no Service {named_ref.namespace}/{named_ref.name} in the workload")
            if svc.type != "LoadBalancer" or not svc.ingress_ips:
                raise src.error(
                    spath,
                    f"Service {svc.namespace}/{svc.name} has no load balancer IP (type LoadBalancer, "
                    "status.loadBalancer.ingress or loadBalancerIP)",
                )
            key = f"{svc.namespace}/{svc.name}"
            if key in claimed:
                raise src.error(
                    spath, f"{key} is already served by the load balancer at line {src.line_of(claimed[key])}"
                )
            claimed[key] = spath
            chosen.append(svc)
        named.append(chosen)
    return named


def _balancer(
    src: Source,
    path: FieldPath,
    lb: schema.LoadBalancer,
    chosen: list[ServiceSpec],
    cluster: ClusterSpec,
    nodes: tuple[NodeSpec, ...],
    externals: tuple[ExternalSpec, ...],
    egress: EgressSpec | None,
) -> LoadBalancerSpec:
    """One load balancer: its backend nodes, its own address (outside the cluster's networks, no one else's) and
    a frontend per VIP and port of the Services it serves."""
    pool = node_names(src, (*path, "nodes"), lb.nodes, nodes) if lb.nodes is not None else None
    if lb.announcer is not None:
        raise src.error((*path, "announcer"), "only a `mode: layer2` load balancer has an announcing node")
    if lb.forward == "vip" and lb.avoid_source_backend:
        raise src.error((*path, "avoidSourceBackend"), "needs `forward: nodePort` (a routed VIP has one next hop)")
    address = lb.address or cluster.gateway_ip
    if family_of(address) == "IPv6":
        raise src.error(
            (*path, "address"),
            f"the load balancer's address would be the underlay's IPv6 gateway {address}: the lab's load balancers"
            " are IPv4 only yet (docs/ipv6.md); give an IPv4 `address`, or leave `loadBalancers` out",
        )
    taken = {n.ip: n.name for n in nodes} | {e.ip: e.name for e in externals}
    if address in taken:
        raise src.error((*path, "address"), f"{address} is already {taken[address]}'s address")
    for net in (cluster.cluster_cidr, cluster.service_cidr):
        if inside(address, net):
            raise src.error((*path, "address"), f"{address} is inside {net}")
    return LoadBalancerSpec(
        name=lb.name,
        address=address,
        source=lb.source,
        forward=lb.forward,
        pool=pool or tuple(n.name for n in nodes),
        health_check=lb.health_check,
        avoid_source_backend=lb.avoid_source_backend,
        frontends=tuple(f for svc in chosen for f in _frontends(src, path, lb, svc, cluster, egress)),
    )


def _frontends(
    src: Source,
    path: FieldPath,
    lb: schema.LoadBalancer,
    svc: ServiceSpec,
    cluster: ClusterSpec,
    egress: EgressSpec | None,
) -> list[FrontendSpec]:
    """A Service's VIP:port pairs on a load balancer, each with the NodePort (and health check) behind it."""
    frontends = []
    for vip in svc.ingress_ips:
        if family_of(vip) == "IPv6":
            raise src.error(
                (*path, "services"),
                f"{svc.namespace}/{svc.name}'s load balancer IP {vip} is IPv6: the lab's load balancers serve IPv4"
                " only yet (docs/ipv6.md); leave `loadBalancers` out to have the underlay's gateway route it to a"
                " node, as a pass-through load balancer does",
            )
        if inside(vip, cluster.underlay):
            raise src.error(
                (*path, "services"),
                f"{svc.name}'s load balancer IP {vip} is inside the underlay {cluster.underlay}: nodes "
                "would look for it on their own link instead of routing it to the load balancer",
            )
        behind = bool(egress) and any(inside(vip, d) for d in egress.destinations)  # type: ignore[union-attr]
        for port in svc.ports:
            if lb.forward == "nodePort" and not port.node_port:
                raise src.error((*path, "services"), f"{svc.name} has no NodePort to forward to")
            frontends.append(
                FrontendSpec(
                    f"{svc.namespace}/{svc.name}",
                    vip,
                    port.port,
                    port.protocol,
                    port.node_port,
                    svc.health_check_node_port if svc.external_policy == "Local" else 0,
                    behind,
                )
            )
    return frontends


def gateway_routes(
    nodes: tuple[NodeSpec, ...],
    services: tuple[ServiceSpec, ...],
    balancers: tuple[LoadBalancerSpec, ...],
    announcements: tuple[AnnouncementSpec, ...] = (),
) -> tuple[tuple[str, str], ...]:
    """Where the gateway (standing in for a pass-through load balancer) sends each VIP no load balancer serves.

    Like a cloud LB health-checking healthCheckNodePort, a Local Service's VIP goes to a node
    with a ready local endpoint; otherwise to the first node. A layer 2 VIP gets no route: the gateway, on the
    underlay, asks ARP for it like every other host there.
    """
    served = {f.vip for lb in balancers for f in lb.frontends} | {a.vip for a in announcements}
    routes = {}
    for svc in services:
        target = nodes[0]
        if svc.external_policy == "Local":
            hosting = {ep.node for p in svc.ports for ep in p.endpoints if ep.ready}
            target = next((n for n in nodes if n.name in hosting), nodes[0])
        # A cloud sends an ipMode: Proxy address to its proxy (a declared load balancer), never to a node.
        direct = tuple(ip for ip in svc.ingress_ips if ip not in svc.proxy_ingress_ips)
        for vip in svc.external_ips + direct:
            if vip not in {address for n in nodes for address in (n.ip, n.secondary_ip)}:
                routes.setdefault(vip, target.ip_of(family_of(vip) or "IPv4"))  # the node's address of its family
    return tuple(r for r in routes.items() if r[0] not in served)
