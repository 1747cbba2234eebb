"""The workload: pods (a Pod, or a Deployment's or ReplicaSet's replicas) placed on nodes and given addresses,
and Services with their clusterIP, NodePorts, load balancer IPs and endpoints (named ports looked up per pod)."""

from __future__ import annotations

import ipaddress
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import NamedTuple, TypeVar

from lab.describe import k8s
from lab.describe.families import Family, Problem, ServiceFamilies, family_of, service_families, slice_address_problem
from lab.describe.refs import replica_name
from lab.describe.resolve.checks import cluster_ip_problem, host_names, hosts, inside, unique
from lab.describe.topology import (
    TOPOLOGY_AWARE_HINTS,
    TOPOLOGY_MODE,
    ZONE_LABEL,
    ClusterSpec,
    EndpointSpec,
    ExternalSpec,
    Hints,
    NodeSpec,
    PodSpec,
    PortSpec,
    ServicePortSpec,
    ServiceSpec,
    of_family,
)
from lab.describe.yamlsrc import FieldPath, Source

NODE_PORT_RANGE = range(30000, 32768)
# The most pods a scenario builds, each a network namespace (with the replicas its scale steps create, built at
# the start): 100 nodes of 100 pods is the largest size measured on a 2-core machine (docs/scale.md).
MAX_PODS = 10_000


class _PodPlan(NamedTuple):
    """A pod the workload asks for, placed on its node, before it has an address."""

    path: FieldPath  # its manifest (a Pod, or the Deployment or ReplicaSet it is a replica of)
    name: str
    namespace: str
    node: NodeSpec
    labels: dict[str, str]
    spec: k8s.PodSpec
    ip: str | None = None  # status.podIP
    ready: bool = True
    owner: str = ""  # "Deployment/NAME" or "ReplicaSet/NAME" for a replica
    pending: bool = False  # a replica a later scale step creates
    ips: tuple[str, ...] = ()  # status.podIPs, the primary family's first


# (kind, namespace, name) of a Deployment or ReplicaSet → replicas its scale steps create beyond those declared
# Per Deployment or ReplicaSet: the replicas its scale steps create, and the step that asks for the most at once
# (where an error about the count belongs: the manifest's own count fit).
Demand = Mapping[tuple[str, str, str], tuple[int, FieldPath]]


def resolve_pods(
    src: Source,
    workload: list[k8s.Manifest],
    cluster: ClusterSpec,
    nodes: tuple[NodeSpec, ...],
    demand: Demand,
    externals: tuple[ExternalSpec, ...],
) -> tuple[tuple[PodSpec, ...], tuple[PodSpec, ...]]:
    """Every pod the workload asks for, on its node, with its address, ports and labels: those running at the
    start, and the replicas later scale steps create (`demand`), placed and addressed after them."""
    wanted = _plans(src, workload, nodes, demand)
    addresses = _pod_addresses(src, wanted, nodes, cluster)
    secondary = _secondary_addresses(src, wanted, nodes, cluster)
    unique(src, "pod name", [(w.path, f"{w.namespace}/{w.name}") for w in wanted])
    # A name two namespaces use, or a node's or an external host's too, is the pods' NAMESPACE/NAME in the lab
    # and its reports (its namespace, its actor): each is told apart, and a bare name stays the host's.
    shared = {name for name, n in Counter(w.name for w in wanted).items() if n > 1}
    shared |= host_names(nodes, externals) & {w.name for w in wanted}
    pods, pending = [], []
    for w, address, second in zip(wanted, addresses, secondary, strict=True):
        ports = tuple(PortSpec(p.container_port, p.protocol, p.name) for c in w.spec.containers for p in c.ports)
        labels = tuple(sorted(w.labels.items()))
        name = f"{w.namespace}/{w.name}" if w.name in shared else w.name
        spec = PodSpec(
            name,
            w.namespace,
            w.node.name,
            address,
            labels,
            ports,
            w.spec.host_network,
            w.ready,
            owner=w.owner,
            secondary_ip=second,
        )
        (pending if w.pending else pods).append(spec)
    return tuple(pods), tuple(pending)


