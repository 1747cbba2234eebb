"""The resolved model of one scenario variant: every name bound to an address.

Everything the later stages need is here and already checked; no stage after
`describe` reads the scenario file again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lab.model.schema import Outcome

Axis = str | bool


def axis_text(value: Axis) -> str:
    """A matrix value as the scenario file spells it (YAML booleans are lower case)."""
    return str(value).lower() if isinstance(value, bool) else value


@dataclass(frozen=True)
class NodeSpec:
    name: str
    ip: str
    pod_cidr: str
    bridge_ip: str  # cni0's address: the pods' gateway
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PortSpec:
    port: int
    protocol: Literal["TCP", "UDP"]
    name: str | None = None


@dataclass(frozen=True)
class PodSpec:
    name: str
    namespace: str
    node: str
    ip: str
    labels: tuple[tuple[str, str], ...]
    ports: tuple[PortSpec, ...]
    host_network: bool = False
    ready: bool = True


@dataclass(frozen=True)
class ExternalSpec:
    name: str
    ip: str


@dataclass(frozen=True)
class EndpointSpec:
    pod: str
    node: str
    ip: str
    port: int
    ready: bool


@dataclass(frozen=True)
class ServicePortSpec:
    name: str
    port: int
    protocol: Literal["TCP", "UDP"]
    node_port: int
    endpoints: tuple[EndpointSpec, ...]


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    namespace: str
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"]
    cluster_ip: str
    ports: tuple[ServicePortSpec, ...]
    external_ips: tuple[str, ...] = ()
    load_balancer_ips: tuple[str, ...] = ()
    load_balancer_source_ranges: tuple[str, ...] = ()
    external_policy: Literal["Cluster", "Local"] = "Cluster"
    internal_policy: Literal["Cluster", "Local"] = "Cluster"
    health_check_node_port: int = 0
    affinity_timeout: int = 0

    def port(self, ref: int | str) -> ServicePortSpec | None:
        return next((p for p in self.ports if ref in (p.port, p.name)), None)


@dataclass(frozen=True)
class Expected:
    outcome: Outcome
    backends: tuple[str, ...] = ()  # any of these pods may answer
    node: str | None = None
    source: str | None = None  # the name the user wrote ("node2", "node1/cni0", "client", or an IP)
    source_ip: str | None = None


@dataclass(frozen=True)
class ProbeSpec:
    name: str
    source: str  # an actor: pod, node or external host
    target: str  # human description, e.g. "svc web:80 via nodePort on node2"
    dst_ip: str
    dst_port: int
    protocol: Literal["TCP", "UDP"]
    expected: Expected
    why: str = ""


@dataclass(frozen=True)
class ClusterSpec:
    proxy_mode: str
    kube_version: str
    iptables_backend: Literal["nft", "legacy"]
    cluster_cidr: str
    kube_proxy_cluster_cidr: bool
    service_cidr: str
    hairpin_mode: str
    underlay: str
    gateway_ip: str
    br_netfilter: bool


@dataclass(frozen=True)
class Topology:
    scenario: str
    file: str
    variant: tuple[tuple[str, Axis], ...]
    cluster: ClusterSpec
    nodes: tuple[NodeSpec, ...]
    pods: tuple[PodSpec, ...]
    externals: tuple[ExternalSpec, ...]
    services: tuple[ServiceSpec, ...]
    probes: tuple[ProbeSpec, ...]
    description: str = ""
    lb_routes: tuple[tuple[str, str], ...] = field(default=())  # (VIP, node IP) the gateway forwards to

    def node(self, name: str) -> NodeSpec:
        return next(n for n in self.nodes if n.name == name)

    def pods_on(self, node: str) -> tuple[PodSpec, ...]:
        return tuple(p for p in self.pods if p.node == node)

    def address_names(self) -> dict[str, str]:
        """Address → the name a user would call it by, to report what a backend saw."""
        names: dict[str, str] = {self.cluster.gateway_ip: "gateway"}
        for node in self.nodes:
            names[node.ip] = node.name
            names[node.bridge_ip] = f"{node.name}/cni0"
        for ext in self.externals:
            names[ext.ip] = ext.name
        for pod in self.pods:
            if not pod.host_network:
                names[pod.ip] = pod.name
        return names

    @property
    def variant_label(self) -> str:
        return ", ".join(f"{k}={axis_text(v)}" for k, v in self.variant) or "default"
