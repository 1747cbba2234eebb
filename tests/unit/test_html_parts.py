"""The HTML report's pure parts: the hop table marks the addresses a NAT changed, and scenario text reaches dot
and the page escaped (what Chromium makes of the page is tests/integration/test_html_report.py)."""

from __future__ import annotations

from dataclasses import replace

from support.scenario import BASE, write

from lab.describe.load import load_scenario
from lab.judge.results import ProbeResult
from lab.judge.verdict import Verdict
from lab.probe.evidence.base import RuleHit
from lab.probe.observation import Hop, Observation
from lab.report.drawing import path_actors, topology_dot
from lab.report.html import _e, hop_rows, rule_rows

HOPS = (
    Hop("node2", "eth0", False, "192.168.56.100:40000 > 192.168.56.12:30080 tcp [S]"),
    Hop("node2", "eth0", True, "192.168.56.12:20000 > 10.244.1.2:8080 tcp [S]"),
    Hop("node1", "veth-web-0", True, "192.168.56.12:20000 > 10.244.1.2:8080 tcp [S]"),
    Hop("node1", "veth-web-0", False, "10.244.1.2:8080 > 192.168.56.12:20000 tcp [S.]"),
    Hop("node2", "eth0", True, "192.168.56.12:30080 > 192.168.56.100:40000 tcp [S.]"),
)


def test_hops_mark_what_a_nat_changed_in_each_direction():
    rows = hop_rows(HOPS)
    marked = [row.count(' nat"') for row in rows]
    # DNAT and SNAT on node2 (both addresses), nothing on the way to the pod, the answer un-NATed on node2.
    assert marked == [0, 2, 0, 0, 2]


def test_the_path_colours_actors_in_the_order_first_seen(tmp_path):
    (topo,) = load_scenario(write(tmp_path, BASE)).variants
    assert path_actors(HOPS) == ["node2", "node1"]
    dot = topology_dot(topo, [HOPS], "client", {"web-0"})
    assert '"a:node2" [label="node2 (1)' in dot and '"a:node1" [label="node1 (2)' in dot
    assert '"a:node2" -- "a:node1" [color=' in dot


def test_text_from_a_scenario_is_escaped():
    assert _e('<script>"x"</script>') == "&lt;script&gt;&quot;x&quot;&lt;/script&gt;"


def test_every_connection_of_a_probe_is_drawn_numbered(tmp_path):
    (topo,) = load_scenario(write(tmp_path, BASE)).variants
    through_node1 = (Hop("node1", "eth0", False, "192.168.56.100:40001 > 192.168.56.11:30080 tcp [S]"),)
    dot = topology_dot(topo, [HOPS, through_node1, HOPS], "client", {"web-0"})
    # Connections #1 and #3 took one route (client, node2, node1), #2 another (client, node1).
    assert '"a:client" -- "a:node2" [' in dot and 'label="#1 #3"' in dot
    assert '"a:client" -- "a:node1" [' in dot and 'label="#2"' in dot
    assert '"a:node2" [label="node2 (#1 #3)' in dot and '"a:node1" [label="node1 (#1 #2 #3)' in dot


def test_the_rule_that_dropped_the_probe_is_marked(tmp_path):
    (topo,) = load_scenario(write(tmp_path, BASE)).variants
    seen = RuleHit("filter", "INPUT", "-j KUBE-EXTERNAL-SERVICES", 1)
    drop = RuleHit("filter", "KUBE-EXTERNAL-SERVICES", "-p tcp --dport 30080 -j DROP", 1)
    observed = Observation(outcome="dropped", rules=(("node2", seen), ("node2", drop)))
    result = ProbeResult(topo, topo.probes[0], observed, Verdict(False, ("expected delivered, got dropped",)))
    rows = rule_rows(result)
    assert 'class="dropper"' not in rows[0] and rows[1].startswith('<tr class="dropper">') and "dropped it" in rows[1]
    delivered = replace(result, observed=replace(observed, outcome="delivered"))
    assert not any("dropper" in row for row in rule_rows(delivered))


def test_the_kernel_counters_are_shown_under_the_why(tmp_path):
    from lab.report.html import _probe

    (topo,) = load_scenario(write(tmp_path, BASE)).variants
    counted = (("node2", (("IcmpOutRateLimitHost", 1), ("IcmpOutDestUnreachs", 6))),)
    observed = Observation("dropped", explanation="node2 sent no ICMP error", counters=counted)
    html = _probe(ProbeResult(topo, topo.probes[0], observed, Verdict(False)), tmp_path)
    why = html.index("<p>why: node2 sent no ICMP error</p>")
    shown = "kernel counters that moved: node2: IcmpOutRateLimitHost +1, IcmpOutDestUnreachs +6"
    assert html.index(shown) > why


def test_a_dual_stack_actor_is_drawn_with_an_address_of_each_family():
    dual = "tests/fixtures/dualstack/dual-stack-nodeport.yaml"
    (topo,) = load_scenario(dual, {"proxyMode": ["iptables"]}).variants
    dot = topology_dot(topo)
    for label in (
        "gateway 192.168.56.1, fd00:56::1",
        "eth0 192.168.56.12, fd00:56::12",
        "cni0 10.244.2.1, fd00:10:244:2::1",
        "pods 10.244.2.0/24, fd00:10:244:2::/64",
        "toolbox\\n10.244.2.2, fd00:10:244:2::2",
        "client (host)\\n192.168.56.100, fd00:56::100",
    ):
        assert label in dot, label
