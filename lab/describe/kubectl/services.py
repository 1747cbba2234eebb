"""Services and their EndpointSlices as kube-proxy reads them: which Services it ignores, each Service's
frontends, and each endpoint with its conditions, node and hints, tied to the pod that answers at its address."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from lab.describe.families import Family, family_of
from lab.describe.kubectl import ipfields
from lab.describe.kubectl.cluster import Pod
from lab.describe.kubectl.objects import Obj
from lab.describe.yamlsrc import FieldPath

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
PROXY_NAME_LABEL = "service.kubernetes.io/service-proxy-name"
HEADLESS_LABEL = "service.kubernetes.io/headless"
TOPOLOGY_ANNOTATIONS = ("service.kubernetes.io/topology-mode", "service.kubernetes.io/topology-aware-hints")
PROTOCOLS = ("TCP", "UDP")
ROUTED = (
    "the lab's underlay gateway stands in for the load balancer: it routes the address to one node "
    "(docs/scenarios.md, Topology); add loadBalancers: to the scenario for one that health-checks and spreads"
)
PROXIED = (
    "ipMode Proxy: the scenario's load balancer (loadBalancers:, forward: nodePort, the client's address kept) "
    "stands in for the cloud's, which proxies to the NodePort"
)
PENDING = (
    "{}: not in status.loadBalancer.ingress (no load balancer gave it: the Service pending): kube-proxy programs "
    "only the addresses of the status, so it is reached on no node, and the lab leaves it out"
)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"  # kubectl apply's copy of the object
METALLB = ("metallb.io/", "metallb.universe.tf/")  # MetalLB's allocation annotations: read in announcers.py

# Service spec fields the lab reads, and those that change nothing kube-proxy writes once the EndpointSlices are
# known (the controller and the API server act on them): read, not reported.
_PASSED = [
    "externalTrafficPolicy",
    "internalTrafficPolicy",
    "healthCheckNodePort",
    "sessionAffinity",
    "sessionAffinityConfig",
    "trafficDistribution",
]  # written as they are
_MODELLED = [
    "type",
    "clusterIP",
    "clusterIPs",
    "ipFamilies",
    "ipFamilyPolicy",
    "ports",
    "externalIPs",
    "loadBalancerIP",
    "loadBalancerSourceRanges",
] + _PASSED
_NO_EFFECT = [
    "selector",
    "allocateLoadBalancerNodePorts",
    "publishNotReadyAddresses",
    "loadBalancerClass",
]
_TRAFFIC_DISTRIBUTIONS = ("PreferClose", "PreferSameZone", "PreferSameNode")


@dataclass
class Endpoint:
    pod: Pod
    address: str  # the pod's address of the slice's family
    conditions: dict[str, bool]
    node: str
    zone: str | None
    zones: list[str]  # hints.forZones
    nodes: list[str]  # hints.forNodes


@dataclass
class Slice:
    obj: Obj
    family: Family  # its addressType
    endpoints: list[Endpoint]
    ports: list[dict[str, Any]]
    had_endpoints: bool


@dataclass
class Service:
    obj: Obj
    namespace: str
    name: str
    type: str
    cluster_ips: list[str]  # of the imported cluster's families, the Service's primary first
    ports: list[dict[str, Any]]  # name, port, protocol, nodePort
    spec: dict[str, Any]  # the other fields the lab reads, as written
    external_ips: list[str]
    ingress: list[dict[str, str]]  # ip, ipMode
    source_ranges: list[str]
    annotations: dict[str, str]
    slices: list[Slice] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def cluster_ip(self) -> str:
        return self.cluster_ips[0]


def read_service(obj: Obj, notes: list[str], families: Collection[Family]) -> Service | None:
    """The Service, or None (said in `notes`) when kube-proxy ignores it or the lab cannot build any of it.
    `families`: the imported cluster's; an address of another family is said and left out."""
    kind = obj.get(("spec", "type"), str, "ClusterIP")
    labels = obj.get(("metadata", "labels"), dict, {})
    cluster_ip = obj.get(("spec", "clusterIP"), str, "")
    skip = None
    if kind == "ExternalName":
        skip = "an ExternalName Service (a DNS name): kube-proxy ignores it"
    elif cluster_ip == "None" or HEADLESS_LABEL in labels:
        skip = "a headless Service (clusterIP: None): kube-proxy ignores it"
    elif PROXY_NAME_LABEL in labels:
        skip = f"labelled {PROXY_NAME_LABEL}={labels[PROXY_NAME_LABEL]}: another proxy serves it, kube-proxy ignores it"
    elif kind not in ("ClusterIP", "NodePort", "LoadBalancer"):
        raise obj.error(("spec", "type"), f"expected ClusterIP, NodePort, LoadBalancer or ExternalName, got {kind!r}")
    if skip:
        notes.append(obj.note((), f"skipped: {skip}"))
        return None
    ips = obj.each(("spec", "clusterIPs"))
    cluster_ip = ipfields.address(obj, ("spec", "clusterIP"), cluster_ip, notes) if cluster_ip or not ips else ""
    kept = _of_families(obj, ips or [(("spec", "clusterIP"), cluster_ip)], families, notes, ipfields.address)
    if not kept:
        notes.append(
            obj.note(("spec", "clusterIP"), f"skipped: no cluster IP of the imported families ({_and(families)})")
        )
        return None
    ports = []
    for path, _ in obj.each(("spec", "ports")):
        protocol = obj.get((*path, "protocol"), str, "TCP")
        number = obj.get((*path, "port"), int)
        if number is None:
            raise obj.error((*path, "port"), "missing: expected a port number")
        if protocol not in PROTOCOLS:
            notes.append(obj.note((*path, "protocol"), f"{protocol}: not modelled (TCP and UDP only); port left out"))
            continue
        port = {"name": obj.get((*path, "name"), str, ""), "port": number, "protocol": protocol}
        if (node_port := obj.get((*path, "nodePort"), int)) is not None:
            port["nodePort"] = node_port
        ports.append(port)
    if not ports:
        notes.append(obj.note(("spec", "ports"), "skipped: no TCP or UDP port"))
        return None
    spec = {k: v for k, v in obj.get(("spec",), dict, {}).items() if k in _PASSED and v is not None}
    family_fields = _family_fields(obj, kept, notes)
    if tuple(families) != ("IPv4",):  # an IPv4 cluster's Services need none (and were always written without)
        spec |= family_fields
    if spec.get("trafficDistribution") not in (None, *_TRAFFIC_DISTRIBUTIONS):
        notes.append(obj.note(("spec", "trafficDistribution"), f"{spec.pop('trafficDistribution')!r}: not modelled"))
    for key in obj.get(("spec",), dict, {}):
        if key not in (*_MODELLED, *_NO_EFFECT):
            notes.append(obj.note(("spec", key), "a field lab import does not model: not reproduced"))
    ingress = []
    for path, _item in obj.each(("status", "loadBalancer", "ingress")):
        ip = obj.get((*path, "ip"), str)
        if ip is not None:
            ip = ipfields.address(obj, (*path, "ip"), ip, notes)
        if ip is None or family_of(ip) not in families:
            said = ip or obj.get((*path, "hostname"), str, "")
            notes.append(
                obj.note(path, f"{said}: only {_and(families)} load balancer addresses are modelled; left out")
            )
            continue
        ingress.append({"ip": ip, "ipMode": obj.get((*path, "ipMode"), str, "VIP")})
    for key in obj.get(("metadata", "annotations"), dict, {}):
        if key not in (*TOPOLOGY_ANNOTATIONS, LAST_APPLIED) and _networking(key) and not key.startswith(METALLB):
            notes.append(
                obj.note(
                    ("metadata", "annotations", key),
                    "not modelled (a cloud load balancer's or a "
                    "controller's setting: the lab's own load balancer stands in)",
                )
            )
    if any(i["ipMode"] == "Proxy" for i in ingress):
        notes.append(obj.note(("status", "loadBalancer"), PROXIED))
    elif ingress and kind != "LoadBalancer":  # a LoadBalancer's: said where its announcer is read (announcers.py)
        notes.append(obj.note(("status", "loadBalancer"), ROUTED))
    lb_ip = obj.get(("spec", "loadBalancerIP"), str)
    if lb_ip:
        lb_ip = ipfields.address(obj, ("spec", "loadBalancerIP"), lb_ip, notes)
    if lb_ip and not ingress and kind == "LoadBalancer":
        # kube-proxy programs status.loadBalancer.ingress alone (kubernetes/kubernetes pkg/proxy/service.go at
        # 025f2834a128798cef30018a5e6a6ae82b5ad885, newBaseServiceInfo), and MetalLB's speaker announces it alone:
        # an address asked for and not given is reached on no node.
        notes.append(obj.note(("spec", "loadBalancerIP"), PENDING.format(lb_ip)))
    return Service(
        obj,
        obj.namespace or "default",
        obj.name,
        kind,
        kept,
        ports,
        spec,
        _of_families(obj, obj.each(("spec", "externalIPs")), families, notes, ipfields.address),
        ingress,
        _of_families(obj, obj.each(("spec", "loadBalancerSourceRanges")), families, notes, ipfields.source_range),
        {k: v for k, v in obj.get(("metadata", "annotations"), dict, {}).items() if k in TOPOLOGY_ANNOTATIONS},
    )