def _plans(src: Source, workload: list[k8s.Manifest], nodes: tuple[NodeSpec, ...], demand: Demand) -> list[_PodPlan]:
    """Every pod the manifests ask for, on its node: a replica goes to the template's matching nodes in turn;
    those a later scale step creates come last, so the pods running at the start keep their addresses."""
    total = _pod_total(workload, demand)
    later: list[_PodPlan] = []
    wanted: list[_PodPlan] = []
    for i, m in enumerate(workload):
        path: FieldPath = ("workload", i)
        if isinstance(m, k8s.Pod):
            _bound_pods(src, path, len(wanted) + len(later) + 1, total)
            node = _place(src, (*path, "spec"), m.spec, nodes)[0]
            meta, status = m.metadata, m.status
            ips = tuple(p.ip for p in status.pod_ips)
            ip = status.pod_ip or (ips[0] if ips else None)
            plan = _PodPlan(path, meta.name, meta.namespace, node, meta.labels, m.spec, ip, status.ready, ips=ips)
            wanted.append(plan)
        elif isinstance(m, k8s.Deployment):
            tpl = m.spec.template
            if not set(m.spec.selector.match_labels.items()) <= set(tpl.metadata.labels.items()):
                raise src.error((*path, "spec", "selector"), "selector does not match the template's labels")
            placed = _place(src, (*path, "spec", "template", "spec"), tpl.spec, nodes)
            extra, step = demand.get((m.kind, m.metadata.namespace, m.metadata.name), (0, ()))
            # Checked before a plan per replica is made (placing a billion would not end); the per-node count of
            # what fits is _pod_addresses'.
            room = sum(ipaddress.ip_network(n.pod_cidr).num_addresses - 3 for n in nodes)  # net, broadcast, cni0
            if m.spec.replicas > room:
                raise src.error(
                    (*path, "spec", "replicas"),
                    f"{m.spec.replicas} replicas cannot fit: all nodes' podCIDRs together hold {room} pods",
                )
            if m.spec.replicas + extra > room:
                raise src.error(
                    (*step, "replicas"),
                    f"{m.spec.replicas + extra} replicas of {m.kind} {m.metadata.name} (the {m.spec.replicas} it "
                    f"declares and {extra} new ones its scale steps create) cannot fit: all nodes' podCIDRs together "
                    f"hold {room} pods",
                )
            _bound_pods(src, (*path, "spec", "replicas"), len(wanted) + len(later) + m.spec.replicas + extra, total)
            for r in range(m.spec.replicas + extra):
                node = placed[r % len(placed)]
                name = replica_name(m.metadata.name, r)
                owner = f"{m.kind}/{m.metadata.name}"
                plan = _PodPlan(path, name, m.metadata.namespace, node, tpl.metadata.labels, tpl.spec, owner=owner)
                if r < m.spec.replicas:
                    wanted.append(plan)
                else:
                    later.append(plan._replace(pending=True))
    return wanted + later


def _pod_total(workload: list[k8s.Manifest], demand: Demand) -> int:
    """Every pod the file asks for, the replicas its scale steps create included."""
    total = 0
    for m in workload:
        if isinstance(m, k8s.Pod):
            total += 1
        elif isinstance(m, k8s.Deployment):
            total += m.spec.replicas + demand.get((m.kind, m.metadata.namespace, m.metadata.name), (0, ()))[0]
    return total


def _bound_pods(src: Source, path: FieldPath, planned: int, total: int) -> None:
    """Refuse, at the manifest that passes MAX_PODS, before a plan is made for its pods."""
    if planned > MAX_PODS:
        raise src.error(
            path,
            f"at most {MAX_PODS} pods (with the replicas scale steps create): this file asks for {total}; the lab "
            "builds a network namespace per pod, and 100 nodes of 100 pods is the largest size measured "
            "(docs/scale.md)",
        )


def _place(src: Source, path: FieldPath, spec: k8s.PodSpec, nodes: tuple[NodeSpec, ...]) -> list[NodeSpec]:
    """The nodes a pod may run on: its nodeName, or every node its nodeSelector matches."""
    if spec.node_name:
        match = [n for n in nodes if n.name == spec.node_name]
        if not match:
            known = ", ".join(n.name for n in nodes)
            raise src.error((*path, "nodeName"), f"unknown node {spec.node_name!r}; expected one of {known}")
        if match[0].stand_in:
            raise src.error(
                (*path, "nodeName"),
                f"{spec.node_name} is a stand-in node (standIn: true): it runs no pod the lab builds; its pods are "
                "the addresses of its podCIDR an EndpointSlice names",
            )
        return match
    match = [n for n in nodes if not n.stand_in and set(spec.node_selector.items()) <= set(n.labels)]
    if not match:
        raise src.error((*path, "nodeSelector"), f"{spec.node_selector} matches no node's labels")
    return match


