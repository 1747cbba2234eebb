"""The machines outside the workload: nodes (addresses, pod blocks, kubelet's labels) and external hosts (on the
underlay, or behind a router on its own LAN), with the routes routers take."""

from __future__ import annotations

import ipaddress

from lab.describe import ipv4, schema
from lab.describe.families import family_of, split
from lab.describe.resolve.checks import disjoint, hosts, inside, unique
from lab.describe.topology import DEFAULT_MTU, ClusterSpec, ExternalSpec, NodeSpec, RouteSpec, of_family
from lab.describe.yamlsrc import FieldPath, Source

# Bytes a tunnel adds to each packet: ipip an outer IPv4 header; VXLAN outer IPv4, UDP, VXLAN and Ethernet
# headers. `auto` picks its kind later (ipip where the kernel has it): the wider of the two.
TUNNEL_OVERHEAD = {"ipip": 20, "vxlan": 50, "auto": 50}
IPV6_MIN_MTU = 1280  # RFC 8200 section 5: every link that carries IPv6
MAX_NODES = 100  # the most nodes the lab builds: the largest size measured on a 2-core machine (docs/scale.md)


def resolve_nodes(
    src: Source, declared: list[schema.Node], cluster: ClusterSpec, arch: str | None = None
) -> tuple[NodeSpec, ...]:
    """Each node on the underlay with its own block of clusterCIDR, and its cni0 or tunnel address from it; `arch`
    is the machine's (the nodes are its namespaces), None for no machine."""
    built = sum(1 for n in declared if not n.stand_in)
    if built > MAX_NODES:
        raise src.error(
            ("nodes",),
            f"at most {MAX_NODES} nodes: this file asks for {built}; 100 nodes of 100 pods is the largest "
            "size measured (docs/scale.md); the others can be stand-ins (standIn: true)",
        )
    nodes = []
    for i, n in enumerate(declared):
        if n.stand_in:
            _check_stand_in(src, ("nodes", i), n, cluster)
        ips = _per_family(src, ("nodes", i, "ip"), n.ip, cluster)
        for ip in ips:
            _underlay_address(src, ("nodes", i, "ip"), ip, cluster)
        blocks = _per_family(src, ("nodes", i, "podCIDR"), n.pod_cidr, cluster)
        for block in blocks:
            within = cluster.cluster_cidr_of(family_of(block) or "IPv4")
            if not ipaddress.ip_network(block).subnet_of(ipaddress.ip_network(within)):  # type: ignore[arg-type]
                raise src.error(("nodes", i, "podCIDR"), f"{block} is not inside clusterCIDR {within}")
        if len(blocks) == 2 and _room(blocks[1]) < _room(blocks[0]):
            raise src.error(
                ("nodes", i, "podCIDR"),
                f"{blocks[1]} holds fewer pods than {blocks[0]}: every pod takes an address of each family, so the"
                " secondary block must be at least as large",
            )
        pod_cidr, second_block = blocks[0], "".join(blocks[1:])
        second = {
            "secondary_ip": "".join(ips[1:]),
            "secondary_pod_cidr": second_block,
            "secondary_bridge_ip": next(hosts(second_block)) if second_block else "",
        }
        labels = tuple(sorted((_kubelet_labels(n.name, arch) | n.labels).items()))
        if n.mtu is not None and n.mtu < IPV6_MIN_MTU and "IPv6" in cluster.families:
            raise src.error(
                ("nodes", i, "mtu"),
                f"{n.mtu} is below IPv6's minimum link MTU, {IPV6_MIN_MTU} (RFC 8200): Linux turns IPv6 off on such a"
                " link; expected at least 1280 in a cluster with IPv6",
            )
        if cluster.cni == "routed-tunnel":
            # No bridge: the tunnel device takes the block's first address, as Calico's tunl0 does.
            if second_block or family_of(pod_cidr) != "IPv4":
                raise src.error(("nodes", i, "podCIDR"), "cni: routed-tunnel is modelled for IPv4 pod blocks only")
            block = ipaddress.ip_network(pod_cidr)
            mtu = n.mtu or DEFAULT_MTU
            if cluster.tunnel_mtu and cluster.tunnel_mtu + TUNNEL_OVERHEAD[cluster.tunnel] > mtu:
                raise src.error(
                    ("cluster", "tunnelMTU"),
                    f"tunnelMTU {cluster.tunnel_mtu} with tunnel {cluster.tunnel} needs {cluster.tunnel_mtu}"
                    f" + {TUNNEL_OVERHEAD[cluster.tunnel]} bytes of encapsulation on {n.name}'s link, whose MTU is"
                    f" {mtu}: at most {mtu - TUNNEL_OVERHEAD[cluster.tunnel]}",
                )
            nodes.append(NodeSpec(n.name, ips[0], pod_cidr, "", labels, str(block.network_address), mtu))
        elif cluster.cni == "flannel":
            # cni0 takes the block's first host address (flannel's CNI config delegates to the bridge plugin with
            # host-local IPAM), flannel.1 the network address with /32 (vxlan.go configureDeviceIPv4IPv6).
            if second_block or family_of(pod_cidr) != "IPv4":
                raise src.error(
                    ("nodes", i, "podCIDR"),
                    "cni: flannel is modelled for IPv4 pod blocks only (its IPv6 device flannel-v6.1 is not built)",
                )
            block = ipaddress.ip_network(pod_cidr)
            bridge, mtu = next(hosts(pod_cidr)), n.mtu or DEFAULT_MTU
            nodes.append(NodeSpec(n.name, ips[0], pod_cidr, bridge, labels, str(block.network_address), mtu))
        else:
            bridge = next(hosts(pod_cidr))
            mtu = n.mtu or DEFAULT_MTU
            nodes.append(NodeSpec(n.name, ips[0], pod_cidr, bridge, labels, mtu=mtu, stand_in=n.stand_in, **second))
    _disjoint_blocks(src, declared, nodes)
    unique(src, "node name", [(("nodes", i, "name"), n.name) for i, n in enumerate(nodes)])
    unique(src, "address", [(("nodes", i, "ip"), a) for i, n in enumerate(nodes) for a in (n.ip, n.secondary_ip) if a])
    return tuple(nodes)


