"""Checks and address arithmetic that several resolve steps share, each error at the line of the field."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator

from lab.describe.families import overlap
from lab.describe.refs import ObjectRef
from lab.describe.topology import ClusterSpec, ExternalSpec, NodeSpec, PodSpec, Topology
from lab.describe.yamlsrc import FieldPath, Source


def hosts(cidr: str) -> Iterator[str]:
    """The network's host addresses in order (IPv6: from ::1, the Subnet-Router anycast address left out)."""
    return (str(ip) for ip in ipaddress.ip_network(cidr).hosts())


def inside(address: str, cidr: str) -> bool:
    """Whether the address is in the network (never across families)."""
    return ipaddress.ip_address(address) in ipaddress.ip_network(cidr)


def cluster_ip_problem(address: str, cidr: str) -> str | None:
    """Why the API server would not allocate `address` from the service CIDR `cidr`: outside it, or its first
    address, or for IPv4 its last (the broadcast), which the allocator leaves out of its range (kubernetes/
    kubernetes pkg/registry/core/service/ipallocator/ipallocator.go at 2e0908106e4420a601e50d6edfd41475de87a3e1,
    NewIPAllocator's firstAddress and lastAddress: ErrNotInRange)."""
    ip, net = ipaddress.ip_address(address), ipaddress.ip_network(cidr)
    if ip not in net:
        return f"{address} is outside serviceCIDR {cidr}"
    if ip == net.network_address:
        return f"{address} is serviceCIDR {cidr}'s first address, which the API server never allocates"
    if net.version == 4 and ip == net.broadcast_address:
        return f"{address} is serviceCIDR {cidr}'s broadcast address, which the API server never allocates"
    return None


def unique(src: Source, kind: str, items: list[tuple[FieldPath, str]]) -> None:
    """Refuse a value given twice, at its second place, naming the line of its first."""
    seen: dict[str, FieldPath] = {}
    for path, value in items:
        if value in seen:
            raise src.error(path, f"{kind} {value!r} is already used at line {src.line_of(seen[value])}")
        seen[value] = path


def node_names(src: Source, path: FieldPath, names: list[str], nodes: tuple[NodeSpec, ...]) -> tuple[str, ...]:
    """A list of node names, each a node of the scenario and none twice."""
    known = [n.name for n in nodes]
    for k, name in enumerate(names):
        if name not in known:
            raise src.error((*path, k), f"unknown node {name!r}; expected one of {', '.join(known)}")
    if len(set(names)) != len(names):
        raise src.error(path, "a node is listed twice")
    return tuple(names)


def disjoint(src: Source, path: FieldPath, cidr: str, cluster: ClusterSpec, what: str) -> None:
    """Refuse a network outside the cluster (a router's LAN, an egress destination) that overlaps its own."""
    nets = {
        "underlay": (cluster.underlay, cluster.secondary_underlay),
        "clusterCIDR": (cluster.cluster_cidr, cluster.secondary_cluster_cidr),
        "serviceCIDR": (cluster.service_cidr, cluster.secondary_service_cidr),
    }
    for name, pair in nets.items():
        for net in pair:
            if net and overlap(cidr, net):
                raise src.error(path, f"{what} {cidr} overlaps {name} {net}")


def host_names(nodes: Iterable[NodeSpec], externals: Iterable[ExternalSpec]) -> frozenset[str]:
    """The names of the hosts a scenario declares: nodes (stand-ins too) and external hosts. A bare name is the
    host's: a pod of the same name is its NAMESPACE/NAME (Kubernetes keeps a Pod's and a Node's names apart)."""
    return frozenset(n.name for n in nodes) | {e.name for e in externals}


def pod_named(src: Source, path: FieldPath, text: str, topo: Topology) -> PodSpec | None:
    """The built pod `text` names, NAMESPACE/NAME or a NAME only one namespace's pod has and no host; None when no
    pod has it. A bare name that pods of two namespaces have is refused, naming both."""
    ref = ObjectRef.parse(text, default_namespace="")
    name = ref.name
    if not ref.namespaced and name in host_names((*topo.nodes, *topo.stand_ins), topo.externals):
        return None
    pods = topo.built_pods
    found = [p for p in pods if p.kube_name == name and (not ref.namespaced or p.namespace == ref.namespace)]
    if len(found) > 1:
        each = " and ".join(f"{p.namespace}/{name}" for p in found)
        raise src.error(path, f"{name!r} names more than one pod ({each}): write NAMESPACE/NAME")
    return found[0] if found else None
