"""A ServicePort as one family's kube-proxy proxier sees it (BaseServicePortInfo and the endpoints map), shared
by the iptables, ipvs and nftables renderers; each adds what only its proxier reads."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Self, TypeVar

from lab.render.kubeproxy.addresses import Family, Network, family_endpoints, family_strings, parse_cidr, parse_ip
from lab.render.kubeproxy.service import Endpoint, ServicePort
from lab.render.kubeproxy.versions import Release

T = TypeVar("T")


def unique(items: Iterable[T]) -> list[T]:
    """In first-seen order, without repeats."""
    return list(dict.fromkeys(items))


@dataclass(frozen=True)
class ServiceView:
    port: ServicePort
    cluster_ip: str
    external_ips: tuple[str, ...]
    lb_ips: tuple[str, ...]
    source_ranges: tuple[tuple[str, Network], ...]  # (as written, trimmed; parsed): iptables prints either
    endpoints: tuple[Endpoint, ...]  # one per "IP:port", sorted by that string, as the endpoints map is

    @classmethod
    def build(cls, port: ServicePort, release: Release, family: Family = "IPv4") -> Self | None:
        """None for a Service the family's proxier skips (no cluster IP of its family: the ServicePort carries the
        Service's clusterIP of the proxier's family, as kube-proxy's service change tracker takes it)."""
        cluster_ip = parse_ip(port.cluster_ip, family) if port.cluster_ip else None
        if cluster_ip is None:
            return None
        ranges = [(text.strip(), parse_cidr(text, family)) for text in port.load_balancer_source_ranges]
        return cls(
            port=port,
            cluster_ip=str(cluster_ip),
            external_ips=family_strings(port.external_ips, family),
            lb_ips=family_strings(port.load_balancer_ips, family),
            source_ranges=tuple((text, cidr) for text, cidr in ranges if cidr is not None),
            endpoints=family_endpoints(port, release, family),
        )

    @property
    def source_cidrs(self) -> tuple[Network, ...]:
        return tuple(cidr for _, cidr in self.source_ranges)

    @property
    def name(self) -> str:
        return self.port.port_name_string

    @property
    def proto(self) -> str:
        return self.port.proto

    @property
    def externally_accessible(self) -> bool:
        return bool(self.port.node_port or self.lb_ips or self.external_ips)

    @property
    def internal_local(self) -> bool:
        return self.port.internal_policy == "Local"

    @property
    def external_local(self) -> bool:
        return self.port.external_policy == "Local"

    @property
    def health_check_node_port(self) -> int:
        # kube-proxy keeps it only for Services that need it (NeedsHealthCheck: LoadBalancer with eTP=Local).
        return self.port.health_check_node_port if self.external_local else 0
