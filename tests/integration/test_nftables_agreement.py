"""kube-proxy's nftables packet-flow expectations, checked on the real kernel.

kube-proxy's nftables unit tests (pkg/proxy/nftables/proxier_test.go at kubernetes/kubernetes
81810de635aa13aa0a32992f6def3aa9d6025ebc) trace simulated packets through the rules with their
nftablesTracer (helpers_test.go), which runs filter-prerouting(-pre-dnat), nat-prerouting, applies
the DNAT, then filter-forward and filter-input. Here the same Services, EndpointSlices and flags are
rendered with render_nftables(...).script() (kube-proxy's `nft -f` transaction on a fresh node),
loaded with `nft -f` in a fresh node namespace, and every flow is a real TCP connection or UDP
datagram (lab.replay.run.replay_nft): the kernel's own trace of the first packet
(`nft monitor trace`) says which rules it met, and what the receiver saw says where it went. The
result is compared with kube-proxy's `output` (the endpoints reached, "DROP", "REJECT", or "" when
not NATed) and `masq` (the receiver saw another source than the one sent).

Every flow runs against each distinct transaction: kube-proxy 1.30, 1.31-1.33 (the same script:
see lab.render.kubeproxy.nftables), 1.34-1.35, 1.36 and 1.37 (a case without a one-endpoint Service gives
both the same script, "1.36-1.37"), so a case id starts with the versions it stands for. kube-proxy's tests
only know the 1.34-1.35 layout; the others are what those releases wrote (1.36-1.37: derived from the source,
docs/kubeproxy-versions.md), and their kernel result is expected to be the same unless listed below.

The node is the one of tests/integration/test_kubeproxy_agreement.py (read its docstring for why):
- addresses 192.168.0.2 (the node IP), 192.168.1.2, 192.168.99.11 (testNodeIPs, which the tracer
  takes for local: "fib daddr type local"); NodePorts are served on the node IP only, as
  NewFakeProxier's nodePortAddresses 192.168.0.2/32 (the "primary" default does the same);
- pod network 10.0.0.0/8 (NewFakeProxier's LocalTrafficDetector): every source in it (10.0.0.2,
  10.180.0.x) and every endpoint, local or not, is a pod on the node's cni0 bridge;
- ServiceCIDR 172.30.0.0/16 (NewFakeProxier's serviceCIDRs: cluster-ips-check drops traffic to
  unallocated addresses in it);
- clients outside the cluster (203.0.113.2, and 203.0.113.130 outside the LB source ranges) come in
  through the node's uplink; "same node to LBn, SNATted to LBn" comes from the node, which then owns
  the LB IP (Flow.node_also_has).

The Services are those of tests/support/cases.py (kube-proxy's iptables tests, which the
nftables tests copy), with NewFakeProxier's nftables flags; the terminating-endpoint cases of the
nftables tests (Local and Cluster) and their flows are their own.

Reading the kernel in kube-proxy's words:
- "REJECT": a rule whose statement is `reject` met the first packet (kube-proxy's reject-chain, or
  cluster-ips-check's "Reject traffic to invalid ports of ClusterIPs"); the kernel reports it as a
  drop after sending the ICMP error, so replay tells the two apart by the statement. From outside
  to an LB IP the node does not own, the client is not refused but times out: the node first sends
  it an ICMP redirect (it forwards the packet back out of the interface it came in by, every
  address of this lab being on-link), which uses up the per-host ICMP rate limit, so the
  port-unreachable is not sent (as in test_kubeproxy_agreement.py); the trace still shows the
  reject;
- "DROP": another rule with the verdict drop (firewall, no-endpoint-services' `drop`, unallocated
  ClusterIPs);
- "" (not NATed): the connection must really be delivered (to the node, or forwarded to the sink),
  not refused or lost.

Where the kernel and kube-proxy disagree (strict xfail), or the lab cannot send the flow (skip):

| case                                    | kube-proxy says   | kernel does    | why                         |
|-----------------------------------------|-------------------|----------------|-----------------------------|
| */TestClusterIPGeneral/same port (SCTP) | 10.180.0.1:53,    | (not sent:     | lab.probe has no SCTP       |
|                                         | 10.180.2.1:53     | skipped)       | client or listener          |
| 1.30 and 1.31-1.33/                     | 10.0.1.5:80,      | DROP, in       | kubernetes#131765: see      |
| TestTerminatingEndpointsTrafficPolicy-  | masq (what its    | filter-output, | below; fixed in 1.34 by     |
| Local/terminating endpoints on remote   | tracer says: it   | before DNAT    | #132456                     |
| node/node to LB, no locally-usable      | starts the node's |                |                             |
| endpoints (not in kube-proxy's test)    | packet in         |                |                             |
|                                         | prerouting)       |                |                             |

That last flow is not one of kube-proxy's: the node itself (or a hostNetwork pod) connects to the
LB IP of an eTP:Local Service whose only endpoint is on another node. kube-proxy means such traffic
to be short-circuited to all endpoints, masqueraded (the external chain's "masquerade local
traffic" / "short-circuit local traffic" rules), and its tracer agrees because it runs every packet
through filter-prerouting, nat-prerouting and filter-forward/input, never the output hooks. On the
kernel, a locally generated packet goes through the output hooks: in 1.30-1.33 filter-output sits at
priority -110, before nat-output's DNAT (-100), and jumps to service-endpoints-check, whose
no-endpoint-services map holds `1.2.3.4 . tcp . 80 : drop` (eTP:Local, no local endpoint). So the
packet is dropped with its LB destination before the external chain can run. 1.34+ (#132456) runs
filter-output at priority 0, after DNAT, and only the firewall check before it
(filter-output-pre-dnat), and the connection reaches 10.0.1.5:80 masqueraded, as kube-proxy says.
A pod's connection to the same LB IP is not affected in any version (replayed while writing this:
10.0.1.5:80, source kept): it crosses filter-forward, which runs after nat-prerouting's DNAT
whatever its priority, and the external chain short-circuits pod traffic (ClusterCIDR detector).

Every other flow agrees with kube-proxy, in every version. (The ported tests are IPv4 ones; the IPv6 proxier's
ruleset is compared as text with kube-proxy's IPv6 test in tests/golden/nftables/ipv6, and run on the kernel in
tests/integration/test_ipv6_runs.py.)
"""