def read_slice(
    obj: Obj, pods_by_ip: dict[str, Pod], nodes: Collection[str], notes: list[str], families: Collection[Family]
) -> Slice | None:
    """The slice with the endpoints the lab can answer from (a pod of the dump at the endpoint's address), when its
    addressType is a family of the imported cluster (`families`)."""
    family = obj.get(("addressType",), str)
    if family not in families:
        kind = "an FQDN slice (kube-proxy ignores those)" if family == "FQDN" else "not a family of the import"
        notes.append(obj.note(("addressType",), f"{family}: skipped, {kind} ({_and(families)})"))
        return None
    ports = []
    for path, _ in obj.each(("ports",)):
        protocol = obj.get((*path, "protocol"), str, "TCP")
        number = obj.get((*path, "port"), int)
        if protocol not in PROTOCOLS or number is None:
            notes.append(obj.note(path, f"{protocol} port {number}: not modelled (TCP and UDP with a number only)"))
            continue
        ports.append({"name": obj.get((*path, "name"), str, ""), "port": number, "protocol": protocol})
    endpoints = []
    listed = obj.each(("endpoints",))
    for path, _ in listed:
        address = obj.get((*path, "addresses", 0), str)
        if address is None:
            raise obj.error((*path, "addresses"), "missing: an endpoint has one address")
        address = ipfields.address(obj, (*path, "addresses", 0), address, notes)
        pod = pods_by_ip.get(address)
        if pod is None:
            notes.append(
                obj.note(
                    (*path, "addresses", 0),
                    f"{address}: left out, no pod of the input has it (a "
                    "hostNetwork pod, a node or a host outside the cluster): the lab answers from pods "
                    "it builds",
                )
            )
            continue
        conditions = {k: obj.get((*path, "conditions", k), bool) for k in ("ready", "serving", "terminating")}
        node = obj.get((*path, "nodeName"), str, pod.node)
        if node not in nodes:
            notes.append(obj.note((*path, "nodeName"), f"{node}: no node of the input; its pod's {pod.node} is taken"))
            node = pod.node
        hinted = [(p, obj.get((*p, "name"), str, "")) for p, _ in obj.each((*path, "hints", "forNodes"))]
        for hint_path, name in hinted:
            if name not in nodes:
                notes.append(obj.note((*hint_path, "name"), f"{name!r}: no node of the input; the hint is left out"))
        endpoints.append(
            Endpoint(
                pod,
                address,
                {k: v for k, v in conditions.items() if v is not None},
                node,
                obj.get((*path, "zone"), str),
                [obj.get((*p, "name"), str, "") for p, _ in obj.each((*path, "hints", "forZones"))],
                [name for _, name in hinted if name in nodes],
            )
        )
    return Slice(obj, family, endpoints, ports, bool(listed))


