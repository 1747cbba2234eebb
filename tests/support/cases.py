"""Inputs of kube-proxy's own iptables tests, shared by the golden-text unit tests
(tests/unit/test_iptables_render.py) and the real-kernel agreement tests
(tests/integration/test_kubeproxy_agreement.py).

Ported from pkg/proxy/iptables/proxier_test.go at kubernetes/kubernetes
531be81208e2274ef42e72525a26610a9622bcdf. The inputs mirror NewFakeProxier: node "test-node" with
IP 192.168.0.2 (and 192.168.1.2, 192.168.99.11 on eth0, 127.0.0.1 on lo), pod CIDR 10.0.0.0/8 (the
local-traffic detector), masquerade mark "0x4000", no --random-fully, localhost NodePorts on,
nfacct counters available, nf_conntrack_tcp_be_liberal off. An endpoint is "local" when its
NodeName is test-node.

A plain module, not a conftest: tests/ is on pytest's pythonpath, so tests import it as support.cases.
"""

from __future__ import annotations

from dataclasses import replace

from lab.render.kubeproxy.iptables import IptablesRules, render_iptables
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort
from support.builders import ep, svc, terminating

TEST_NODE_IP = "192.168.0.2"
TEST_NODE_IP_ALT = "192.168.1.2"
TEST_EXTERNAL_IP = "192.168.99.11"
TEST_EXTERNAL_CLIENT = "203.0.113.2"
TEST_EXTERNAL_CLIENT_BLOCKED = "203.0.113.130"
# The fake proxier's interfaces (lo and eth0); the node IP comes first.
NODE_IPS = (TEST_NODE_IP, "127.0.0.1", TEST_NODE_IP_ALT, TEST_EXTERNAL_IP, "::1", "2001:db8::1", "2001:db8:1::2")

FAKE = ProxyConfig(cluster_cidr="10.0.0.0/8", masquerade_mark="0x4000", random_fully=False, nfacct_counters=True)


def render(services, config: ProxyConfig = FAKE, node_ips=NODE_IPS) -> IptablesRules:
    return render_iptables(services, config, node_ips)


# --- the Services and EndpointSlices of kube-proxy's packet-flow tests -------------------------


def no_endpoints_service() -> ServicePort:
    """TestNoEndpointsReject."""
    return svc(
        "ns1", "svc1", "172.30.0.41", node_port=3001, external_ips=("192.168.99.11",), load_balancer_ips=("1.2.3.4",)
    )


def cluster_ip_general_services() -> list[ServicePort]:
    """TestClusterIPGeneral: several ports and protocols on one ClusterIP."""
    both = (ep("10.180.0.1", local=True), ep("10.180.2.1"))
    return [
        svc("ns1", "svc1", "172.30.0.41", port_name="http", endpoints=(ep("10.180.0.1", local=True),)),
        svc("ns2", "svc2", "172.30.0.42", port_name="http", endpoints=both),
        svc("ns2", "svc2", "172.30.0.42", 443, "https", endpoints=tuple(replace(e, port=8443) for e in both)),
        svc(
            "ns2",
            "svc2",
            "172.30.0.42",
            53,
            "dns-udp",
            protocol="UDP",
            endpoints=tuple(replace(e, port=53) for e in both),
        ),
        svc("ns2", "svc2", "172.30.0.42", 53, "dns-tcp", endpoints=tuple(replace(e, port=5353) for e in both)),
        svc(
            "ns2",
            "svc2",
            "172.30.0.42",
            53,
            "dns-sctp",
            protocol="SCTP",
            endpoints=tuple(replace(e, port=53) for e in both),
        ),
    ]


def load_balancer_service() -> ServicePort:
    """TestLoadBalancer: loadBalancerSourceRanges (one with stray whitespace), two LB IPs."""
    return svc(
        "ns1",
        "svc1",
        "172.30.0.41",
        node_port=3001,
        load_balancer_ips=("1.2.3.4", "5.6.7.8"),
        load_balancer_source_ranges=("192.168.0.0/24", " 203.0.113.0/25"),
        endpoints=(ep("10.180.0.1"),),
    )


# TestNodePorts (its IPv4 cases): id -> (--iptables-localhost-nodeports, --nodeport-addresses)
NODE_PORTS_VARIANTS: dict[str, tuple[bool, tuple[str, ...]]] = {
    "localhost-nodeports enabled": (True, ()),
    "localhost-nodeports disabled": (False, ()),
    "localhost in nodeport-addresses": (False, ("192.168.0.0/24", "127.0.0.1/32")),
    "multiple": (False, ("192.168.0.0/24", "192.168.1.0/24", "2001:db8::/64")),
}


def node_ports_inputs(variant: str) -> tuple[list[ServicePort], ProxyConfig]:
    localhost_nodeports, nodeport_addresses = NODE_PORTS_VARIANTS[variant]
    config = replace(FAKE, localhost_nodeports=localhost_nodeports, node_port_addresses=nodeport_addresses)
    s = svc("ns1", "svc1", "172.30.0.41", node_port=3001, endpoints=(ep("10.180.0.1"), ep("10.180.2.1", local=True)))
    return [s], config