def _pod_addresses(src: Source, wanted: list[_PodPlan], nodes: tuple[NodeSpec, ...], cluster: ClusterSpec) -> list[str]:
    """Each pod's address: its node's with hostNetwork, else status.podIP, else the next free one in its node's
    podCIDR."""
    given: dict[str, FieldPath] = {}
    for w in wanted:
        if w.ips and w.ip != w.ips[0]:
            raise src.error((*w.path, "status", "podIPs", 0, "ip"), f"must match status.podIP {w.ip}")
        if w.ip and not w.spec.host_network:
            _check_pod_ip(src, (*w.path, "status", "podIP"), w.ip, w.node, given)
            given[w.ip] = (*w.path, "status", "podIP")
    # The bridge takes the block's first host address; routed-tunnel's tunnel device takes the network address.
    skip = 0 if cluster.cni == "routed-tunnel" else 1
    free = {n.name: (a for a in itertools.islice(hosts(n.pod_cidr), skip, None) if a not in given) for n in nodes}
    addresses = []
    for w in wanted:
        address = w.node.ip if w.spec.host_network else w.ip or next(free[w.node.name], None)
        if address is None:
            room = sum(1 for _ in itertools.islice(hosts(w.node.pod_cidr), skip, None))
            placed = sum(1 for o in wanted if o.node == w.node and not o.spec.host_network)
            raise src.error(
                w.path,
                f"{w.node.name}'s podCIDR {w.node.pod_cidr} has room for {room} pods, and {placed} are placed "
                f"there; no address is left for {w.name} (give {w.node.name} a larger podCIDR)",
            )
        addresses.append(address)
    return addresses


def _secondary_addresses(
    src: Source, wanted: list[_PodPlan], nodes: tuple[NodeSpec, ...], cluster: ClusterSpec
) -> list[str]:
    """Dual-stack: each pod's address of the secondary family: status.podIPs[1] when given (a free address of its
    node's secondary pod block), else the next free one of that block after cni0's, or its node's with hostNetwork;
    "" for every pod single-stack. A primary block that fits the pods has the room: describe asks the secondary
    block to be as large (lab/describe/resolve/network.py)."""
    given: dict[str, FieldPath] = {}
    for w in wanted:
        path = (*w.path, "status", "podIPs")
        if len(w.ips) > 2 or (len(w.ips) == 2 and not cluster.secondary_cluster_cidr):
            raise src.error(path, f"expected one address per family of the cluster ({', '.join(cluster.families)})")
        if len(w.ips) == 2 and not w.spec.host_network:
            _check_pod_ip(src, (*path, 1, "ip"), w.ips[1], w.node, given, secondary=True)
            given[w.ips[1]] = (*path, 1, "ip")
    if not cluster.secondary_cluster_cidr:
        return ["" for _ in wanted]
    free = {
        n.name: (a for a in itertools.islice(hosts(n.secondary_pod_cidr), 1, None) if a not in given) for n in nodes
    }
    return [
        w.node.secondary_ip if w.spec.host_network else w.ips[1] if len(w.ips) == 2 else next(free[w.node.name])
        for w in wanted
    ]


def _check_pod_ip(
    src: Source, path: FieldPath, ip: str, node: NodeSpec, given: dict[str, FieldPath], secondary: bool = False
) -> None:
    """A status.podIP (`secondary`: status.podIPs[1]): a free address of its node's podCIDR of that family, given to
    one pod only."""
    cidr = node.secondary_pod_cidr if secondary else node.pod_cidr
    net = ipaddress.ip_network(cidr)
    if family_of(ip) is None:
        raise src.error(path, f"expected an IP address, got {ip!r}")
    if not inside(ip, cidr):
        raise src.error(path, f"{ip} is outside {node.name}'s podCIDR {cidr}")
    if ip in given:
        raise src.error(path, f"{ip} is already a pod's podIP at line {src.line_of(given[ip])}")
    own = (node.secondary_bridge_ip,) if secondary else (node.bridge_ip, node.tunnel_ip)
    if ip in (str(net.network_address), str(net.broadcast_address), *own):
        raise src.error(path, f"{ip} is reserved in {cidr}: network, broadcast or {node.name}'s own (cni0, tunnel)")


