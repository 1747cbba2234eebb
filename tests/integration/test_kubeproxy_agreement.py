"""kube-proxy's own packet-flow expectations, checked on the real kernel.

kube-proxy's iptables unit tests (pkg/proxy/iptables/proxier_test.go at kubernetes/kubernetes
531be81208e2274ef42e72525a26610a9622bcdf) trace simulated packets through the rules with their
iptablesTracer. Here the same Services, EndpointSlices and flags (tests/support/cases.py) are
rendered with render_iptables(...).restore_text() (with the fake proxier's nfacct counters, whose
objects lab.replay creates first as kube-proxy does), installed in a fresh node namespace, and every
flow is a real TCP connection or UDP datagram (lab.replay.run.replay). What the kernel did is
compared with kube-proxy's `output` (the endpoints reached, "DROP", "REJECT", "ACCEPT", or "" when
not NATed) and `masq` (the receiver saw another source than the one sent).

The node is the fake proxier's:
- addresses: its IPv4 interface addresses 192.168.0.2, 192.168.1.2 and 192.168.99.11 (testNodeIPs,
  which the tracer counts as LOCAL, as it does 127.0.0.1: the node namespace's lo has that one);
- pods: the fake proxier's LocalTrafficDetector takes 10.0.0.0/8 for pod traffic, so 10.0.0.0/8 is
  this node's pod network. Every source in it (10.0.0.2; 10.180.0.1 and 10.180.0.2 in
  TestClusterIPGeneral) is a pod on the node's cni0 bridge, and so is every endpoint, even those
  kube-proxy takes for remote (NodeName not test-node): locality only chooses the rules
  (eTP/iTP:Local), which are rendered from kube-proxy's view, and the tracer never looks at where
  an endpoint is. A node pod CIDR of 10.0.0.0/24 (10.180.x.x endpoints behind the uplink, in the
  sink) was tried: 62 of the 207 flows then fail, all for reasons of that model, not of the rules. The
  10.180.0.x sources become clients outside the cluster; the endpoints kube-proxy calls local
  (10.180.0.N, 10.180.2.1, 10.0.1.x) sit on another node, which answers unmasqueraded eTP:Local
  traffic straight to the client, so the connection never completes; and the node's own
  connections masqueraded out of eth0 keep 192.168.0.2, so their masquerade cannot be seen. No
  single CIDR holds pod 10.0.0.2 and the local 10.180.0.N but not the remote 10.180.1.N;
- clients outside the cluster (203.0.113.x; 1.2.3.4 to the health check port) come in through the
  node's uplink; 127.0.0.1 is the node itself;
- "same node to LBn, SNATted to LBn" comes from the LB IP and goes to it. proxier.go: "the VIP is
  often added as a local address ... a request from a node to the VIP will not hit the
  loadbalancer but will loop back with the source IP set to the VIP". So for those two flows the
  node also owns the VIP (Flow.node_also_has).

Reading the kernel in kube-proxy's words (lab.replay.run does it; support.flows.agree compares):
- "ACCEPT" (a kube-proxy filter rule accepts the packet): with INPUT policy ACCEPT, a connection
  delivered to the node itself with a kube-proxy "-j ACCEPT" rule among the rules it moved;
- "" (not NATed): the connection must really be delivered (to the node, or forwarded to the sink),
  not refused or lost;
- "REJECT" from outside to an LB IP the node does not own: the REJECT rule runs, but the node first
  sends the client an ICMP redirect (it forwards the packet back out of the interface it came in
  by, and every address of this lab is on-link), and that uses up the per-host ICMP rate limit, so
  the port-unreachable is not sent and the client times out (IcmpOutRateLimitHost). replay counts
  it as rejected by the rule's counter; with shared_media off on the node (no redirect) the client
  is refused at once.
- route_localnet: lab.replay sets it on every node; kube-proxy sets it only for localhost NodePorts,
  and where those are off 127/8 is never NATed, so the loopback connection stays on lo either way.

Where the kernel and kube-proxy disagree (strict xfail), or the lab cannot send the flow (skip):

| case                                  | kube-proxy says              | kernel does   | why                      |
|---------------------------------------|------------------------------|---------------|--------------------------|
| TestClusterIPGeneral/same port (SCTP) | 10.180.0.1:53, 10.180.2.1:53 | (not sent:    | lab.probe has no SCTP    |
|                                       |                              | skipped)      | client or listener       |

Every other flow agrees with kube-proxy. (The ported tests are IPv4 ones: TestNodePorts' IPv6 cases are not
replayed here; the IPv6 proxier's rules are compared as text with kube-proxy's IPv6 tests in
tests/unit/test_iptables_ipv6.py, and run on the kernel in tests/integration/test_ipv6_runs.py.)
"""