from __future__ import annotations

import functools
from dataclasses import replace
from functools import partial

import pytest
from support.agreement import Agreement, Inputs, assert_agrees
from support.builders import ep, svc
from support.cases import (
    FAKE,
    MASQUERADE_VARIANTS,
    NODE_IPS,
    TEST_NODE_IP,
    TEST_NODE_IP_ALT,
    cluster_ip_general_services,
    load_balancer_service,
    masquerade_services,
    no_endpoints_service,
)
from support.flows import (
    EXT,
    POD,
    Flow,
    endpoints_deleted_flows,
    load_balancer_flows,
    masquerade_flows,
    no_endpoints_flows,
    replay_setup,
)

from lab.render.kubeproxy.nftables import NFTABLES_VERSIONS, render_nftables
from lab.render.kubeproxy.service import ProxyConfig
from lab.replay.run import replay_nft

# NewFakeProxier (nftables): pod CIDR 10.0.0.0/8, masquerade mark "0x4000", ServiceCIDR 172.30.0.0/16.
NFT_FAKE = ProxyConfig(FAKE.cluster_cidr, masquerade_mark=FAKE.masquerade_mark, service_cidrs=("172.30.0.0/16",))


def nft_masquerade_config(variant: str) -> ProxyConfig:
    masquerade_all, detector = MASQUERADE_VARIANTS[variant]
    return replace(NFT_FAKE, masquerade_all=masquerade_all, cluster_cidr=NFT_FAKE.cluster_cidr if detector else None)


AGREEMENT = Agreement()
ruleset = AGREEMENT.ruleset


@functools.cache
def script(name: str, version: str) -> str:
    inputs = AGREEMENT.inputs[name]
    assert inputs is not None
    services, config = inputs()
    return render_nftables(services, config, NODE_IPS, version).script()


def layouts(name: str) -> dict[str, str]:
    """Labels ("1.30", "1.31-1.33", ...) -> the version whose script stands for them: versions whose
    scripts are equal are replayed once."""
    groups: dict[str, list[str]] = {}
    for version in NFTABLES_VERSIONS:
        groups.setdefault(script(name, version), []).append(version)
    labels = {}
    for versions in groups.values():
        span = NFTABLES_VERSIONS[NFTABLES_VERSIONS.index(versions[0]) : NFTABLES_VERSIONS.index(versions[-1]) + 1]
        label = f"{versions[0]}-{versions[-1]}" if list(span) == versions else "+".join(versions)
        labels[versions[0] if len(versions) == 1 else label] = versions[0]
    return labels


NODE, NODE_ALT = TEST_NODE_IP, TEST_NODE_IP_ALT

# --- TestNoEndpointsReject ----------------------------------------------------------------------

ruleset(
    "TestNoEndpointsReject",
    lambda: ([no_endpoints_service()], NFT_FAKE),
    no_endpoints_flows(),
)

# --- TestClusterIPGeneral -----------------------------------------------------------------------