def health_check_inputs(with_service: bool = True) -> tuple[list[ServicePort], ProxyConfig]:
    """TestHealthCheckNodePort (with --nodeport-addresses 127.0.0.0/8); then with the Service gone
    (and the fake proxier's default flags)."""
    if not with_service:
        return [], FAKE
    s = svc("ns1", "svc1", "172.30.0.42", node_port=3001, health_check_node_port=30000, external_policy="Local")
    return [s], replace(FAKE, node_port_addresses=("127.0.0.0/8",))


def external_policy_service(policy: str) -> ServicePort:
    """TestExternalTrafficPolicyLocal / TestExternalTrafficPolicyCluster."""
    return svc(
        "ns1",
        "svc1",
        "172.30.0.41",
        node_port=3001,
        external_ips=("192.168.99.11",),
        load_balancer_ips=("1.2.3.4",),
        health_check_node_port=30000,
        external_policy=policy,
        endpoints=(ep("10.180.0.1"), ep("10.180.2.1", local=True)),
    )


# TestInternalTrafficPolicy: id -> (internalTrafficPolicy, the NodeName of endpoints 10.0.1.1-3)
INTERNAL_POLICY_VARIANTS: dict[str, tuple[str, tuple[str, str, str]]] = {
    "cluster": ("Cluster", ("test-node", "node1", "node2")),
    "local, one local endpoint": ("Local", ("test-node", "node1", "node2")),
    "local, two local": ("Local", ("test-node", "test-node", "node2")),
    "local, no local endpoints": ("Local", ("node0", "node1", "node2")),
}


def internal_policy_service(variant: str, with_endpoints: bool = True) -> ServicePort:
    policy, nodes = INTERNAL_POLICY_VARIANTS[variant]
    endpoints = tuple(ep(f"10.0.1.{i}", local=node == "test-node") for i, node in enumerate(nodes, 1))
    return svc(
        "ns1", "svc1", "172.30.1.1", port_name="", internal_policy=policy, endpoints=endpoints if with_endpoints else ()
    )


# TestTerminatingEndpointsTrafficPolicyLocal: id -> endpoints
TERMINATING_VARIANTS: dict[str, tuple[Endpoint, ...]] = {
    "ready endpoints exist": (
        ep("10.0.1.1", local=True),
        ep("10.0.1.2", local=True),
        terminating("10.0.1.3", True),
        terminating("10.0.1.4", True, serving=False),
        ep("10.0.1.5"),
    ),
    "only terminating endpoints exist": (
        terminating("10.0.1.2", True),
        terminating("10.0.1.3", True),
        terminating("10.0.1.4", True, serving=False),
        ep("10.0.1.5"),
    ),
    "terminating endpoints on remote node": (terminating("10.0.1.5", False),),
    "no usable endpoints on any node": (
        terminating("10.0.1.5", True, serving=False),
        terminating("10.0.1.5", False, serving=False),
    ),
}


def terminating_service(variant: str, with_endpoints: bool = True) -> ServicePort:
    """Ready endpoints, else serving+terminating ones, chosen separately for the cluster-wide and
    the node-local list; eTP:Local."""
    return svc(
        "ns1",
        "svc1",
        "172.30.1.1",
        port_name="",
        load_balancer_ips=("1.2.3.4",),
        health_check_node_port=30000,
        external_policy="Local",
        endpoints=TERMINATING_VARIANTS[variant] if with_endpoints else (),
    )


def masquerade_services() -> list[ServicePort]:
    """TestInternalExternalMasquerade: svc1 plain, svc2 eTP:Local, svc3 iTP:Local; each with one
    local endpoint (10.180.0.N) and one remote (10.180.1.N)."""

    def endpoints(n: int) -> tuple[Endpoint, ...]:
        return ep(f"10.180.0.{n}", local=True), ep(f"10.180.1.{n}")

    return [
        svc(
            "ns1",
            "svc1",
            "172.30.0.41",
            node_port=3001,
            health_check_node_port=30001,
            load_balancer_ips=("1.2.3.4",),
            endpoints=endpoints(1),
        ),
        svc(
            "ns2",
            "svc2",
            "172.30.0.42",
            node_port=3002,
            health_check_node_port=30002,
            external_policy="Local",
            load_balancer_ips=("5.6.7.8",),
            endpoints=endpoints(2),
        ),
        svc(
            "ns3",
            "svc3",
            "172.30.0.43",
            node_port=3003,
            health_check_node_port=30003,
            internal_policy="Local",
            load_balancer_ips=("9.10.11.12",),
            endpoints=endpoints(3),
        ),
    ]


# TestInternalExternalMasquerade: id -> (--masquerade-all, a LocalTrafficDetector for 10.0.0.0/8)
MASQUERADE_VARIANTS: dict[str, tuple[bool, bool]] = {
    "base": (False, True),
    "no LocalTrafficDetector": (False, False),
    "masqueradeAll": (True, True),
    "masqueradeAll, no LocalTrafficDetector": (True, False),
}


def masquerade_config(variant: str) -> ProxyConfig:
    masquerade_all, detector = MASQUERADE_VARIANTS[variant]
    return replace(FAKE, masquerade_all=masquerade_all, cluster_cidr="10.0.0.0/8" if detector else None)
