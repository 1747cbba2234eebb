"""The cluster section: the kube-proxy release it runs, what that release decides here, and its three networks.

Every use describe makes of kube-proxy's version knowledge is in this module.
"""

from __future__ import annotations

import ipaddress
import itertools

from lab.describe import schema
from lab.describe.releases import check_version
from lab.describe.resolve.checks import hosts
from lab.describe.topology import ClusterSpec
from lab.describe.yamlsrc import Source

# kube-proxy honours status.loadBalancer.ingress[].ipMode from 1.30 (LoadBalancerIPMode beta, on by default;
# alpha and off by default in 1.29). Before, an ipMode: Proxy address is programmed like any other.
IP_MODE_SINCE = 30


def resolve_cluster(src: Source, c: schema.Cluster) -> ClusterSpec:
    """A release kube-proxy's rules are known for, and networks that do not overlap; the gateway is the underlay's
    first address."""
    if problem := check_version(c.kube_version):
        raise src.error(("cluster", "kubeVersion"), problem)
    nets = {"clusterCIDR": c.cluster_cidr, "serviceCIDR": c.service_cidr, "underlay": c.underlay}
    for (a, na), (b, nb) in itertools.combinations(nets.items(), 2):
        if ipaddress.IPv4Network(na).overlaps(ipaddress.IPv4Network(nb)):
            raise src.error(("cluster", b), f"{nb} overlaps {a} {na}; the three networks must be disjoint")
    return ClusterSpec(
        proxy_mode=c.proxy_mode,
        kube_version=c.kube_version,
        iptables_backend=c.iptables_backend,
        cluster_cidr=c.cluster_cidr,
        kube_proxy_cluster_cidr=c.kube_proxy_cluster_cidr,
        service_cidr=c.service_cidr,
        hairpin_mode=c.hairpin_mode,
        underlay=c.underlay,
        gateway_ip=next(hosts(c.underlay)),
        br_netfilter=c.br_netfilter,
        cni=c.cni,
        tunnel=c.tunnel,
        ipvs_bind_lb_ips=c.ipvs_bind_load_balancer_ips,
    )


def honours_ip_mode(cluster: ClusterSpec) -> bool:
    """Whether the cluster's kube-proxy leaves a load balancer's ipMode: Proxy ingress IP unprogrammed."""
    return int(cluster.kube_version.split(".")[1]) >= IP_MODE_SINCE
