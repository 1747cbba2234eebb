"""kube-proxy's iptables goldens, replayed on the real kernel with their own packet flows.

kube-proxy's unit tests compare its iptables-restore payload with golden text (assertIPTablesRulesEqual)
and trace simulated packets through rules (runPacketFlowTests). The golden that has flows of its own is
TestOverallIPTablesRules' expected payload (tests/golden/iptables/overall_iptables_rules.txt): in
pkg/proxy/iptables/proxier_test.go at kubernetes/kubernetes 531be81208e2274ef42e72525a26610a9622bcdf,
TestTracePacket traces seven flows through that payload as a node holds it (the same chains and rules, with
kube-proxy's jumps from the built-in chains added, less the nfacct matches and the localhost NodePort
rules). The 1.27-cycle test file of the E golden (sanposhiho/kubernetes
059ce4e8a1d958959595b970acaf846259348518, same path) traces the same seven flows (TestTracePackets)
through the same rules as its TestOverallIPTablesRulesWithMultipleServices golden
(E/overall_iptables_rules_1.27.txt). The hand-derived C (1.24) and D (1.25-1.26) goldens are those inputs as
older kube-proxies write them, so they are replayed with the same flows too. The other goldens have no
flows: the 1.23-era tests (A, B) predate kube-proxy's tracer, and TestBadIPs and TestSyncProxyRulesRepeated
trace nothing.

Each golden is replayed as the node running that kube-proxy holds it: the payload unchanged (nfacct and
-m recent matches included; replay creates the nfacct objects as kube-proxy does), plus what
`lab replay --add-kube-jumps VERSION` adds: kube-proxy's jumps from the built-in chains, and for 1.24
kubelet's KUBE-MARK-DROP and KUBE-FIREWALL. The node is the fake proxier's (tests/support/flows.py:
REPLAY_NODE_IPS, pod network 10.0.0.0/8); every flow is a real TCP connection, and what the kernel did is
compared with kube-proxy's `output` and `masq` (support.flows.agree).

The flows (restated from TestTracePacket; the expected values are kube-proxy's):

| flow                         | from        | to                | output                        | masq  |
|------------------------------|-------------|-------------------|-------------------------------|-------|
| no match                     | 10.0.0.2    | 10.0.0.3:80       | ""                            | false |
| single endpoint              | 10.0.0.2    | 172.30.0.41:80    | 10.180.0.1:80                 | false |
| multiple endpoints           | 10.0.0.2    | 172.30.0.44:80    | 10.180.0.4:80, 10.180.0.5:80  | false |
| LOCAL, KUBE-MARK-MASQ        | 192.168.0.2 | 192.168.99.22:80  | 10.180.0.2:80                 | true  |
| DROP                         | 203.0.113.2 | 192.168.99.22:80  | DROP                          | false |
| ACCEPT (NodePortHealthCheck) | 192.168.0.2 | 192.168.0.2:30000 | ACCEPT                        | false |
| REJECT                       | 10.0.0.2    | 172.30.0.46:80    | REJECT                        | false |

Where the kernel differs from kube-proxy's expectation (strict xfail):

| golden   | flow | kube-proxy says | kernel does                                           |
|----------|------|-----------------|-------------------------------------------------------|
| C (1.24) | DROP | DROP            | forwards the packet, unNATed, to 192.168.99.22 ("")   |

  Why: kube-proxy 1.24 only marks the packet (KUBE-SVL-* -> KUBE-MARK-DROP) for kubelet's KUBE-FIREWALL,
  which kubelet hooks into INPUT and OUTPUT only. An external IP the node does not own is forwarded
  (FORWARD), where nothing drops the mark, so the connection reaches 192.168.99.22. kube-proxy's tracer
  takes the mark for a drop. 1.25 replaced the mark with DROP rules in filter KUBE-EXTERNAL-SERVICES,
  which FORWARD jumps to (#110289), and D and E agree.

Every other flow of every golden agrees (27 of 28).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from support.agreement import Agreement, assert_agrees
from support.cases import TEST_EXTERNAL_CLIENT, TEST_NODE_IP
from support.flows import POD, Flow, agree, replay_setup

from lab.replay.run import replay

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "iptables"

# golden -> the kube-proxy version that writes it (whose jumps --add-kube-jumps adds)
GOLDENS = {
    "overall_iptables_rules.txt": "1.31",
    "E/overall_iptables_rules_1.27.txt": "1.27",
    "D/overall_iptables_rules.txt": "1.26",
    "C/overall_iptables_rules.txt": "1.24",
}

TRACE_PACKET_FLOWS = [
    Flow("no match", POD, "10.0.0.3", 80, ""),
    Flow("single endpoint", POD, "172.30.0.41", 80, "10.180.0.1:80"),
    Flow("multiple endpoints", POD, "172.30.0.44", 80, "10.180.0.4:80, 10.180.0.5:80"),
    Flow("LOCAL, KUBE-MARK-MASQ", TEST_NODE_IP, "192.168.99.22", 80, "10.180.0.2:80", masq=True),
    Flow("DROP", TEST_EXTERNAL_CLIENT, "192.168.99.22", 80, "DROP"),
    Flow("ACCEPT (NodePortHealthCheck)", TEST_NODE_IP, TEST_NODE_IP, 30000, "ACCEPT"),
    Flow("REJECT", POD, "172.30.0.46", 80, "REJECT"),
]

# case -> what the kernel does and why (see the module docstring)
XFAILS = {
    "C/overall_iptables_rules.txt/DROP": "1.24 only marks it for kubelet's KUBE-FIREWALL, which is not on FORWARD",
}


@functools.cache
def golden(name: str) -> str:
    return (GOLDEN / name).read_text()


GOLDEN_FLOWS = Agreement()
for _name in GOLDENS:
    GOLDEN_FLOWS.ruleset(_name, None, TRACE_PACKET_FLOWS)


@pytest.mark.parametrize(("name", "flow"), GOLDEN_FLOWS.cases(xfails=XFAILS))
def test_golden_flow(name: str, flow: Flow):
    assert_agrees(replay(golden(name), replay_setup(flow), kube_jumps=GOLDENS[name]), flow)


def test_the_1_24_drop_flow_is_forwarded_unchanged():
    """The one difference, as it is: no rule drops the marked packet, the destination answers."""
    flow = next(flow for flow in TRACE_PACKET_FLOWS if flow.name == "DROP")
    result = replay(golden("C/overall_iptables_rules.txt"), replay_setup(flow), kube_jumps="1.24")
    assert (result.outcome, result.output, result.masq) == ("forwarded", "", False), result.as_json()
    assert any("-j KUBE-MARK-DROP" in line for line in result.trace), result.trace


def test_the_golden_alone_is_refused():
    flow = TRACE_PACKET_FLOWS[1]
    with pytest.raises(Exception, match="no built-in chain .* reaches kube-proxy's chains"):
        replay(golden("overall_iptables_rules.txt"), replay_setup(flow))


def test_session_affinity_of_the_golden_is_reported():
    """svc5 of TestOverallIPTablesRules has sessionAffinity ClientIP (timeout 10800 s), one endpoint."""
    flow = Flow("pod to svc5", POD, "172.30.0.45", 80, "10.180.0.3:80")
    result = replay(golden("overall_iptables_rules.txt"), replay_setup(flow), kube_jumps="1.31")
    assert agree(result, flow), result.as_json()
    assert result.affinity is not None
    assert result.affinity.as_json() == {
        "recent": "KUBE-SEP-I77PXRDZVX7PMWMN",
        "seconds": 10800,
        "sticky": True,
        "endpoint": "10.180.0.3:80",
    }
