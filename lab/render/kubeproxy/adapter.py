"""What kube-proxy on one node knows of the topology: its Service ports and flags, and the EndpointSlices as
that release's EndpointSlice controller writes them (their topology hints)."""

from __future__ import annotations

from lab.describe.families import Family
from lab.describe.topology import (
    TOPOLOGY_AWARE_HINTS,
    TOPOLOGY_MODE,
    ZONE_LABEL,
    EndpointSpec,
    Hints,
    ServiceSpec,
    Topology,
)
from lab.render.kubeproxy.service import Endpoint, NodeTopology, ProxyConfig, ServicePort
from lab.render.kubeproxy.versions import Release


def controller_hints(svc: ServiceSpec, ep: EndpointSpec, release: Release) -> Hints:
    """An endpoint's hints: as a hand-written slice gives them, else as the EndpointSlice controller's trafficdist
    reconciler writes them for spec.trafficDistribution: each ready endpoint hinted for its own zone (when it has
    one), and for its own node with PreferSameNode."""
    if ep.hints is not None:
        return ep.hints
    if not ep.ready or svc.traffic_distribution not in release.traffic_distribution:
        return Hints()
    node = (ep.node,) if svc.traffic_distribution == "PreferSameNode" and ep.node else ()
    return Hints((ep.zone,) if ep.zone else (), node)


_NO_HINTS: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())


def _hint_sets(
    svc: ServiceSpec, ep: EndpointSpec, release: Release, distributed: bool
) -> tuple[frozenset[str], frozenset[str]]:
    """An endpoint's hints as kube-proxy's sets (zones, nodes); `distributed`: the controller hints the Service's
    endpoints (controller_hints' own answer when the endpoint has no hand-written hints and it does not)."""
    if ep.hints is None and not distributed:
        return _NO_HINTS
    hints = controller_hints(svc, ep, release)
    return frozenset(hints.zones), frozenset(hints.nodes)


def hints_annotation(svc: ServiceSpec, release: Release) -> str:
    """The annotation value kube-proxy's service info keeps: topology-aware-hints, and from 1.27 topology-mode when
    the deprecated one is absent."""
    written = dict(svc.topology_annotations)
    if TOPOLOGY_AWARE_HINTS in written or not release.topology_mode_annotation:
        return written.get(TOPOLOGY_AWARE_HINTS, "")
    return written.get(TOPOLOGY_MODE, "")


def service_ports(topo: Topology, node: str, family: Family | None = None) -> list[ServicePort]:
    """The Service ports as the proxier of `family` (the cluster's primary one by default) gets them: each with
    the Service's clusterIP of that family (None: the proxier skips it); every family's other addresses, which the
    proxier filters as kube-proxy's do."""
    release = Release.of(topo.cluster.kube_version)
    family = family or topo.cluster.families[0]
    here = NodeTopology(node, dict(topo.node(node).labels).get(ZONE_LABEL, ""))
    # With AllowServiceExternalIPs off kube-proxy sees no externalIPs at all: no rules, no conntrack frontend.
    external = not release.external_ips_gated or topo.cluster.gate("AllowServiceExternalIPs")
    ports = []
    for svc in topo.services:
        # kube-proxy leaves an ipMode: Proxy address to the proxy that answers it, from the release that honours
        # the field.
        programmed = tuple(
            ip for ip in svc.ingress_ips if not (release.honours_ip_mode and ip in svc.proxy_ingress_ips)
        )
        # Whether the controller hints this Service's endpoints at all, asked once per Service: per endpoint it
        # was most of render's time at 100 nodes of 10 000 endpoints (a million endpoints seen, one node at a time).
        distributed = svc.traffic_distribution in release.traffic_distribution
        for port in svc.ports:
            endpoints = tuple(
                Endpoint(
                    ip=ep.ip,
                    port=ep.port,
                    is_local=ep.node == node,
                    ready=ep.ready,
                    serving=ep.serving,
                    terminating=ep.terminating,
                    zone_hints=(sets := _hint_sets(svc, ep, release, distributed))[0],
                    node_hints=sets[1],
                )
                for ep in port.endpoints
            )
            ports.append(
                ServicePort(
                    namespace=svc.namespace,
                    name=svc.name,
                    port_name=port.name,
                    protocol=port.protocol,
                    port=port.port,
                    cluster_ip=svc.cluster_ip_of(family) or None,
                    node_port=port.node_port,
                    external_ips=svc.external_ips if external else (),
                    load_balancer_ips=programmed,
                    load_balancer_source_ranges=svc.load_balancer_source_ranges,
                    external_policy=svc.external_policy,
                    internal_policy=svc.internal_policy,
                    health_check_node_port=svc.health_check_node_port,
                    affinity_timeout=svc.affinity_timeout,
                    endpoints=endpoints,
                    hints_annotation=hints_annotation(svc, release),
                    node=here,
                )
            )
    return ports


def proxy_config(topo: Topology, family: Family | None = None) -> ProxyConfig:
    """kube-proxy's flags as the proxier of `family` (the primary one by default) gets them: its clusterCIDR, and
    the Service CIDRs of both families once the release watches them (each proxier keeps its own family's)."""
    cluster = topo.cluster
    family = family or cluster.families[0]
    known = Release.of(cluster.kube_version).knows_service_cidrs
    return ProxyConfig(
        family=family,
        cluster_cidr=cluster.cluster_cidr_of(family) if cluster.kube_proxy_cluster_cidr else None,
        conntrack_tcp_be_liberal=cluster.tcp_be_liberal,
        masquerade_all=cluster.masquerade_all,
        masquerade_bit=cluster.masquerade_bit,
        node_port_addresses=cluster.node_port_addresses,
        localhost_nodeports=cluster.iptables_localhost_nodeports,
        nft_localhost_nodeports=cluster.gate("KubeProxyNFTablesLocalhostNodePorts"),
        ipvs_scheduler=cluster.ipvs_scheduler,
        ipvs_strict_arp=cluster.ipvs_strict_arp,
        service_cidrs=cluster.service_cidrs if known else (),
    )
