"""The subset of Kubernetes manifests the lab understands.

Real manifests carry many more fields (images, resources, probes); those are ignored,
while the fields that decide networking are checked.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from lab.model.ipv4 import Address, SourceRange


class Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class Metadata(Loose):
    name: str = Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$")
    namespace: str = "default"
    labels: dict[str, str] = {}


class ContainerPort(Loose):
    name: str | None = None
    container_port: int = Field(alias="containerPort", ge=1, le=65535)
    protocol: Literal["TCP", "UDP"] = "TCP"


class Container(Loose):
    name: str = "main"
    ports: list[ContainerPort] = []


class PodSpec(Loose):
    node_name: str | None = Field(None, alias="nodeName")
    node_selector: dict[str, str] = Field({}, alias="nodeSelector")
    host_network: bool = Field(False, alias="hostNetwork")
    containers: list[Container] = []


class PodStatus(Loose):
    pod_ip: str | None = Field(None, alias="podIP")
    ready: bool = True


class Pod(Loose):
    kind: Literal["Pod"]
    metadata: Metadata
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


class TemplateMetadata(Loose):
    labels: dict[str, str] = {}


class PodTemplate(Loose):
    metadata: TemplateMetadata = TemplateMetadata()
    spec: PodSpec = PodSpec()


class Selector(Loose):
    match_labels: dict[str, str] = Field({}, alias="matchLabels")


class WorkloadSpec(Loose):
    replicas: int = Field(1, ge=0, le=64)
    selector: Selector = Selector()
    template: PodTemplate


class Deployment(Loose):
    kind: Literal["Deployment", "ReplicaSet"]
    metadata: Metadata
    spec: WorkloadSpec


class ServicePortSpec(Loose):
    name: str = ""
    port: int = Field(ge=1, le=65535)
    target_port: int | str | None = Field(None, alias="targetPort")
    node_port: int | None = Field(None, alias="nodePort", ge=1, le=65535)
    protocol: Literal["TCP", "UDP"] = "TCP"


class ClientIPConfig(Loose):
    timeout_seconds: int = Field(10800, alias="timeoutSeconds")


class AffinityConfig(Loose):
    client_ip: ClientIPConfig = Field(ClientIPConfig(), alias="clientIP")


class ServiceSpec(Loose):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    selector: dict[str, str] = {}
    cluster_ip: Address | None = Field(None, alias="clusterIP")
    ports: list[ServicePortSpec] = Field(min_length=1)
    external_ips: list[Address] = Field([], alias="externalIPs")
    load_balancer_ip: Address | None = Field(None, alias="loadBalancerIP")
    load_balancer_source_ranges: list[SourceRange] = Field([], alias="loadBalancerSourceRanges")
    external_traffic_policy: Literal["Cluster", "Local"] = Field("Cluster", alias="externalTrafficPolicy")
    internal_traffic_policy: Literal["Cluster", "Local"] = Field("Cluster", alias="internalTrafficPolicy")
    health_check_node_port: int | None = Field(None, alias="healthCheckNodePort")
    session_affinity: Literal["None", "ClientIP"] = Field("None", alias="sessionAffinity")
    session_affinity_config: AffinityConfig = Field(AffinityConfig(), alias="sessionAffinityConfig")


class IngressIP(Loose):
    ip: Address
    ip_mode: Literal["VIP", "Proxy"] = Field("VIP", alias="ipMode")


class LoadBalancerStatus(Loose):
    ingress: list[IngressIP] = []


class ServiceStatus(Loose):
    load_balancer: LoadBalancerStatus = Field(LoadBalancerStatus(), alias="loadBalancer")


class Service(Loose):
    kind: Literal["Service"]
    metadata: Metadata
    spec: ServiceSpec
    status: ServiceStatus = ServiceStatus()


Manifest = Annotated[Pod | Deployment | Service, Field(discriminator="kind")]