def _check_stand_in(src: Source, path: FieldPath, n: schema.Node, cluster: ClusterSpec) -> None:
    """A stand-in is modelled where the underlay routes pod blocks to their nodes (cni bridge), single-stack: its
    pods answer from one namespace at its podCIDR, which the real nodes route to its node IP."""
    if cluster.cni != "bridge":
        raise src.error(
            (*path, "standIn"), f"stand-in nodes are modelled with cni: bridge (pod blocks routed), not {cluster.cni}"
        )
    if len(cluster.families) > 1:
        raise src.error((*path, "standIn"), "stand-in nodes are modelled in single-stack clusters only")
    if n.mtu is not None:
        raise src.error((*path, "mtu"), "a stand-in node has no link of its own: give its mtu only to a built node")


def _disjoint_blocks(src: Source, declared: list[schema.Node], nodes: list[NodeSpec]) -> None:
    """Refuse two nodes' podCIDRs that share an address, at the later node, naming the earlier. Sorted by first
    address, each block is compared with one block only, the one reaching furthest before it: two CIDR blocks
    overlap only when one holds the other, and a block held by any block before it is held by that one. n log n,
    where comparing every pair took 57 s at 2 000 nodes."""
    blocks = sorted(
        (net.version, int(net.network_address), int(net.broadcast_address), i, str(net))
        for i, n in enumerate(nodes)
        for net in (ipaddress.ip_network(b) for b in (n.pod_cidr, n.secondary_pod_cidr) if b)
    )
    reach: tuple[int, int, int, str] | None = None  # the block reaching furthest so far: version, end, node, block
    for version, start, end, i, block in blocks:
        if reach is not None and reach[0] == version and start <= reach[1]:
            (earlier, first), (later, second) = sorted([(reach[2], reach[3]), (i, block)])
            raise src.error(("nodes", later, "podCIDR"), f"{second} overlaps {declared[earlier].name}'s {first}")
        if reach is None or reach[0] != version or end > reach[1]:
            reach = (version, end, i, block)


