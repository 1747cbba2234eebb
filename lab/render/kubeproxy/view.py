"""A ServicePort as kube-proxy's IPv4 proxiers see it (BaseServicePortInfo and the endpoints map), shared
by the iptables, ipvs and nftables renderers; each adds what only its proxier reads."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Self, TypeVar

from lab.render.kubeproxy.addresses import ipv4_endpoints, ipv4_strings, parse_ipv4, parse_ipv4_cidr
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
    source_ranges: tuple[tuple[str, IPv4Network], ...]  # (as written, trimmed; parsed): iptables prints either
    endpoints: tuple[Endpoint, ...]  # one per "IP:port", sorted by that string, as the endpoints map is

    @classmethod
    def build(cls, port: ServicePort, release: Release) -> Self | None:
        """None for a Service the IPv4 proxier skips (no IPv4 cluster IP)."""
        cluster_ip = parse_ipv4(port.cluster_ip) if port.cluster_ip else None
        if cluster_ip is None:
            return None
        ranges = [(text.strip(), parse_ipv4_cidr(text)) for text in port.load_balancer_source_ranges]
        return cls(
            port=port,
            cluster_ip=str(cluster_ip),
            external_ips=ipv4_strings(port.external_ips),
            lb_ips=ipv4_strings(port.load_balancer_ips),
            source_ranges=tuple((text, cidr) for text, cidr in ranges if cidr is not None),
            endpoints=ipv4_endpoints(port, release),
        )

    @property
    def source_cidrs(self) -> tuple[IPv4Network, ...]:
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
