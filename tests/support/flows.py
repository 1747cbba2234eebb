"""kube-proxy's packet flows as data, shared by the real-kernel agreement tests of its iptables
(tests/integration/test_kubeproxy_agreement.py, test_replay_goldens.py) and nftables
(test_nftables_agreement.py) proxiers, with the node they are replayed on and how a replay is compared.

The nftables tests copy TestExternalTrafficPolicyLocal/Cluster from the iptables ones (flow names here
are the nftables test's, which add "unmasqueraded"/"masqueraded" where the iptables test leaves it out),
and TestInternalExternalMasquerade less the localhost flows (nftables never serves localhost NodePorts);
those flows live here once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lab.replay.env import Setup
from lab.replay.run import ReplayResult
from support.cases import (
    NODE_IPS,
    TEST_EXTERNAL_CLIENT,
    TEST_EXTERNAL_CLIENT_BLOCKED,
    TEST_EXTERNAL_IP,
    TEST_NODE_IP,
    TEST_NODE_IP_ALT,
)

POD, EXT, BLOCKED, LO = "10.0.0.2", TEST_EXTERNAL_CLIENT, TEST_EXTERNAL_CLIENT_BLOCKED, "127.0.0.1"

# The fake proxier's node, replayed: its IPv4 addresses but 127.0.0.1 (the node namespace's lo has it), and
# its LocalTrafficDetector's CIDR as the node's pod network (test_kubeproxy_agreement.py says why).
REPLAY_NODE_IPS = (TEST_NODE_IP, TEST_NODE_IP_ALT, TEST_EXTERNAL_IP)
assert set(REPLAY_NODE_IPS) == {ip for ip in NODE_IPS if "." in ip} - {"127.0.0.1"}
REPLAY_POD_CIDR = "10.0.0.0/8"


@dataclass(frozen=True)
class Flow:
    name: str
    src: str
    dst: str
    dport: int
    output: str  # kube-proxy's words: the endpoints reached ("IP:port, ..."), "DROP", "REJECT", "ACCEPT", or ""
    masq: bool = False
    proto: str = "TCP"
    # Addresses the node owns for this flow only, besides the test's node addresses.
    node_also_has: tuple[str, ...] = ()


def replay_setup(flow: Flow) -> Setup:
    return Setup(
        (*REPLAY_NODE_IPS, *flow.node_also_has), REPLAY_POD_CIDR, flow.src, flow.dst, flow.dport, flow.proto, ()
    )


def sorted_output(output: str | None) -> str | None:
    return ", ".join(sorted(output.split(", "))) if output else output


def agree(result: ReplayResult, flow: Flow) -> bool:
    """Did the kernel do what kube-proxy's test expects: the same output (endpoints in any order; a failed
    connection, output None, never passes for "") and the same masquerading?"""
    return (sorted_output(result.output), result.masq) == (sorted_output(flow.output), flow.masq)


# --- TestExternalTrafficPolicyLocal / Cluster ---------------------------------------------------

BOTH, LOCAL = "10.180.0.1:80, 10.180.2.1:80", "10.180.2.1:80"


def external_policy_flows(policy: str) -> list[Flow]:
    """externalTrafficPolicy `policy` on svc1 (cluster IP 172.30.0.41, external IP 192.168.99.11, LB IP
    1.2.3.4, NodePort 3001 on the node IP), a remote and a local endpoint."""
    if policy == "Local":
        return [
            Flow("pod to cluster IP hits both endpoints, unmasqueraded", POD, "172.30.0.41", 80, BOTH),
            Flow("pod to external IP hits both endpoints, unmasqueraded", POD, "192.168.99.11", 80, BOTH),
            Flow("external to external IP hits only local endpoint, unmasqueraded", EXT, "192.168.99.11", 80, LOCAL),
            Flow("pod to LB IP hits only both endpoints, unmasqueraded", POD, "1.2.3.4", 80, BOTH),
            Flow("external to LB IP hits only local endpoint, unmasqueraded", EXT, "1.2.3.4", 80, LOCAL),
            Flow("pod to NodePort hits both endpoints, unmasqueraded", POD, TEST_NODE_IP, 3001, BOTH),
            Flow("external to NodePort hits only local endpoint, unmasqueraded", EXT, TEST_NODE_IP, 3001, LOCAL),
        ]
    return [
        Flow("pod to cluster IP hits both endpoints, unmasqueraded", POD, "172.30.0.41", 80, BOTH),
        Flow("pod to external IP hits both endpoints, masqueraded", POD, "192.168.99.11", 80, BOTH, True),
        Flow("external to external IP hits both endpoints, masqueraded", EXT, "192.168.99.11", 80, BOTH, True),
        Flow("pod to LB IP hits both endpoints, masqueraded", POD, "1.2.3.4", 80, BOTH, True),
        Flow("external to LB IP hits both endpoints, masqueraded", EXT, "1.2.3.4", 80, BOTH, True),
        Flow("pod to NodePort hits both endpoints, masqueraded", POD, TEST_NODE_IP, 3001, BOTH, True),
        Flow("external to NodePort hits both endpoints, masqueraded", EXT, TEST_NODE_IP, 3001, BOTH, True),
    ]


# --- TestInternalExternalMasquerade -------------------------------------------------------------

NODE = TEST_NODE_IP
ALL1, ALL2, ALL3 = "10.180.0.1:80, 10.180.1.1:80", "10.180.0.2:80, 10.180.1.2:80", "10.180.0.3:80, 10.180.1.3:80"
MASQUERADE_FLOWS = [
    Flow("pod to ClusterIP", POD, "172.30.0.41", 80, ALL1, False),
    Flow("pod to NodePort", POD, NODE, 3001, ALL1, True),
    Flow("pod to LB", POD, "1.2.3.4", 80, ALL1, True),
    Flow("node to ClusterIP", NODE, "172.30.0.41", 80, ALL1, True),
    Flow("node to NodePort", NODE, NODE, 3001, ALL1, True),
    Flow("localhost to NodePort", LO, LO, 3001, ALL1, True),
    Flow("node to LB", NODE, "1.2.3.4", 80, ALL1, True),
    Flow("external to ClusterIP", EXT, "172.30.0.41", 80, ALL1, True),
    Flow("external to NodePort", EXT, NODE, 3001, ALL1, True),
    Flow("external to LB", EXT, "1.2.3.4", 80, ALL1, True),
    Flow("pod to ClusterIP with eTP:Local", POD, "172.30.0.42", 80, ALL2, False),
    Flow("pod to NodePort with eTP:Local", POD, NODE, 3002, ALL2, False),
    Flow("pod to LB with eTP:Local", POD, "5.6.7.8", 80, ALL2, False),
    Flow("node to ClusterIP with eTP:Local", NODE, "172.30.0.42", 80, ALL2, True),
    Flow("node to NodePort with eTP:Local", NODE, NODE, 3001, ALL1, True),
    Flow("localhost to NodePort with eTP:Local", LO, LO, 3002, ALL2, True),
    Flow("node to LB with eTP:Local", NODE, "5.6.7.8", 80, ALL2, True),
    Flow("external to ClusterIP with eTP:Local", EXT, "172.30.0.42", 80, ALL2, True),
    Flow("external to NodePort with eTP:Local", EXT, NODE, 3002, "10.180.0.2:80", False),
    Flow("external to LB with eTP:Local", EXT, "5.6.7.8", 80, "10.180.0.2:80", False),
    Flow("pod to ClusterIP with iTP:Local", POD, "172.30.0.43", 80, "10.180.0.3:80", False),
    Flow("pod to NodePort with iTP:Local", POD, NODE, 3003, ALL3, True),
    Flow("pod to LB with iTP:Local", POD, "9.10.11.12", 80, ALL3, True),
    Flow("node to ClusterIP with iTP:Local", NODE, "172.30.0.43", 80, "10.180.0.3:80", True),
    Flow("node to NodePort with iTP:Local", NODE, NODE, 3003, ALL3, True),
    Flow("localhost to NodePort with iTP:Local", LO, LO, 3003, ALL3, True),
    Flow("node to LB with iTP:Local", NODE, "9.10.11.12", 80, ALL3, True),
    Flow("external to ClusterIP with iTP:Local", EXT, "172.30.0.43", 80, "10.180.0.3:80", True),
    Flow("external to NodePort with iTP:Local", EXT, NODE, 3003, ALL3, True),
    Flow("external to LB with iTP:Local", EXT, "9.10.11.12", 80, ALL3, True),
]
# Without a local-traffic detector pods get no eTP:Local short-circuit, so only the local endpoint...
NO_SHORT_CIRCUIT = {
    "pod to NodePort with eTP:Local": {"output": "10.180.0.2:80"},
    "pod to LB with eTP:Local": {"output": "10.180.0.2:80"},
}
# ...and all ClusterIP traffic is taken for pod traffic.
NO_DETECTOR = {
    **{
        name: {"masq": False}
        for name in (
            "node to ClusterIP",
            "node to ClusterIP with eTP:Local",
            "node to ClusterIP with iTP:Local",
            "external to ClusterIP",
            "external to ClusterIP with eTP:Local",
            "external to ClusterIP with iTP:Local",
        )
    },
    **NO_SHORT_CIRCUIT,
}
MASQUERADE_ALL = {
    name: {"masq": True}
    for name in ("pod to ClusterIP", "pod to ClusterIP with eTP:Local", "pod to ClusterIP with iTP:Local")
}
MASQUERADE_OVERRIDES = {
    "base": {},
    "no LocalTrafficDetector": NO_DETECTOR,
    "masqueradeAll": MASQUERADE_ALL,
    "masqueradeAll, no LocalTrafficDetector": {**NO_SHORT_CIRCUIT, **MASQUERADE_ALL},
}


def masquerade_flows(variant: str, localhost: bool = True) -> list[Flow]:
    """The flows of one TestInternalExternalMasquerade variant (MASQUERADE_VARIANTS' ids)."""
    overrides = MASQUERADE_OVERRIDES[variant]
    assert sum(flow.name in overrides for flow in MASQUERADE_FLOWS) == len(overrides)
    flows = [replace(flow, **overrides.get(flow.name, {})) for flow in MASQUERADE_FLOWS]
    return [flow for flow in flows if localhost or flow.src != LO]


def load_balancer_flows() -> list[Flow]:
    """TestLoadBalancer's flows, the same table in kube-proxy's iptables and nftables proxier tests: two LB IPs
    with loadBalancerSourceRanges, the NodePort exempt from them. The node owns the VIPs in the last two: "the
    LB rules assume that when you connect from a node to a LB IP, that something external to kube-proxy will
    cause the connection to be SNATted to the LB IP" (proxier.go)."""
    ok = "10.180.0.1:80"
    return [
        Flow("pod to cluster IP", POD, "172.30.0.41", 80, ok),
        Flow("external to nodePort", EXT, TEST_NODE_IP, 3001, ok, masq=True),
        Flow("nodePort bypasses LoadBalancerSourceRanges", BLOCKED, TEST_NODE_IP, 3001, ok, masq=True),
        Flow("accepted external to LB1", EXT, "1.2.3.4", 80, ok, masq=True),
        Flow("accepted external to LB2", EXT, "5.6.7.8", 80, ok, masq=True),
        Flow("blocked external to LB1", BLOCKED, "1.2.3.4", 80, "DROP"),
        Flow("blocked external to LB2", BLOCKED, "5.6.7.8", 80, "DROP"),
        Flow("pod to LB1 (blocked by LoadBalancerSourceRanges)", POD, "1.2.3.4", 80, "DROP"),
        Flow("pod to LB2 (blocked by LoadBalancerSourceRanges)", POD, "5.6.7.8", 80, "DROP"),
        Flow("node to LB1 (allowed by LoadBalancerSourceRanges)", TEST_NODE_IP, "1.2.3.4", 80, ok, masq=True),
        Flow("node to LB2 (allowed by LoadBalancerSourceRanges)", TEST_NODE_IP, "5.6.7.8", 80, ok, masq=True),
        *(
            Flow(f"same node to LB{i}, SNATted to LB{i} (implicitly allowed)", vip, vip, 80, ok, True, "TCP", (vip,))
            for i, vip in ((1, "1.2.3.4"), (2, "5.6.7.8"))
        ),
    ]


def endpoints_deleted_flows() -> list[Flow]:
    """TestTerminatingEndpointsTrafficPolicy*'s last step in both kube-proxy tests: the EndpointSlice deleted,
    the ClusterIP and the LB IP reject."""
    return [
        Flow("pod to clusterIP after endpoints deleted", POD, "172.30.1.1", 80, "REJECT"),
        Flow("external to LB after endpoints deleted", EXT, "1.2.3.4", 80, "REJECT"),
    ]


def no_endpoints_flows() -> list[Flow]:
    """TestNoEndpointsReject's flows, the same in kube-proxy's iptables and nftables tests: every address of a
    Service without endpoints rejects."""
    return [
        Flow("pod to cluster IP with no endpoints", POD, "172.30.0.41", 80, "REJECT"),
        Flow("external to external IP with no endpoints", EXT, "192.168.99.11", 80, "REJECT"),
        Flow("pod to NodePort with no endpoints", POD, TEST_NODE_IP, 3001, "REJECT"),
        Flow("external to NodePort with no endpoints", EXT, TEST_NODE_IP, 3001, "REJECT"),
        Flow("pod to LoadBalancer IP with no endpoints", POD, "1.2.3.4", 80, "REJECT"),
        Flow("external to LoadBalancer IP with no endpoints", EXT, "1.2.3.4", 80, "REJECT"),
    ]


# TestInternalTrafficPolicy, the same in kube-proxy's iptables and nftables tests: variant of
# support.cases.internal_policy_service -> kube-proxy's flow name, output.
INTERNAL_POLICY_FLOWS = {
    "cluster": ("pod to ClusterIP hits all endpoints", "10.0.1.1:80, 10.0.1.2:80, 10.0.1.3:80"),
    "local, one local endpoint": ("pod to ClusterIP hits only local endpoint", "10.0.1.1:80"),
    "local, two local": ("pod to ClusterIP hits all local endpoints", "10.0.1.1:80, 10.0.1.2:80"),
    "local, no local endpoints": ("no endpoints", "DROP"),
}


def internal_policy_flows(variant: str, with_endpoints: bool = True) -> list[Flow]:
    """The variant's flow, or after its EndpointSlice is deleted, the REJECT."""
    if not with_endpoints:
        return [Flow("endpoints deleted", POD, "172.30.1.1", 80, "REJECT")]
    name, output = INTERNAL_POLICY_FLOWS[variant]
    return [Flow(name, POD, "172.30.1.1", 80, output)]
