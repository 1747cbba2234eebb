"""The subset of Kubernetes manifests the lab understands.

Real manifests carry many more fields (images, resources, probes): every field Kubernetes' API has is accepted
and ignored unless it decides networking, then checked here; a field the API does not have is refused first
(`api_problem`), as `kubectl apply --validate=strict` would.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lab.describe.errors import did_you_mean
from lab.describe.families import Address, ExternalAddress, HostAddress, SourceRange
from lab.describe.k8s_fields import FIELDS
from lab.describe.names import (
    TARGET_PORT,
    Annotations,
    ContainerName,
    EndpointPortName,
    Labels,
    Namespace,
    ObjectName,
    PortName,
    ServiceName,
    ServicePortName,
)
from lab.describe.yamlsrc import FieldPath

Port = Annotated[int, Field(ge=1, le=65535)]
Problem = tuple[FieldPath, str]  # where, and what is wrong
KINDS = ("Pod", "Deployment", "ReplicaSet", "Service", "EndpointSlice")
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # what ties an EndpointSlice to its Service
# Beyond release-1.37's API: the lab's own `status.ready` (whether the pod's endpoints are ready; a real pod says
# it in status.conditions), and Service fields that alpha releases wrote until 1.20 (ipFamily) and 1.21
# (topologyKeys), which `kubectl get -o yaml` of such a cluster still shows.
EXTRA_FIELDS = {"PodStatus": "ready", "ServiceSpec": "ipFamily topologyKeys:[]"}


@functools.cache
def _fields(kind: str) -> dict[str, str]:
    """A Kubernetes type's fields, each with its shape (see k8s_fields)."""
    specs = f"{FIELDS[kind]} {EXTRA_FIELDS.get(kind, '')}".split()
    return {name: shape for name, _, shape in (spec.partition(":") for spec in specs)}


def api_problem(manifest: dict[str, Any]) -> Problem | None:
    """The first field of a manifest that Kubernetes' API refuses (a name or a shape it does not have), if any;
    a kind the lab does not read is left to the schema."""
    kind = manifest.get("kind")
    return _shape_problem(manifest, kind, ()) if kind in KINDS else None


def _shape_problem(value: Any, shape: str, path: FieldPath) -> Problem | None:
    if value is None or shape == "*":  # null is "not set" to the API server, whatever the field
        return None
    if shape.startswith("["):
        if not isinstance(value, list):
            return path, "expected a list"
        return _first(_shape_problem(v, shape[1:-1], (*path, k)) for k, v in enumerate(value))
    if shape == "{}":
        if not isinstance(value, dict):
            return path, "expected a mapping"
        return _first(_shape_problem(v, "", (*path, key)) for key, v in value.items())
    if not shape:
        return (path, "expected a single value, not a list or a mapping") if isinstance(value, list | dict) else None
    if not isinstance(value, dict):
        return path, f"expected a mapping (a Kubernetes {shape})"
    return _object_problem(value, shape, path)


def _first(problems: Iterable[Problem | None]) -> Problem | None:
    return next((p for p in problems if p), None)


def _object_problem(value: dict[str, Any], kind: str, path: FieldPath) -> Problem | None:
    fields = _fields(kind)
    for key, item in value.items():
        if key not in fields:
            return (*path, key), f"unknown field: a Kubernetes {kind} has no {key!r}" + did_you_mean(key, fields)
        if problem := _shape_problem(item, fields[key], (*path, key)):
            return problem
    return None


class Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True, strict=True)


class Metadata(Loose):
    name: ObjectName
    namespace: Namespace = "default"
    labels: Labels = {}
    annotations: Annotations = {}


class ServiceMetadata(Metadata):
    name: ServiceName


class ContainerPort(Loose):
    name: PortName | None = None
    container_port: int = Field(alias="containerPort", ge=1, le=65535)
    protocol: Literal["TCP", "UDP"] = "TCP"


class Container(Loose):
    name: ContainerName = "main"
    ports: list[ContainerPort] = []


class PodSpec(Loose):
    node_name: str | None = Field(None, alias="nodeName")
    node_selector: Labels = Field({}, alias="nodeSelector")
    host_network: bool = Field(False, alias="hostNetwork")
    containers: list[Container] = []


class PodIP(Loose):
    ip: Address


class PodStatus(Loose):
    pod_ip: Address | None = Field(None, alias="podIP")
    # Dual-stack: the pod's address of each family, the primary first (podIPs[0] is podIP), as the kubelet reports.
    pod_ips: list[PodIP] = Field([], alias="podIPs")
    ready: bool = True


class Pod(Loose):
    kind: Literal["Pod"]
    metadata: Metadata
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


class TemplateMetadata(Loose):
    labels: Labels = {}


class PodTemplate(Loose):
    metadata: TemplateMetadata = TemplateMetadata()
    spec: PodSpec = PodSpec()


class Selector(Loose):
    match_labels: Labels = Field({}, alias="matchLabels")