BOTH = "10.180.0.1:{0}, 10.180.2.1:{0}"
ruleset(
    "TestClusterIPGeneral",
    lambda: (cluster_ip_general_services(), NFT_FAKE),
    [
        Flow("simple clusterIP", "10.180.0.2", "172.30.0.41", 80, "10.180.0.1:80"),
        Flow("hairpin to cluster IP", "10.180.0.1", "172.30.0.41", 80, "10.180.0.1:80", masq=True),
        Flow("clusterIP with multiple endpoints", "10.180.0.2", "172.30.0.42", 80, BOTH.format(80)),
        Flow("clusterIP with TargetPort", "10.180.0.2", "172.30.0.42", 443, BOTH.format(8443)),
        Flow("same port (TCP)", "10.180.0.2", "172.30.0.42", 53, BOTH.format(5353)),
        Flow("same port (UDP)", "10.180.0.2", "172.30.0.42", 53, BOTH.format(53), proto="UDP"),
        Flow("same port (SCTP)", "10.180.0.2", "172.30.0.42", 53, BOTH.format(53), proto="SCTP"),
        Flow("TCP-only port does not match UDP traffic", "10.180.0.2", "172.30.0.42", 80, "REJECT", proto="UDP"),
        Flow("svc1 does not accept svc2's ports", "10.180.0.2", "172.30.0.41", 443, "REJECT"),
        Flow("packet to unallocated cluster ip", "10.180.0.2", "172.30.0.50", 80, "DROP"),
    ],
)

# --- TestLoadBalancer ---------------------------------------------------------------------------

ruleset("TestLoadBalancer", lambda: ([load_balancer_service()], NFT_FAKE), load_balancer_flows())

# --- TestNodePorts (IPv4) -----------------------------------------------------------------------

NODE_PORTS_VARIANTS = {  # id -> (--nodeport-addresses, NodePorts on the secondary IP too)
    "ipv4": ((), False),
    "ipv4, multiple nodeport-addresses": (("192.168.0.0/24", "192.168.1.0/24", "2001:db8::/64"), True),
    "all addresses (not in kube-proxy's test)": (("0.0.0.0/0",), True),
}


def node_ports_inputs(addresses: tuple[str, ...]) -> Inputs:
    endpoints = (ep("10.180.0.1"), ep("10.180.2.1", local=True))
    service = svc("ns1", "svc1", "172.30.0.41", node_port=3001, endpoints=endpoints)
    return [service], replace(NFT_FAKE, node_port_addresses=addresses)


for variant, (addresses, alt_allowed) in NODE_PORTS_VARIANTS.items():
    both = BOTH.format(80)
    ruleset(
        f"TestNodePorts/{variant}",
        partial(node_ports_inputs, addresses),
        [
            Flow("pod to cluster IP", POD, "172.30.0.41", 80, both),
            Flow("external to nodePort", EXT, NODE, 3001, both, True),
            Flow("node to nodePort", NODE, NODE, 3001, both, True),
            Flow("external to nodePort on secondary IP", EXT, NODE_ALT, 3001, both, True)
            if alt_allowed
            else Flow("secondary nodeIP ignores NodePorts", EXT, NODE_ALT, 3001, ""),
        ],
    )

# --- TestExternalTrafficPolicyLocal / Cluster, TestInternalTrafficPolicy --------------------------

AGREEMENT.add_traffic_policy_rulesets(NFT_FAKE)

# --- TestTerminatingEndpointsTrafficPolicyLocal / Cluster ---------------------------------------

READY = dict(ready=True, serving=True, terminating=False)
TERMINATING = dict(ready=False, serving=True, terminating=True)
GONE = dict(ready=False, serving=False, terminating=True)
# (externalTrafficPolicy, kube-proxy's case) -> (endpoints: IP, local, conditions; to the ClusterIP; to the LB IP;
# LB masq)
TERMINATING_CASES = {
    ("Local", "ready endpoints exist"): (
        [("10.0.1.1", True, READY), ("10.0.1.2", True, READY), ("10.0.1.3", True, TERMINATING),
         ("10.0.1.4", True, GONE), ("10.0.1.5", False, READY)],
        "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80", "10.0.1.1:80, 10.0.1.2:80", False),
    ("Local", "only terminating endpoints exist"): (
        [("10.0.1.2", True, TERMINATING), ("10.0.1.3", True, TERMINATING), ("10.0.1.4", True, GONE),
         ("10.0.1.5", False, READY)],
        "10.0.1.5:80", "10.0.1.2:80, 10.0.1.3:80", False),
    ("Local", "terminating endpoints on remote node"): (
        [("10.0.1.5", False, TERMINATING)], "10.0.1.5:80", "DROP", False),
    ("Local", "no usable endpoints on any node"): (
        [("10.0.1.5", True, GONE), ("10.0.1.5", False, GONE)], "REJECT", "REJECT", False),
    ("Cluster", "ready endpoints exist"): (
        [("10.0.1.1", True, READY), ("10.0.1.2", True, READY), ("10.0.1.3", False, TERMINATING),
         ("10.0.1.4", False, GONE), ("10.0.1.5", False, READY)],
        "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80", "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80", True),
    ("Cluster", "only terminating endpoints exist"): (
        [("10.0.1.2", True, TERMINATING), ("10.0.1.3", True, TERMINATING), ("10.0.1.4", False, GONE),
         ("10.0.1.5", False, TERMINATING)],
        "10.0.1.2:80, 10.0.1.3:80, 10.0.1.5:80", "10.0.1.2:80, 10.0.1.3:80, 10.0.1.5:80", True),
    ("Cluster", "terminating endpoints on remote node"): (
        [("10.0.1.5", False, TERMINATING)], "10.0.1.5:80", "10.0.1.5:80", True),
    ("Cluster", "no usable endpoints on any node"): (
        [("10.0.1.5", True, GONE), ("10.0.1.5", False, GONE)], "REJECT", "REJECT", False),
}  # fmt: skip
# Not in kube-proxy's test: the node itself (a hostNetwork pod) reaching the LB IP of an eTP:Local
# Service without local endpoints. kube-proxy's tracer starts every packet in prerouting, where the
# external chain short-circuits local traffic to all endpoints, masqueraded; see the module docstring.
NODE_TO_LB_WITHOUT_LOCAL_ENDPOINTS = Flow(
    "node to LB, no locally-usable endpoints (not in kube-proxy's test)", NODE, "1.2.3.4", 80, "10.0.1.5:80", True
)