def resolve_services(
    src: Source,
    workload: list[k8s.Manifest],
    cluster: ClusterSpec,
    nodes: tuple[NodeSpec, ...],
    pods: tuple[PodSpec, ...],
    externals: tuple[ExternalSpec, ...],
) -> tuple[ServiceSpec, ...]:
    """Every Service; what a manifest leaves out is allocated as the API server would, from what none takes. A
    Service without a selector takes its endpoints from the EndpointSlices written for it."""
    manifests = [(i, m) for i, m in enumerate(workload) if isinstance(m, k8s.Service)]
    stand_ins = tuple(n for n in nodes if n.stand_in)
    slices = _slices(src, workload, [m for _, m in manifests], pods, externals, cluster.families, stand_ins)
    taken_ips = {ip for _, m in manifests for ip in (m.spec.cluster_ip, *m.spec.cluster_ips) if ip}
    free_ips = {
        family: (ip for ip in itertools.islice(hosts(cluster.service_cidr_of(family)), 9, None) if ip not in taken_ips)
        for family in cluster.families
    }
    taken_ports = {p.node_port for _, m in manifests for p in m.spec.ports if p.node_port}
    taken_ports |= {m.spec.health_check_node_port for _, m in manifests if m.spec.health_check_node_port}
    free_ports = (p for p in NODE_PORT_RANGE if p not in taken_ports)
    zones = {n.name: dict(n.labels).get(ZONE_LABEL, "") for n in nodes}
    services = [
        _service(src, ("workload", i), m, cluster, pods, free_ips, free_ports, slices, zones) for i, m in manifests
    ]
    unique(
        src,
        "Service",
        [(("workload", i, "metadata", "name"), f"{m.metadata.namespace}/{m.metadata.name}") for i, m in manifests],
    )
    unique(
        src,
        "clusterIP",
        [(("workload", i, "spec", "clusterIP"), s.cluster_ip) for (i, _), s in zip(manifests, services, strict=True)],
    )
    return tuple(services)


T = TypeVar("T")


def _take(src: Source, path: FieldPath, free: Iterator[T], what: str) -> T:
    """The next free value, or an error at the field that wanted one (was a StopIteration traceback)."""
    value = next(free, None)
    if value is None:
        raise src.error(path, f"no {what} is left to allocate; give one explicitly or widen the range")
    return value


