"""The machines outside the workload: nodes (addresses, pod blocks, kubelet's labels) and external hosts (on the
underlay, or behind a router on its own LAN), with the routes routers take."""

from __future__ import annotations

import ipaddress

from lab.describe import schema
from lab.describe.resolve.checks import disjoint, hosts, inside, unique
from lab.describe.topology import DEFAULT_MTU, ClusterSpec, ExternalSpec, NodeSpec, RouteSpec
from lab.describe.yamlsrc import FieldPath, Source

# Bytes a tunnel adds to each packet: ipip an outer IPv4 header; VXLAN outer IPv4, UDP, VXLAN and Ethernet
# headers. `auto` picks its kind later (ipip where the kernel has it): the wider of the two.
TUNNEL_OVERHEAD = {"ipip": 20, "vxlan": 50, "auto": 50}


def resolve_nodes(
    src: Source, declared: list[schema.Node], cluster: ClusterSpec, arch: str | None = None
) -> tuple[NodeSpec, ...]:
    """Each node on the underlay with its own block of clusterCIDR, and its cni0 or tunnel address from it; `arch`
    is the machine's (the nodes are its namespaces), None for no machine."""
    nodes = []
    for i, n in enumerate(declared):
        _underlay_address(src, ("nodes", i, "ip"), n.ip, cluster)
        if not ipaddress.IPv4Network(n.pod_cidr).subnet_of(ipaddress.IPv4Network(cluster.cluster_cidr)):
            raise src.error(("nodes", i, "podCIDR"), f"{n.pod_cidr} is not inside clusterCIDR {cluster.cluster_cidr}")
        for other in declared[:i]:
            if ipaddress.IPv4Network(n.pod_cidr).overlaps(ipaddress.IPv4Network(other.pod_cidr)):
                raise src.error(("nodes", i, "podCIDR"), f"{n.pod_cidr} overlaps {other.name}'s {other.pod_cidr}")
        labels = tuple(sorted((_kubelet_labels(n.name, arch) | n.labels).items()))
        if cluster.cni == "routed-tunnel":
            # No bridge: the tunnel device takes the block's first address, as Calico's tunl0 does.
            block = ipaddress.IPv4Network(n.pod_cidr)
            mtu = n.mtu or DEFAULT_MTU
            if cluster.tunnel_mtu and cluster.tunnel_mtu + TUNNEL_OVERHEAD[cluster.tunnel] > mtu:
                raise src.error(
                    ("cluster", "tunnelMTU"),
                    f"tunnelMTU {cluster.tunnel_mtu} with tunnel {cluster.tunnel} needs {cluster.tunnel_mtu}"
                    f" + {TUNNEL_OVERHEAD[cluster.tunnel]} bytes of encapsulation on {n.name}'s link, whose MTU is"
                    f" {mtu}: at most {mtu - TUNNEL_OVERHEAD[cluster.tunnel]}",
                )
            nodes.append(NodeSpec(n.name, n.ip, n.pod_cidr, "", labels, str(block.network_address), mtu))
        else:
            nodes.append(NodeSpec(n.name, n.ip, n.pod_cidr, next(hosts(n.pod_cidr)), labels, mtu=n.mtu or DEFAULT_MTU))
    unique(src, "node name", [(("nodes", i, "name"), n.name) for i, n in enumerate(nodes)])
    unique(src, "address", [(("nodes", i, "ip"), n.ip) for i, n in enumerate(nodes)])
    return tuple(nodes)


def _kubelet_labels(node: str, arch: str | None) -> dict[str, str]:
    """The labels kubelet puts on every node; a scenario's own labels add to them or replace them."""
    labels = {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux"}
    return labels | {"kubernetes.io/arch": arch} if arch else labels


def _underlay_address(src: Source, path: FieldPath, ip: str, cluster: ClusterSpec) -> None:
    """An address on the underlay that is neither its network, its broadcast nor the gateway's."""
    if not inside(ip, cluster.underlay):
        raise src.error(path, f"{ip} is outside the underlay {cluster.underlay} (cluster.underlay)")
    net = ipaddress.IPv4Network(cluster.underlay)
    if ip in (str(net.network_address), str(net.broadcast_address), cluster.gateway_ip):
        raise src.error(
            path, f"{ip} is reserved in {cluster.underlay} (network, broadcast or the gateway {cluster.gateway_ip})"
        )


def resolve_externals(
    src: Source, declared: list[schema.ExternalHost], cluster: ClusterSpec, nodes: tuple[NodeSpec, ...]
) -> tuple[ExternalSpec, ...]:
    """Each external host at its address, a router with its LAN and routes; names and addresses shared with
    nodes are refused."""
    routers = _routers(src, declared, cluster)
    underlay_names = {n.name: n.ip for n in nodes} | {h.name: h.ip for h in declared if not h.behind}
    externals = []
    for i, h in enumerate(declared):
        path: FieldPath = ("externalHosts", i)
        if h.behind:
            _lan_address(src, path, h, routers)
        else:
            _underlay_address(src, (*path, "ip"), h.ip, cluster)
        routes = [_route(src, (*path, "routes", j), h.name, r, underlay_names, cluster) for j, r in enumerate(h.routes)]
        if h.masquerade and not h.network:
            raise src.error((*path, "masquerade"), "only a router with a `network` can masquerade its hosts")
        lan_ip = next(hosts(h.network)) if h.network else ""
        externals.append(
            ExternalSpec(h.name, h.ip, h.network or "", lan_ip, tuple(routes), h.masquerade, h.behind or "")
        )
    named = [(("nodes", i, "name"), n.name) for i, n in enumerate(nodes)]
    unique(src, "name", named + [(("externalHosts", i, "name"), h.name) for i, h in enumerate(externals)])
    addressed = [(("nodes", i, "ip"), n.ip) for i, n in enumerate(nodes)]
    unique(src, "address", addressed + [(("externalHosts", i, "ip"), h.ip) for i, h in enumerate(externals)])
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
            ipaddress.IPv4Address(hop)
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
