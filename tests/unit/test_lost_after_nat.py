"""A packet lost without a dropping rule is said to be lost after the last nat chain it met on that node, in
whichever backend the chain's writer wrote it (lab/probe/explain.py after_nat)."""

from __future__ import annotations

from lab.probe.evidence.base import RuleHit
from lab.probe.explain import after_nat


def _hit(table: str, chain: str) -> RuleHit:
    return RuleHit(table, chain, "-j ACCEPT", 1)


def test_the_last_nat_chain_on_the_node_is_named():
    hits = [
        ("node1", _hit("nat", "KUBE-SERVICES")),
        ("node1", _hit("nat", "KUBE-SEP-ABC")),
        ("node2", _hit("nat", "X")),
    ]
    assert after_nat(hits, "node1") == " after nat KUBE-SEP-ABC"


def test_a_nat_chain_of_the_other_backend_counts():
    hits = [("node1", _hit("nat", "KUBE-SERVICES")), ("node1", _hit("iptables-legacy nat", "CNI-HOSTPORT-DNAT"))]
    assert after_nat(hits, "node1") == " after nat CNI-HOSTPORT-DNAT"


def test_no_nat_chain_says_nothing():
    assert after_nat([("node1", _hit("filter", "FORWARD")), ("node2", _hit("nat", "X"))], "node1") == ""
