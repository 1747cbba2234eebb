"""What kube-proxy knows about one Service port: the renderers' only input.

These mirror kube-proxy's ServicePort / Endpoint view after EndpointSlice processing,
so renderers stay independent of how scenarios are written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Policy = Literal["Cluster", "Local"]
Protocol = Literal["TCP", "UDP", "SCTP"]


@dataclass(frozen=True)
class Endpoint:
    ip: str
    port: int
    is_local: bool
    ready: bool = True
    serving: bool = True
    terminating: bool = False
    zone_hints: frozenset[str] = frozenset()  # the EndpointSlice's hints.forZones
    node_hints: frozenset[str] = frozenset()  # hints.forNodes

    @property
    def address(self) -> str:
        return f"[{self.ip}]:{self.port}" if ":" in self.ip else f"{self.ip}:{self.port}"


@dataclass(frozen=True)
class NodeTopology:
    """Where this kube-proxy runs, as topology-aware routing asks: its node's name and
    topology.kubernetes.io/zone label ("" when the node has none)."""

    name: str = ""
    zone: str = ""


@dataclass(frozen=True)
class ServicePort:
    namespace: str
    name: str
    port_name: str  # "" when the Service port is unnamed
    protocol: Protocol
    port: int
    cluster_ip: str | None  # None for headless / no ClusterIP
    node_port: int = 0
    external_ips: tuple[str, ...] = ()
    load_balancer_ips: tuple[str, ...] = ()
    load_balancer_source_ranges: tuple[str, ...] = ()
    external_policy: Policy = "Cluster"
    internal_policy: Policy = "Cluster"
    health_check_node_port: int = 0
    affinity_timeout: int = 0  # seconds of ClientIP affinity; 0 = none
    endpoints: tuple[Endpoint, ...] = field(default=())
    hints_annotation: str = ""  # the topology annotation's value as this release reads it (svcInfo.HintsAnnotation)
    node: NodeTopology = NodeTopology()  # the node this kube-proxy runs on

    @property
    def port_name_string(self) -> str:
        """kube-proxy's ServicePortName.String(): "ns/name:port", or "ns/name" when unnamed (1.19+)."""
        base = f"{self.namespace}/{self.name}"
        return f"{base}:{self.port_name}" if self.port_name else base

    @property
    def proto(self) -> str:
        return self.protocol.lower()


@dataclass(frozen=True)
class ProxyConfig:
    """kube-proxy flags that change the rules it writes."""

    cluster_cidr: str | None = None  # local-traffic detector (ClusterCIDR mode); None = no-op detector
    masquerade_all: bool = False
    # empty = every local address (iptables, ipvs); in nftables mode empty means the node's primary IP
    # (kube-proxy's "primary" default for that mode), and ("0.0.0.0/0",) means every local address.
    node_port_addresses: tuple[str, ...] = ()
    localhost_nodeports: bool = True  # iptables.localhostNodePorts (--iptables-localhost-nodeports)
    # nftables mode: the KubeProxyNFTablesLocalhostNodePorts feature gate (Release.nft_localhost_nodeports_gate), None
    # for the release's default (Release.nft_localhost_nodeports_by_default).
    nft_localhost_nodeports: bool | None = None
    random_fully: bool = True
    masquerade_bit: int = 14
    # The mark text exactly as written; None = what NewProxier formats from masquerade_bit
    # (Go "%#08x": "0x00004000"). kube-proxy's unit-test fake proxier sets "0x4000" directly.
    masquerade_mark: str | None = None
    conntrack_tcp_be_liberal: bool = False
    # kube-proxy counts dropped INVALID packets (#122812, 1.30) and localhost NodePort packets
    # (#125015, 1.31) with nfacct objects when it could create them, adding "-m nfacct" matches.
    nfacct_counters: bool = False
    # ipvs mode: --ipvs-strict-arp (arp_ignore=1, arp_announce=2 on all interfaces).
    ipvs_strict_arp: bool = False
    # ipvs mode: --ipvs-scheduler, every virtual server's scheduler (kube-proxy's default is rr).
    ipvs_scheduler: str = "rr"
    # nftables mode: the ServiceCIDRs kube-proxy learns from ServiceCIDR objects (MultiCIDRServiceAllocator,
    # on by default from 1.33); traffic to unallocated IPs in them is dropped. Empty = no such rule.
    service_cidrs: tuple[str, ...] = ()
    # The proxier's family: kube-proxy runs one per family (iptables and ip6tables, the `ip` and `ip6` nftables
    # tables, ipvs with inet and inet6 sets), each given only that family's addresses and cluster_cidr.
    family: Literal["IPv4", "IPv6"] = "IPv4"