def _room(block: str) -> int:
    return ipaddress.ip_network(block).num_addresses


def _per_family(src: Source, path: FieldPath, value: str, cluster: ClusterSpec) -> tuple[str, ...]:
    """One value per family of the cluster, in the cluster's order (the schema checked each value)."""
    values = split(value)
    if tuple(family_of(v) for v in values) != cluster.families:
        wanted = " and ".join(cluster.families)
        raise src.error(
            path,
            f"expected one value per family of the cluster ({wanted}, in that order, comma-separated), got {value!r}",
        )
    return values


def _kubelet_labels(node: str, arch: str | None) -> dict[str, str]:
    """The labels kubelet puts on every node; a scenario's own labels add to them or replace them."""
    labels = {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux"}
    return labels | {"kubernetes.io/arch": arch} if arch else labels


def _underlay_address(src: Source, path: FieldPath, ip: str, cluster: ClusterSpec) -> None:
    """An address on the underlay of its family that is neither its network, its broadcast nor the gateway's."""
    family = family_of(ip)
    underlay = of_family(family or "IPv4", cluster.underlay, cluster.secondary_underlay)
    gateway = of_family(family or "IPv4", cluster.gateway_ip, cluster.secondary_gateway_ip)
    if not underlay:
        raise src.error(path, f"{ip} is an {family} address; the underlay is {cluster.underlay} only")
    if not inside(ip, underlay):
        raise src.error(path, f"{ip} is outside the underlay {underlay} (cluster.underlay)")
    net = ipaddress.ip_network(underlay)
    if ip in (str(net.network_address), str(net.broadcast_address), gateway):
        raise src.error(path, f"{ip} is reserved in {underlay} (network, broadcast or the gateway {gateway})")


def resolve_externals(
    src: Source, declared: list[schema.ExternalHost], cluster: ClusterSpec, nodes: tuple[NodeSpec, ...]
) -> tuple[ExternalSpec, ...]:
    """Each external host at its address, a router with its LAN and routes; names and addresses shared with
    nodes, stand-ins too (their node IPs are on the underlay), are refused. `nodes` are every node declared, in
    their order; a route's next hop is a built one (a stand-in routes nothing)."""
    routers = _routers(src, declared, cluster)
    built = {n.name: n.ip for n in nodes if not n.stand_in}
    underlay_names = built | {h.name: split(h.ip)[0] for h in declared if not h.behind}
    externals = []
    for i, h in enumerate(declared):
        path: FieldPath = ("externalHosts", i)
        ips = split(h.ip)
        if (h.behind or h.network or h.routes) and (len(ips) > 1 or family_of(ips[0]) != "IPv4"):
            raise src.error((*path, "ip"), "routers and the hosts behind them are modelled with IPv4 addresses only")
        if h.behind:
            _lan_address(src, path, h, routers)
        for ip in ips if not h.behind else ():
            _underlay_address(src, (*path, "ip"), ip, cluster)
        routes = [_route(src, (*path, "routes", j), h.name, r, underlay_names, cluster) for j, r in enumerate(h.routes)]
        if h.masquerade and not h.network:
            raise src.error((*path, "masquerade"), "only a router with a `network` can masquerade its hosts")
        lan_ip = next(hosts(h.network)) if h.network else ""
        externals.append(
            ExternalSpec(
                h.name,
                ips[0],
                h.network or "",
                lan_ip,
                tuple(routes),
                h.masquerade,
                h.behind or "",
                secondary_ip="".join(ips[1:]),
            )
        )
    named = [(("nodes", i, "name"), n.name) for i, n in enumerate(nodes)]
    unique(src, "name", named + [(("externalHosts", i, "name"), h.name) for i, h in enumerate(externals)])
    addressed = [(("nodes", i, "ip"), n.ip) for i, n in enumerate(nodes)]
    addressed += [(("nodes", i, "ip"), n.secondary_ip) for i, n in enumerate(nodes) if n.secondary_ip]
    addressed += [(("externalHosts", i, "ip"), a) for i, h in enumerate(externals) for a in (h.ip, h.secondary_ip) if a]
    unique(src, "address", addressed)
    return tuple(externals)


def _routers(
    src: Source, declared: list[schema.ExternalHost], cluster: ClusterSpec
) -> dict[str, tuple[int, schema.ExternalHost]]:
    """The hosts with a LAN of their own, by name, each LAN checked: outside the cluster's networks and every
    other LAN, and large enough for the router and a host."""
    routers = {h.name: (i, h) for i, h in enumerate(declared) if h.network}
    lans: list[tuple[FieldPath, str]] = []
    for i, h in routers.values():
        assert h.network is not None
        path: FieldPath = ("externalHosts", i, "network")
        disjoint(src, path, h.network, cluster, "network")
        for other_path, other in lans:
            if ipaddress.IPv4Network(h.network).overlaps(ipaddress.IPv4Network(other)):
                raise src.error(path, f"{h.network} overlaps {other} (line {src.line_of(other_path)})")
        if ipaddress.IPv4Network(h.network).num_addresses < 4:
            raise src.error(path, f"{h.network} is too small for a router and a host; use /30 or larger")
        lans.append((path, h.network))
    return routers


def _lan_address(
    src: Source, path: FieldPath, h: schema.ExternalHost, routers: dict[str, tuple[int, schema.ExternalHost]]
) -> None:
    """A host behind a router: a plain host with a free address of the router's LAN."""
    assert h.behind is not None
    if h.behind not in routers:
        known = ", ".join(sorted(routers)) or "none: give a host a `network`"
        raise src.error((*path, "behind"), f"{h.behind!r} is not a router; routers: {known}")
    if h.network or h.routes:
        raise src.error((*path, "behind"), "a host behind a router cannot route itself")
    lan = routers[h.behind][1].network
    assert lan is not None
    net = ipaddress.IPv4Network(lan)
    if not inside(h.ip, lan):
        raise src.error((*path, "ip"), f"{h.ip} is outside {h.behind}'s network {lan}")
    if h.ip in (str(net.network_address), str(net.broadcast_address), next(hosts(lan))):
        raise src.error((*path, "ip"), f"{h.ip} is reserved in {lan} (network, broadcast or the router's address)")


def _route(
    src: Source,
    path: FieldPath,
    router: str,
    route: schema.Route,
    underlay_names: dict[str, str],
    cluster: ClusterSpec,
) -> RouteSpec:
    """A route of a host on the underlay: each next hop a node, another host there, or an address on it."""
    hops = []
    for k, hop in enumerate(route.via):
        hpath: FieldPath = (*path, "via", k)
        if hop == router:
            raise src.error(hpath, "a route cannot point at its own router")
        if hop in underlay_names:
            hops.append(underlay_names[hop])
            continue
        try:
            hop = ipv4.address(hop)
        except ValueError:
            known = ", ".join(sorted(underlay_names))
            raise src.error(
                hpath, f"unknown next hop {hop!r}: a node, a host on the underlay ({known}) or an address"
            ) from None
        if not inside(hop, cluster.underlay):
            raise src.error(hpath, f"{hop} is not on the underlay {cluster.underlay}: not a next hop")
        hops.append(hop)
    if len(set(hops)) != len(hops):
        raise src.error((*path, "via"), "a next hop is listed twice")
    return RouteSpec(route.to, tuple(hops))