from __future__ import annotations

import functools

import pytest
from support.agreement import Agreement, assert_agrees
from support.cases import (
    FAKE,
    MASQUERADE_VARIANTS,
    NODE_IPS,
    NODE_PORTS_VARIANTS,
    TERMINATING_VARIANTS,
    TEST_NODE_IP,
    TEST_NODE_IP_ALT,
    cluster_ip_general_services,
    health_check_inputs,
    load_balancer_service,
    masquerade_config,
    masquerade_services,
    no_endpoints_service,
    node_ports_inputs,
    terminating_service,
)
from support.flows import (
    EXT,
    LO,
    POD,
    Flow,
    endpoints_deleted_flows,
    load_balancer_flows,
    masquerade_flows,
    no_endpoints_flows,
    replay_setup,
)

from lab.render.kubeproxy.iptables import render_iptables
from lab.replay.run import replay

AGREEMENT = Agreement()
ruleset = AGREEMENT.ruleset


@functools.cache
def rules_text(name: str) -> str:
    inputs = AGREEMENT.inputs[name]
    assert inputs is not None
    services, config = inputs()
    return render_iptables(services, config, NODE_IPS).restore_text()


# --- TestNoEndpointsReject ----------------------------------------------------------------------

ruleset(
    "TestNoEndpointsReject",
    lambda: ([no_endpoints_service()], FAKE),
    no_endpoints_flows(),
)

# --- TestClusterIPGeneral -----------------------------------------------------------------------

ruleset(
    "TestClusterIPGeneral",
    lambda: (cluster_ip_general_services(), FAKE),
    [
        Flow("simple clusterIP", "10.180.0.2", "172.30.0.41", 80, "10.180.0.1:80"),
        Flow("hairpin to cluster IP", "10.180.0.1", "172.30.0.41", 80, "10.180.0.1:80", masq=True),
        Flow("clusterIP with multiple endpoints", "10.180.0.2", "172.30.0.42", 80, "10.180.0.1:80, 10.180.2.1:80"),
        Flow("clusterIP with TargetPort", "10.180.0.2", "172.30.0.42", 443, "10.180.0.1:8443, 10.180.2.1:8443"),
        Flow("same port (TCP)", "10.180.0.2", "172.30.0.42", 53, "10.180.0.1:5353, 10.180.2.1:5353"),
        Flow("same port (UDP)", "10.180.0.2", "172.30.0.42", 53, "10.180.0.1:53, 10.180.2.1:53", proto="UDP"),
        Flow("same port (SCTP)", "10.180.0.2", "172.30.0.42", 53, "10.180.0.1:53, 10.180.2.1:53", proto="SCTP"),
        Flow("TCP-only port does not match UDP traffic", "10.180.0.2", "172.30.0.42", 80, "", proto="UDP"),
        Flow("svc1 does not accept svc2's ports", "10.180.0.2", "172.30.0.41", 443, ""),
    ],
)

# --- TestLoadBalancer ---------------------------------------------------------------------------

ruleset("TestLoadBalancer", lambda: ([load_balancer_service()], FAKE), load_balancer_flows())

# --- TestNodePorts ------------------------------------------------------------------------------