def _service(
    src: Source,
    path: FieldPath,
    m: k8s.Service,
    cluster: ClusterSpec,
    pods: tuple[PodSpec, ...],
    free_ips: Mapping[Family, Iterator[str]],
    free_ports: Iterator[int],
    slices: Mapping[tuple[str, str], list[_SliceEndpoint]],
    zones: Mapping[str, str],
) -> ServiceSpec:
    """One Service: its clusterIP in serviceCIDR, the pods it selects (or, without a selector, its EndpointSlices'
    endpoints), its ports with their NodePorts and endpoints, its load balancer addresses and health check
    NodePort (those left out taken from `free_*`)."""
    topology = _topology_annotations(src, (*path, "metadata", "annotations"), m)
    path = (*path, "spec")
    spec = m.spec
    families = _families(src, path, spec, cluster)
    cluster_ips = []
    for k, family in enumerate(families.families):
        where = (*path, "clusterIP") if k == 0 else (*path, "clusterIPs", k)
        cidr = cluster.service_cidr_of(family)
        given = spec.cluster_ip if k == 0 else spec.cluster_ips[k] if k < len(spec.cluster_ips) else None
        ip = given or _take(src, where, free_ips[family], f"address of serviceCIDR {cidr}")
        if problem := cluster_ip_problem(ip, cidr):
            raise src.error(where, problem)
        cluster_ips.append(ip)
    cluster_ip = cluster_ips[0]
    selected = [
        p
        for p in pods
        if p.namespace == m.metadata.namespace and spec.selector and set(spec.selector.items()) <= set(p.labels)
    ]
    external = spec.type != "ClusterIP"
    ports = []
    for j, p in enumerate(spec.ports):
        _check_node_port(src, (*path, "ports", j, "nodePort"), p.node_port)
        node_port = (
            (p.node_port or _take(src, (*path, "ports", j, "nodePort"), free_ports, "NodePort")) if external else 0
        )
        if spec.selector:
            eps = _endpoints(src, (*path, "ports", j), p, selected, zones, families.families)
        else:
            eps = tuple(e.spec for e in slices.get((m.metadata.namespace, m.metadata.name), []) if e.serves(p))
        ports.append(ServicePortSpec(p.name, p.port, p.protocol, node_port, eps))
    ingress, proxied = _load_balancer_ips(src, path, m, cluster)
    _check_node_port(src, (*path, "healthCheckNodePort"), spec.health_check_node_port)
    local_lb = spec.type == "LoadBalancer" and spec.external_traffic_policy == "Local"
    return ServiceSpec(
        name=m.metadata.name,
        namespace=m.metadata.namespace,
        type=spec.type,
        cluster_ip=cluster_ip,
        ports=tuple(ports),
        external_ips=tuple(spec.external_ips),
        load_balancer_source_ranges=tuple(spec.load_balancer_source_ranges),
        external_policy=spec.external_traffic_policy,
        internal_policy=spec.internal_traffic_policy,
        health_check_node_port=(
            spec.health_check_node_port or _take(src, (*path, "healthCheckNodePort"), free_ports, "NodePort")
        )
        if local_lb
        else 0,
        affinity_timeout=spec.session_affinity_config.client_ip.timeout_seconds
        if spec.session_affinity == "ClientIP"
        else 0,
        ingress_ips=tuple(ingress),
        proxy_ingress_ips=tuple(proxied),
        traffic_distribution=spec.traffic_distribution or "",
        topology_annotations=topology,
        ip_family_policy=families.policy,
        ip_families=families.families,
        secondary_cluster_ip="".join(cluster_ips[1:]),
    )


def _families(src: Source, path: FieldPath, spec: k8s.ServiceSpec, cluster: ClusterSpec) -> ServiceFamilies:
    """ipFamilyPolicy, ipFamilies and clusterIPs as the API server takes them in a cluster of these families: what
    it refuses is refused in its words."""
    given = (spec.cluster_ip, spec.cluster_ips)
    decided = service_families(spec.ip_family_policy, spec.ip_families, *given, cluster.families)
    if isinstance(decided, Problem):
        raise src.error((*path, *decided.field), decided.message)
    return decided


def _topology_annotations(src: Source, path: FieldPath, m: k8s.Service) -> tuple[tuple[str, str], ...]:
    """The Service's topology annotations as written. With a selector, an enabling one makes the EndpointSlice
    controller hint endpoints by each zone's share of the nodes' allocatable CPU, which the lab does not model:
    refused, rather than answered without the hints a cluster would have."""
    written = tuple(
        (key, m.metadata.annotations[key])
        for key in (TOPOLOGY_MODE, TOPOLOGY_AWARE_HINTS)
        if key in m.metadata.annotations
    )
    for key, value in written:
        if m.spec.selector and value not in ("", "disabled", "Disabled"):
            raise src.error(
                (*path, key),
                f"{key}: {value} has the EndpointSlice controller hint endpoints by each zone's share of allocatable "
                "CPU, which the lab does not model: write the Service without a selector and its EndpointSlice with "
                "the hints (endpoints[].hints.forZones), or use spec.trafficDistribution: PreferClose",
            )
    return written


def _load_balancer_ips(
    src: Source, path: FieldPath, m: k8s.Service, cluster: ClusterSpec
) -> tuple[list[str], list[str]]:
    """Every address a load balancer serves for the Service (status.loadBalancer.ingress, or loadBalancerIP),
    and those of them with ipMode: Proxy; no external address may be inside the cluster's own networks."""
    spec = m.spec
    ingress = [ing.ip for ing in m.status.load_balancer.ingress]
    proxied = [ing.ip for ing in m.status.load_balancer.ingress if ing.ip_mode == "Proxy"]
    if spec.load_balancer_ip and not ingress:
        ingress = [spec.load_balancer_ip]
    if ingress and spec.type != "LoadBalancer":
        raise src.error((*path, "type"), "a load balancer IP needs `type: LoadBalancer`")
    for k, ip in enumerate(spec.external_ips + ingress):
        if family_of(ip) not in cluster.families:
            only = " and ".join(cluster.families)
            raise src.error(
                (*path, "externalIPs", k),
                f"expected an {' or '.join(cluster.families)} address (the cluster is {only} only), got {ip!r}",
            )
        own = (
            cluster.service_cidr,
            cluster.cluster_cidr,
            cluster.secondary_service_cidr,
            cluster.secondary_cluster_cidr,
        )
        if any(inside(ip, net) for net in own if net):
            raise src.error((*path, "externalIPs", k), f"{ip} is inside the cluster's own networks")
    return ingress, proxied