class WorkloadSpec(Loose):
    replicas: int = Field(1, ge=0)  # as many as the nodes' podCIDRs hold (resolve checks, before placing any)
    selector: Selector = Selector()
    template: PodTemplate


class Deployment(Loose):
    kind: Literal["Deployment", "ReplicaSet"]
    metadata: Metadata
    spec: WorkloadSpec


class ServicePortSpec(Loose):
    name: ServicePortName = ""
    port: int = Field(ge=1, le=65535)
    target_port: Port | str | None = Field(None, alias="targetPort")
    node_port: int | None = Field(None, alias="nodePort", ge=1, le=65535)
    protocol: Literal["TCP", "UDP"] = "TCP"

    @field_validator("target_port")
    @classmethod
    def _named(cls, value: int | str | None) -> int | str | None:
        return TARGET_PORT(value) if isinstance(value, str) else value


class ClientIPConfig(Loose):
    timeout_seconds: int = Field(10800, alias="timeoutSeconds", ge=1, le=86400)  # the API's bounds


class AffinityConfig(Loose):
    client_ip: ClientIPConfig = Field(ClientIPConfig(), alias="clientIP")


class ServiceSpec(Loose):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    selector: Labels = {}
    cluster_ip: Address | None = Field(None, alias="clusterIP")
    # Checked against the cluster's families as the API server checks them (lab/describe/families.py); each
    # address in clusterIPs is parsed as every address is (lab/describe/ip.py).
    cluster_ips: list[Address] = Field([], alias="clusterIPs")
    ip_families: list[str] = Field([], alias="ipFamilies")
    ip_family_policy: Literal["SingleStack", "PreferDualStack", "RequireDualStack"] | None = Field(
        None, alias="ipFamilyPolicy"
    )
    ports: list[ServicePortSpec] = Field(min_length=1)
    external_ips: list[ExternalAddress] = Field([], alias="externalIPs")
    load_balancer_ip: Address | None = Field(None, alias="loadBalancerIP")
    load_balancer_source_ranges: list[SourceRange] = Field([], alias="loadBalancerSourceRanges")
    external_traffic_policy: Literal["Cluster", "Local"] = Field("Cluster", alias="externalTrafficPolicy")
    internal_traffic_policy: Literal["Cluster", "Local"] = Field("Cluster", alias="internalTrafficPolicy")
    health_check_node_port: int | None = Field(None, alias="healthCheckNodePort")
    session_affinity: Literal["None", "ClientIP"] = Field("None", alias="sessionAffinity")
    session_affinity_config: AffinityConfig = Field(AffinityConfig(), alias="sessionAffinityConfig")
    # The EndpointSlice controller hints each ready endpoint for its own zone (and node, PreferSameNode).
    traffic_distribution: Literal["PreferClose", "PreferSameZone", "PreferSameNode"] | None = Field(
        None, alias="trafficDistribution"
    )


class IngressIP(Loose):
    ip: HostAddress  # the API server takes any address here; a load balancer the lab builds needs a host's
    ip_mode: Literal["VIP", "Proxy"] = Field("VIP", alias="ipMode")


class LoadBalancerStatus(Loose):
    ingress: list[IngressIP] = []


class ServiceStatus(Loose):
    load_balancer: LoadBalancerStatus = Field(LoadBalancerStatus(), alias="loadBalancer")


class Service(Loose):
    kind: Literal["Service"]
    metadata: ServiceMetadata
    spec: ServiceSpec
    status: ServiceStatus = ServiceStatus()


class EndpointConditions(Loose):
    """An endpoint's conditions; unset ready and serving mean true, unset terminating false (the API's "a nil value
    should be interpreted as"), each on its own."""

    ready: bool | None = None
    serving: bool | None = None
    terminating: bool | None = None


class HintName(Loose):
    name: str = Field(min_length=1)


class EndpointHints(Loose):
    for_zones: list[HintName] = Field([], alias="forZones")
    for_nodes: list[HintName] = Field([], alias="forNodes")


class SliceEndpoint(Loose):
    addresses: list[ExternalAddress] = Field(min_length=1, max_length=1)  # the API allows one address per endpoint
    conditions: EndpointConditions = EndpointConditions()
    node_name: str | None = Field(None, alias="nodeName")
    zone: str | None = None
    hints: EndpointHints | None = None


class EndpointPort(Loose):
    name: EndpointPortName = ""
    port: Port | None = None
    protocol: Literal["TCP", "UDP"] = "TCP"


class EndpointSlice(Loose):
    """A hand-written EndpointSlice (discovery.k8s.io/v1), for a Service without a selector."""

    kind: Literal["EndpointSlice"]
    metadata: Metadata
    address_type: Literal["IPv4", "IPv6"] = Field(alias="addressType")  # each address checked against it
    endpoints: list[SliceEndpoint] = []
    ports: list[EndpointPort] = []


Manifest = Annotated[Pod | Deployment | Service | EndpointSlice, Field(discriminator="kind")]
