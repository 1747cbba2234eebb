"""unreachable and reset observed on the kernel, each with what the kernel said: the ICMP error's type, code
and sender, the RST and the rule that sent it (topologies/outcomes.yaml; its expectations are checked as
scenario items too)."""

from __future__ import annotations

import pytest
from support.host import REPO

from lab.api import run_variant
from lab.describe.load import load_scenario

OUTCOMES = REPO / "tests" / "integration" / "topologies" / "outcomes.yaml"
GATEWAY = "ICMP net unreachable (type 3 code 0) from 192.168.56.1 (the underlay's gateway, outside the cluster: not "


@pytest.fixture(scope="module")
def why() -> dict[str, tuple[str, str]]:
    (topo,) = load_scenario(OUTCOMES, {"proxyMode": ["iptables"]}).variants
    run = run_variant(topo)
    return {r.probe.name: (r.observed.outcome, r.observed.explanation) for r in run.results}


def test_the_gateway_answers_a_host_and_a_pod_alike_and_is_named(why):
    for probe in ("unallocated-service-ip-from-host", "unallocated-service-ip-from-pod"):
        outcome, said = why[probe]
        assert outcome == "unreachable" and said.startswith(GATEWAY), said
    carried = "node2/veth-tester out carried 192.168.56.1 > 10.244.2.2 icmp type 3 code 0"
    assert why["unallocated-service-ip-from-pod"][1].endswith(carried)


def test_a_datagram_hears_of_icmp_errors_too(why):
    for probe in ("unallocated-service-ip-from-host-udp", "unallocated-service-ip-from-pod-udp"):
        outcome, said = why[probe]
        assert outcome == "unreachable" and said.startswith(GATEWAY), said


def test_a_routing_loop_ends_in_time_exceeded_from_a_node(why):
    outcome, said = why["routing-loop"]
    assert outcome == "unreachable", said
    assert said.startswith("ICMP time exceeded (TTL) in transit (type 11 code 0) from 192.168.56.1"), said


def test_a_rst_to_the_syn_is_refused_and_a_rst_once_established_is_reset(why):
    outcome, said = why["closed-port-on-pod"]
    assert outcome == "refused" and said.startswith("the SYN was answered with a RST: "), said
    outcome, said = why["reset-once-established"]
    assert outcome == "reset", said
    assert said.startswith("rejected on node1 by filter FORWARD: ") and "--reject-with tcp-reset" in said, said
    assert said.endswith("the client got: connection reset (RST) after it was established"), said