def _check_node_port(src: Source, path: FieldPath, port: int | None) -> None:
    if port is not None and port not in NODE_PORT_RANGE:
        first, last = NODE_PORT_RANGE.start, NODE_PORT_RANGE.stop - 1
        raise src.error(path, f"expected a port in {first}-{last} (kube-apiserver's --service-node-port-range)")


def _endpoints(
    src: Source,
    path: FieldPath,
    port: k8s.ServicePortSpec,
    pods: list[PodSpec],
    zones: Mapping[str, str],
    families: tuple[Family, ...],
) -> tuple[EndpointSpec, ...]:
    """The selected pods that serve the port: every one for a numeric targetPort, those with a container port of
    that name and protocol for a named one; each with its node's zone (the controller hints from it). The
    controller writes a slice per family of the Service: an endpoint per pod address of each, the primary's first."""
    target = port.target_port if port.target_port is not None else port.port
    eps: list[tuple[PodSpec, int]] = []
    for pod in pods:
        if isinstance(target, int):
            number: int | None = target
        else:
            number = next((p.port for p in pod.ports if p.name == target and p.protocol == port.protocol), None)
        if number is not None:
            eps.append((pod, number))
    if isinstance(target, str) and pods and not eps:
        raise src.error((*path, "targetPort"), f"no selected pod has a container port named {target!r}")
    return tuple(
        EndpointSpec(pod.name, pod.node, ip, number, pod.ready, serving=pod.ready, zone=zones[pod.node])
        for family in families
        for pod, number in eps
        if (ip := of_family(family, *pod.ips))
    )


def unselected(src: Source, workload: list[k8s.Manifest], pods: tuple[PodSpec, ...]) -> tuple[str, ...]:
    """A warning for each Service whose selector matches no pod running at the start: normal (created before its
    Deployment, or its pods all gone), and kube-proxy rejects its traffic until one runs; said in case a label is
    misspelt."""
    said = []
    for i, m in enumerate(workload):
        if not isinstance(m, k8s.Service) or not m.spec.selector:
            continue
        namespace, wanted = m.metadata.namespace, set(m.spec.selector.items())
        if not any(p.namespace == namespace and wanted <= set(p.labels) for p in pods):
            error = src.error(
                ("workload", i, "spec", "selector"),
                f"{m.spec.selector} selects no pod running at the start in namespace {namespace!r}: Service "
                f"{m.metadata.name} has no endpoints, and kube-proxy rejects its traffic until one runs",
            )
            said.append(str(error))
    return tuple(said)


def without_endpoints(svc: ServiceSpec, pods: set[str]) -> ServiceSpec:
    """The Service without the endpoints of these pods."""
    ports = tuple(
        replace(port, endpoints=tuple(ep for ep in port.endpoints if ep.pod not in pods)) for port in svc.ports
    )
    return replace(svc, ports=ports)


class _SliceEndpoint(NamedTuple):
    """An endpoint of a hand-written EndpointSlice, for the Service port of that name and protocol."""

    port_name: str
    protocol: str
    spec: EndpointSpec

    def serves(self, port: k8s.ServicePortSpec) -> bool:
        return (self.port_name, self.protocol) == (port.name, port.protocol)