def terminating_inputs(policy: str, case: str | None) -> Inputs:
    """kube-proxy's case, or (None) the same Service after its EndpointSlice was deleted."""
    endpoints = TERMINATING_CASES[(policy, case)][0] if case else []
    service = svc(
        "ns1", "svc1", "172.30.1.1", port_name="", load_balancer_ips=("1.2.3.4",), health_check_node_port=30000,
        external_policy=policy, endpoints=tuple(ep(ip, local=local, **cond) for ip, local, cond in endpoints),
    )  # fmt: skip
    return [service], NFT_FAKE


for (policy, case), (_, to_cluster_ip, to_lb, lb_masq) in TERMINATING_CASES.items():
    flows = [
        Flow("pod to clusterIP", POD, "172.30.1.1", 80, to_cluster_ip),
        Flow("external to LB", EXT, "1.2.3.4", 80, to_lb, lb_masq),
    ]
    if (policy, case) == ("Local", "terminating endpoints on remote node"):
        flows.append(NODE_TO_LB_WITHOUT_LOCAL_ENDPOINTS)
    ruleset(f"TestTerminatingEndpointsTrafficPolicy{policy}/{case}", partial(terminating_inputs, policy, case), flows)
for policy in ("Local", "Cluster"):
    # Every case ends by deleting the EndpointSlice: the same rules each time, so replayed once.
    ruleset(
        f"TestTerminatingEndpointsTrafficPolicy{policy}/endpoints deleted",
        partial(terminating_inputs, policy, None),
        endpoints_deleted_flows(),
    )

# --- TestInternalExternalMasquerade -------------------------------------------------------------

# kube-proxy's nftables test copies the iptables one, but for the localhost flows (no localhost NodePorts).
for variant in MASQUERADE_VARIANTS:
    ruleset(
        f"TestInternalExternalMasquerade/{variant}",
        lambda variant=variant: (masquerade_services(), nft_masquerade_config(variant)),
        masquerade_flows(variant, localhost=False),
    )


# --- the cases ----------------------------------------------------------------------------------

# Case ids without their versions.
SKIPS: dict[str, str] = {
    "TestClusterIPGeneral/same port (SCTP)": "lab.probe sends only TCP and UDP: no SCTP client or listener",
}
# Case id (with the versions) -> what the kernel does and why (see the module docstring).
PRE_DNAT_OUTPUT_CHECK = (
    "kernel: DROP. filter-output (priority -110) runs service-endpoints-check before nat-output's DNAT, and "
    "no-endpoint-services drops the LB IP (eTP:Local, no local endpoint) before the external chain can "
    "short-circuit local traffic: kubernetes#131765, fixed in 1.34 by #132456"
)
XFAILS: dict[str, str] = {
    f"{versions}/TestTerminatingEndpointsTrafficPolicyLocal/terminating endpoints on remote node/"
    f"{NODE_TO_LB_WITHOUT_LOCAL_ENDPOINTS.name}": PRE_DNAT_OUTPUT_CHECK
    for versions in ("1.30", "1.31-1.33")
}


@pytest.mark.parametrize(("name", "version", "flow"), AGREEMENT.cases(SKIPS, XFAILS, layouts))
def test_flow(name: str, version: str, flow: Flow):
    assert_agrees(replay_nft(script(name, version), replay_setup(flow)), flow)
