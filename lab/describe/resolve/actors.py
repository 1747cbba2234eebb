"""What the cloud provides around the cluster: external load balancers (which Services each serves, on which
VIPs and ports), the gateway's routes for the VIPs no load balancer serves, the egress gateway and ip-masq-agent."""

from __future__ import annotations

from lab.describe import schema
from lab.describe.families import family_of
from lab.describe.refs import ObjectRef
from lab.describe.resolve.checks import disjoint, inside, node_names, unique
from lab.describe.topology import (
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
) -> tuple[LoadBalancerSpec, ...]:
    """Each load balancer with the Services it names; the one that names none serves every other Service with
    a load balancer IP."""
    named = _named_services(src, declared, services)
    defaults = [i for i, lb in enumerate(declared) if lb.services is None]
    if len(defaults) > 1:
        raise src.error(("loadBalancers", defaults[1]), "only one load balancer may leave out `services`")
    claimed = {f"{s.namespace}/{s.name}" for chosen in named for s in chosen}
    rest = [
        s for s in services if s.type == "LoadBalancer" and s.ingress_ips and f"{s.namespace}/{s.name}" not in claimed
    ]
    balancers = tuple(
        _balancer(
            src, ("loadBalancers", i), lb, rest if lb.services is None else chosen, cluster, nodes, externals, egress
        )
        for i, (lb, chosen) in enumerate(zip(declared, named, strict=True))
    )
    unique(src, "load balancer name", [(("loadBalancers", i, "name"), lb.name) for i, lb in enumerate(declared)])
    vips = [
        (("loadBalancers", i), f"{f.vip}:{f.port}/{f.protocol}") for i, b in enumerate(balancers) for f in b.frontends
    ]
    unique(src, "load balancer frontend", vips)
    return balancers


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
    nodes: tuple[NodeSpec, ...], services: tuple[ServiceSpec, ...], balancers: tuple[LoadBalancerSpec, ...]
) -> tuple[tuple[str, str], ...]:
    """Where the gateway (standing in for a pass-through load balancer) sends each VIP no load balancer serves.

    Like a cloud LB health-checking healthCheckNodePort, a Local Service's VIP goes to a node
    with a ready local endpoint; otherwise to the first node.
    """
    served = {f.vip for lb in balancers for f in lb.frontends}
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