def _slices(
    src: Source,
    workload: list[k8s.Manifest],
    services: list[k8s.Service],
    pods: tuple[PodSpec, ...],
    externals: tuple[ExternalSpec, ...],
    families: tuple[Family, ...],
    stand_ins: tuple[NodeSpec, ...],
) -> dict[tuple[str, str], list[_SliceEndpoint]]:
    """The endpoints of each selector-less Service's EndpointSlices, by (namespace, name): every address is a pod
    or an external host of the scenario (the lab answers from its own actors only), or an address in a stand-in
    node's podCIDR (a pod of that node, answered by the stand-in namespace, named by its address)."""
    selectors = {(m.metadata.namespace, m.metadata.name): m.spec.selector for m in services}
    owners = {ip: (p.name, p.node) for p in pods if not p.host_network for ip in p.ips}
    owners |= {ip: (e.name, "") for e in externals for ip in (e.ip, e.secondary_ip) if ip}
    blocks = StandInBlocks(stand_ins)
    found: dict[tuple[str, str], list[_SliceEndpoint]] = {}
    for i, m in enumerate(workload):
        if not isinstance(m, k8s.EndpointSlice):
            continue
        path: FieldPath = ("workload", i)
        service = m.metadata.labels.get(k8s.SERVICE_NAME_LABEL)
        key = (m.metadata.namespace, service or "")
        if service is None:
            raise src.error(
                (*path, "metadata", "labels"),
                f"an EndpointSlice names its Service in the label {k8s.SERVICE_NAME_LABEL}",
            )
        if key not in selectors:
            raise src.error(
                (*path, "metadata", "labels", k8s.SERVICE_NAME_LABEL), f"no Service {key[0]}/{key[1]} in the workload"
            )
        if selectors[key]:
            raise src.error(
                (*path, "metadata", "labels", k8s.SERVICE_NAME_LABEL),
                f"Service {service} has a selector, so the EndpointSlice controller writes its slices; hand-written "
                "ones go with a Service without a selector",
            )
        if m.address_type not in families:
            raise src.error(
                (*path, "addressType"),
                f"{m.address_type} is not a family of this cluster: expected {' or '.join(map(repr, families))}",
            )
        for j, ep in enumerate(m.endpoints):
            address = ep.addresses[0]
            if problem := slice_address_problem(m.address_type, address):
                raise src.error((*path, "endpoints", j, "addresses", 0), problem)
            if address not in owners and (stand_in := blocks.node_of(address)) is not None:
                owners[address] = (address, stand_in)
            if address not in owners:
                raise src.error(
                    (*path, "endpoints", j, "addresses", 0),
                    f"{address} is no pod's or external host's address, nor in a stand-in node's podCIDR: the lab "
                    "answers only from its own actors",
                )
            name, node = owners[address]
            # Unset, ready and serving are true and terminating false, as kube-proxy reads them (kubernetes/kubernetes
            # pkg/proxy/endpointslicecache.go at 04791b4906602ffda5ccf9bc4c84d3329f1d7080, newEndpointSliceInfo):
            # an unset serving is not the endpoint's ready.
            ready = ep.conditions.ready is not False
            serving = ep.conditions.serving is not False
            for port in m.ports:
                if port.port is None:
                    raise src.error((*path, "ports"), "every port of a hand-written EndpointSlice needs a number")
                hints = ep.hints or k8s.EndpointHints()
                spec = EndpointSpec(
                    name,
                    ep.node_name or node,
                    address,
                    port.port,
                    ready,
                    serving,
                    bool(ep.conditions.terminating),
                    hints=Hints(tuple(z.name for z in hints.for_zones), tuple(n.name for n in hints.for_nodes)),
                )
                found.setdefault(key, []).append(_SliceEndpoint(port.name, port.protocol, spec))
    return found


class StandInBlocks:
    """The stand-in nodes' podCIDRs, to find which holds an address: looked up by each prefix length the blocks
    have, not compared with each block (thirty thousand endpoints by a thousand stand-ins)."""

    def __init__(self, stand_ins: Iterable[NodeSpec]) -> None:
        self.by_length: dict[int, dict[ipaddress.IPv4Network | ipaddress.IPv6Network, str]] = {}
        for node in stand_ins:
            block = ipaddress.ip_network(node.pod_cidr)
            self.by_length.setdefault(block.prefixlen, {})[block] = node.name

    def node_of(self, address: str) -> str | None:
        """The stand-in whose podCIDR holds the address, None for none (podCIDRs are disjoint: at most one)."""
        for length, blocks in self.by_length.items():
            if (name := blocks.get(ipaddress.ip_network(f"{address}/{length}", strict=False))) is not None:
                return name
        return None