def _networking(annotation: str) -> bool:
    """Whether an annotation's prefix is Kubernetes' or a load balancer's (cloud providers', MetalLB's): the ones
    that may change what reaches a Service; others (prometheus.io/scrape, an app's own) are not said."""
    prefix = annotation.rpartition("/")[0]
    return prefix.endswith("kubernetes.io") or any(
        w in prefix for w in ("load-balancer", "loadbalancer", "metallb", "cloud")
    )


def _of_families(
    obj: Obj,
    values: list[tuple[FieldPath, Any]],
    families: Collection[Family],
    notes: list[str],
    read: Callable[[Obj, FieldPath, Any, list[str]], str],
) -> list[str]:
    """The addresses (or source ranges: kube-proxy runs a proxier per family of the cluster, each keeping its own
    family's) of the imported cluster's families, in order, each `read` at its field; others said and left out."""
    kept = []
    for path, value in values:
        text = read(obj, path, value, notes)
        if family_of(text) in families:
            kept.append(text)
        else:
            notes.append(obj.note(path, f"{text}: not of the imported cluster's families ({_and(families)}); left out"))
    return kept


def _family_fields(obj: Obj, kept: list[str], notes: list[str]) -> dict[str, Any]:
    """clusterIPs, ipFamilies and ipFamilyPolicy as the API server left them, for the cluster IPs kept: a
    RequireDualStack Service that keeps one family (its cluster imported single-stack) is written SingleStack."""
    families = [family_of(ip) for ip in kept]
    policy = obj.get(("spec", "ipFamilyPolicy"), str, "SingleStack")
    if policy == "RequireDualStack" and len(kept) < 2:
        said = "RequireDualStack in a single-stack import: written SingleStack"
        notes.append(obj.note(("spec", "ipFamilyPolicy"), said))
        policy = "SingleStack"
    return {"clusterIPs": kept, "ipFamilies": families, "ipFamilyPolicy": policy}


def _and(families: Collection[Family]) -> str:
    return " and ".join(families)
