"""Frontend addresses the underlay cannot deliver: a Service's externalIP, or a load balancer address that no
load balancer or layer 2 speaker of the scenario serves, inside the nodes' own network (the underlay) and held by no
host the lab builds. kube-proxy programs rules for such an address and announces it nowhere, so a host on the
underlay asks ARP for it and nothing answers: what announces it on a real cluster (keepalived, kube-vip, MetalLB)
is not in the scenario. Allowed, as Kubernetes allows it; said, in case it is not what was meant. In ipvs mode
without strictARP every node's kernel answers ARP for the addresses on kube-ipvs0 (arp_ignore 0), so the address
is reached there, through whichever node answered: not said."""

from __future__ import annotations

from lab.describe import k8s
from lab.describe.resolve.actors import addresses_taken
from lab.describe.resolve.checks import inside
from lab.describe.topology import AnnouncementSpec, ClusterSpec, ExternalSpec, LoadBalancerSpec, NodeSpec, ServiceSpec
from lab.describe.yamlsrc import FieldPath, Source


def unannounced_addresses(
    src: Source,
    workload: list[k8s.Manifest],
    cluster: ClusterSpec,
    nodes: tuple[NodeSpec, ...],
    externals: tuple[ExternalSpec, ...],
    services: tuple[ServiceSpec, ...],
    served: tuple[tuple[LoadBalancerSpec, ...], tuple[AnnouncementSpec, ...]],
) -> tuple[str, ...]:
    """A warning for each such address, at the Service that gives it."""
    if cluster.proxy_mode == "ipvs" and not cluster.ipvs_strict_arp:
        return ()
    balancers, announcements = served
    skip = set(addresses_taken(nodes, externals, (cluster.gateway_ip, cluster.secondary_gateway_ip)))
    skip |= {f.vip for lb in balancers for f in lb.frontends}
    skip |= {a.vip for a in announcements}
    underlays = [u for u in (cluster.underlay, cluster.secondary_underlay) if u]
    index = {(m.metadata.namespace, m.metadata.name): i for i, m in enumerate(workload) if isinstance(m, k8s.Service)}
    said = []
    for svc in services:
        i = index[svc.namespace, svc.name]
        given = ("status", "loadBalancer") if workload[i].status.load_balancer.ingress else ("spec", "loadBalancerIP")
        direct: list[tuple[FieldPath, str]] = [(("spec", "externalIPs"), ip) for ip in svc.external_ips]
        direct += [(given, ip) for ip in svc.ingress_ips if ip not in svc.proxy_ingress_ips]
        for field, ip in direct:
            if ip not in skip and any(inside(ip, u) for u in underlays):  # never across families
                said.append(str(src.error(("workload", i, *field), _said(svc, field[-1] == "externalIPs", ip))))
    return tuple(said)


def _said(svc: ServiceSpec, external: bool, ip: str) -> str:
    what = "externalIP" if external else "load balancer address"
    helper = "keepalived or kube-vip" if external else "MetalLB or kube-vip: loadBalancers mode layer2 models them"
    return (
        f"{svc.name}'s {what} {ip} is inside the underlay and no host holds it: a host there asks ARP for it and "
        f"nothing answers (kube-proxy announces nothing), so what it sends there is lost; on a cluster that reaches "
        f"it something ({helper}) answers for it, which the scenario does not hold"
    )