BOTH = "10.180.0.1:80, 10.180.2.1:80"
for variant, (localhost_nodeports, _) in NODE_PORTS_VARIANTS.items():
    # TestNodePorts' allowAltNodeIP: only "localhost in nodeport-addresses" leaves 192.168.1.2 out.
    alt = variant != "localhost in nodeport-addresses"
    ruleset(
        f"TestNodePorts/{variant}",
        functools.partial(node_ports_inputs, variant),
        [
            Flow("pod to cluster IP", POD, "172.30.0.41", 80, BOTH),
            Flow("external to nodePort", EXT, TEST_NODE_IP, 3001, BOTH, masq=True),
            Flow("node to nodePort", TEST_NODE_IP, TEST_NODE_IP, 3001, BOTH, masq=True),
            Flow("localhost to nodePort", LO, LO, 3001, *((BOTH, True) if localhost_nodeports else ("", False))),
            Flow("nodePort on secondary IP", EXT, TEST_NODE_IP_ALT, 3001, *((BOTH, True) if alt else ("", False))),
        ],
    )

# --- TestHealthCheckNodePort --------------------------------------------------------------------

ruleset(
    "TestHealthCheckNodePort",
    health_check_inputs,
    [Flow("firewall accepts HealthCheckNodePort", "1.2.3.4", TEST_NODE_IP, 30000, "ACCEPT")],
)
ruleset(
    "TestHealthCheckNodePort/service deleted",
    functools.partial(health_check_inputs, False),
    [Flow("HealthCheckNodePort no longer has any rule", "1.2.3.4", TEST_NODE_IP, 30000, "")],
)

# --- TestExternalTrafficPolicyLocal / Cluster, TestInternalTrafficPolicy --------------------------

AGREEMENT.add_traffic_policy_rulesets(FAKE)

# --- TestTerminatingEndpointsTrafficPolicyLocal -------------------------------------------------

TERMINATING_OUTPUT = {  # variant -> (to the ClusterIP, to the LB IP)
    "ready endpoints exist": ("10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80", "10.0.1.1:80, 10.0.1.2:80"),
    "only terminating endpoints exist": ("10.0.1.5:80", "10.0.1.2:80, 10.0.1.3:80"),
    "terminating endpoints on remote node": ("10.0.1.5:80", "DROP"),
    "no usable endpoints on any node": ("REJECT", "REJECT"),
}
for variant in TERMINATING_VARIANTS:
    to_cluster_ip, to_lb = TERMINATING_OUTPUT[variant]
    ruleset(
        f"TestTerminatingEndpointsTrafficPolicyLocal/{variant}",
        lambda variant=variant: ([terminating_service(variant)], FAKE),
        [
            Flow("pod to clusterIP", POD, "172.30.1.1", 80, to_cluster_ip),
            Flow("external to LB", EXT, "1.2.3.4", 80, to_lb),
        ],
    )
    ruleset(
        f"TestTerminatingEndpointsTrafficPolicyLocal/{variant}/endpoints deleted",
        lambda variant=variant: ([terminating_service(variant, with_endpoints=False)], FAKE),
        endpoints_deleted_flows(),
    )

# --- TestInternalExternalMasquerade -------------------------------------------------------------

for variant in MASQUERADE_VARIANTS:
    ruleset(
        f"TestInternalExternalMasquerade/{variant}",
        lambda variant=variant: (masquerade_services(), masquerade_config(variant)),
        masquerade_flows(variant),
    )


# --- the cases ----------------------------------------------------------------------------------

SKIPS: dict[str, str] = {
    "TestClusterIPGeneral/same port (SCTP)": "lab.probe sends only TCP and UDP: no SCTP client or listener",
}
# case -> what the kernel does and why (none at present: see the module docstring).
XFAILS: dict[str, str] = {}


@pytest.mark.parametrize(("name", "flow"), AGREEMENT.cases(SKIPS, XFAILS))
def test_flow(name: str, flow: Flow):
    assert_agrees(replay(rules_text(name), replay_setup(flow)), flow)
