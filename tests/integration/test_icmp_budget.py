"""A REJECT the kernel does not answer, on the real kernel (tests/integration/topologies/icmp-budget.yaml, the
shape of topologies/udp-nodeport-redirect.yaml without the step between): the why names the cause the node's SNMP
counters show, the redirect in one case and the spent burst in the other, never the other's; with redirects off
the same datagram is refused, which proves the redirect was the cause."""

from __future__ import annotations

import pytest
from support.host import REPO

from lab.api import run_variant
from lab.describe.load import load_scenario
from lab.report.records import to_record

SCENARIO = REPO / "tests" / "integration" / "topologies" / "icmp-budget.yaml"
NO_REDIRECTS = "sysctl -qw net.ipv4.conf.all.send_redirects=0 net.ipv4.conf.eth0.send_redirects=0"


@pytest.fixture(scope="module")
def results():
    (topo,) = load_scenario(SCENARIO).variants
    return {r.probe.name: r for r in run_variant(topo).results}


def test_the_redirect_is_named_and_not_a_burst(results):
    observed = results["rejected-after-the-redirect"].observed
    assert observed.outcome == "dropped", observed.explanation
    said = observed.explanation
    assert "node1 sent no ICMP error: IcmpOutRateLimitHost +1 (its ICMP budget for 192.168.56.100 was spent" in said
    assert "node1 had counted an ICMP redirect for 192.168.56.100 (IcmpOutRedirects +1 at probe redirected, " in said
    assert "IcmpOutDestUnreachs" not in said and "this verdict depends on timing" in said
    assert ("node1", (("IcmpOutRateLimitHost", 1),)) in observed.counters
    assert ("IcmpOutRedirects", 1) in dict(results["redirected"].observed.counters)["node1"]


def test_the_spent_burst_is_named_and_not_a_redirect(results):
    assert results["burst"].observed.outcome == "refused"
    observed = results["rejected-after-the-burst"].observed
    assert observed.outcome == "dropped", observed.explanation
    said = observed.explanation
    assert "node2 sent no ICMP error: IcmpOutRateLimitHost +1" in said
    assert "node2 had counted ICMP errors to 192.168.56.100 (IcmpOutDestUnreachs +6 at probe burst, " in said
    assert "redirect" not in said


def test_the_counters_are_in_the_json_record(results):
    record = to_record(results["rejected-after-the-burst"])
    assert record["observed"]["counters"] == {"node2": {"IcmpOutRateLimitHost": 1}}


def test_without_redirects_the_same_datagram_is_refused(tmp_path, host_unchanged):
    text = SCENARIO.read_text().replace("    before:\n", f"    before:\n      - {{run: {NO_REDIRECTS}}}\n")
    (tmp_path / "s.yaml").write_text(text)
    (topo,) = load_scenario(tmp_path / "s.yaml").variants
    results = {
        r.probe.name: r.observed for r in run_variant(topo, only={"redirected", "rejected-after-the-redirect"}).results
    }
    assert "IcmpOutRedirects" not in dict(dict(results["redirected"].counters).get("node1", ()))
    assert results["rejected-after-the-redirect"].outcome == "refused", results[
        "rejected-after-the-redirect"
    ].explanation


def test_the_client_s_counters_are_read_too(host_unchanged):
    """A pod's own counters (its TCP segments) are read with the nodes': a kept connection's request no capture saw
    is judged by them (lab/probe/explain.py held_back)."""
    scenario = REPO / "topologies" / "tcp-endpoint-terminating.yaml"
    (topo,) = load_scenario(scenario, {"proxyMode": ["iptables"], "kubeVersion": ["1.31"]}).variants
    run = run_variant(topo, only={"open-stream", "stream-after-web-0-terminating"})
    assert len(run.results) == 2, run.skipped
    for result in run.results:
        client = dict(dict(result.observed.counters).get("client", ()))
        assert client.get("TcpOutSegs", 0) > 0, (result.probe.name, result.observed.counters)
