"""What kube-proxy on one node knows of the topology: its Service ports and flags."""

from __future__ import annotations

from lab.describe.topology import Topology
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort
from lab.render.kubeproxy.versions import Release


def service_ports(topo: Topology, node: str) -> list[ServicePort]:
    release = Release.of(topo.cluster.kube_version)
    ports = []
    for svc in topo.services:
        # kube-proxy leaves an ipMode: Proxy address to the proxy that answers it, from the release that honours
        # the field.
        programmed = tuple(
            ip for ip in svc.ingress_ips if not (release.honours_ip_mode and ip in svc.proxy_ingress_ips)
        )
        for port in svc.ports:
            endpoints = tuple(
                Endpoint(
                    ip=ep.ip,
                    port=ep.port,
                    is_local=ep.node == node,
                    ready=ep.ready,
                    serving=ep.serving,
                    terminating=ep.terminating,
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
                    cluster_ip=svc.cluster_ip,
                    node_port=port.node_port,
                    external_ips=svc.external_ips,
                    load_balancer_ips=programmed,
                    load_balancer_source_ranges=svc.load_balancer_source_ranges,
                    external_policy=svc.external_policy,
                    internal_policy=svc.internal_policy,
                    health_check_node_port=svc.health_check_node_port,
                    affinity_timeout=svc.affinity_timeout,
                    endpoints=endpoints,
                )
            )
    return ports


def proxy_config(topo: Topology) -> ProxyConfig:
    cluster = topo.cluster
    return ProxyConfig(
        cluster_cidr=cluster.cluster_cidr if cluster.kube_proxy_cluster_cidr else None,
        conntrack_tcp_be_liberal=cluster.tcp_be_liberal,
        masquerade_all=cluster.masquerade_all,
        node_port_addresses=cluster.node_port_addresses,
        ipvs_scheduler=cluster.ipvs_scheduler,
        ipvs_strict_arp=cluster.ipvs_strict_arp,
    )
