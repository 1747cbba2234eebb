"""A probe without `attempts` reaches every endpoint the load balancing chose among and is judged over that set:
its verdict, reasons and observed text are the same whichever order the draw gave the endpoints in; one endpoint,
an explicit `attempts`, one flow or ClientIP affinity keep one connection. How the spread is read from each proxy
mode's rules, and how the set reads in the tables."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from support.scenario import BASE, ScriptedSession, write

from lab.describe.load import load_scenario
from lab.judge.attempts import MAX_SPREAD, run_probe
from lab.judge.results import ProbeResult
from lab.probe.choices import enough_attempts, ipvs_spread, jump_choices, numgen_spread, picking_chain
from lab.probe.evidence.base import RuleHit
from lab.probe.observation import Observation
from lab.report.records import _NOTHING_OBSERVED, observed_text, to_record

NODE2 = "192.168.56.12"
CNI0 = "10.244.1.1"


def seen(backend: str, source: str, source_ip: str, spread: int = 2) -> Observation:
    return Observation(
        "delivered", backend=backend, node="node1", source=source, source_ip=source_ip, entry="node2", spread=spread
    )


KEPT = seen("web-0", "node2", NODE2)  # the source the probe expects (BASE: `source: node2`)
BRIDGED = seen("web-1", "node1/cni0", CNI0)


def topology(tmp_path, text: str = BASE):
    (topo,) = load_scenario(write(tmp_path, text)).variants
    return topo


def judged(topo, observations: list[Observation]):
    session = ScriptedSession(observations)
    observed, verdict = run_probe(session, topo.probes[0], topo)  # type: ignore[arg-type]
    return observed, verdict, session.observations


def test_the_set_is_judged_member_by_member_and_said_the_same_in_any_order(tmp_path):
    topo = topology(tmp_path)
    assert topo.probes[0].every_choice
    said = set()
    for order in itertools.permutations([KEPT, KEPT, BRIDGED]):
        observed, verdict, left = judged(topo, list(order) + [KEPT])
        # It stops once both endpoints answered: the connections after that were never sent.
        assert 4 - len(left) == next(i for i in (2, 3) if len({o.backend for o in order[:i]}) == 2)
        result = ProbeResult(topo, topo.probes[0], observed, verdict)
        said.add((verdict, observed_text(result), observed.outcome, observed.backend, observed.path[1:3]))
    assert len(said) == 1, said
    verdict, text, outcome, backend, _ = said.pop()
    assert not verdict.ok
    assert verdict.reasons == (f"by web-1: expected source node2 ({NODE2}), backend saw node1/cni0 ({CNI0})",)
    assert text == f"delivered by web-0 from node2 ({NODE2}), by web-1 from node1/cni0 ({CNI0})"
    assert (outcome, backend) == ("delivered", "web-0|web-1")


def test_a_set_whose_every_member_passes_passes(tmp_path):
    topo = topology(tmp_path)
    observed, verdict, _ = judged(topo, [KEPT, replace(KEPT, backend="web-1")])
    assert verdict.ok, verdict.reasons
    record = to_record(ProbeResult(topo, topo.probes[0], observed, verdict))
    assert [m["backend"] for m in record["observed"]["members"]] == ["web-0", "web-1"]


def test_outcomes_that_differ_are_each_said(tmp_path):
    topo = topology(tmp_path)
    refused = Observation("refused", entry="node2", spread=2, rules=(("node2", RuleHit("nat", "KUBE-SEP-B", "", 1)),))
    observed, verdict, _ = judged(topo, [refused, KEPT])
    result = ProbeResult(topo, topo.probes[0], observed, verdict)
    assert observed_text(result) == f"delivered by web-0 from node2 ({NODE2}), refused"
    assert observed.outcome == "delivered|refused"
    assert verdict.reasons == ("KUBE-SEP-B: expected delivered, got refused",)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (BASE, "one endpoint to choose"),
        (BASE.replace("    expect:", "    attempts: 1\n    expect:"), "attempts given"),
        (BASE.replace("    expect:", "    sourcePort: 40000\n    expect:"), "one flow"),
        (
            BASE.replace(
                "      selector: {app: web}\n", "      selector: {app: web}\n      sessionAffinity: ClientIP\n"
            ),
            "affinity",
        ),
    ],
)
def test_one_connection_where_the_draw_cannot_differ(tmp_path, text, why):
    spread = 1 if why == "one endpoint to choose" else 2
    assert text != BASE or why == "one endpoint to choose"
    _, verdict, left = judged(topology(tmp_path, text), [replace(KEPT, spread=spread), BRIDGED])
    assert verdict.ok and left == [BRIDGED], why


def test_a_draw_that_never_gives_the_other_endpoint_stops_at_enough_attempts(tmp_path):
    n = enough_attempts(2)
    observed, verdict, left = judged(topology(tmp_path), [KEPT] * (n + 1))
    assert len(left) == 1 and verdict.ok
    assert observed.path[0] == f"{n} connections reached 1 of the 2 endpoints the draw chose among"


def test_enough_attempts_misses_an_endpoint_less_than_once_in_a_million_runs():
    for spread in (2, 3, 5, 10):
        n = enough_attempts(spread)
        assert spread * (1 - 1 / spread) ** n < 1e-6 <= spread * (1 - 1 / spread) ** (n - 1)
    assert enough_attempts(1) == 1


IPTABLES_NAT = """\
-A KUBE-SVC-X -m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-A --mask 255.255.255.255 --rsource -j KUBE-SEP-A
-A KUBE-SVC-X -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-A
-A KUBE-SVC-X -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-B
-A KUBE-SVC-X -j KUBE-SEP-C
-A KUBE-SVC-Y -j KUBE-SEP-D
-A KUBE-SEP-A -p tcp -m tcp -j DNAT --to-destination 10.244.1.2:8080
"""


def test_iptables_spread_is_the_service_chain_s_endpoint_chains():
    last = RuleHit("nat", "KUBE-SVC-X", "-j KUBE-SEP-C", 1)
    assert picking_chain(last) == "KUBE-SVC-X"
    assert (
        picking_chain(RuleHit("nat", "KUBE-SEP-A", "-p tcp -m tcp -j DNAT --to-destination 10.244.1.2:8080", 1)) is None
    )
    assert jump_choices(IPTABLES_NAT, "KUBE-SVC-X") == {"KUBE-SEP-A", "KUBE-SEP-B", "KUBE-SEP-C"}
    assert jump_choices(IPTABLES_NAT, "KUBE-SVC-Y") == {"KUBE-SEP-D"}


def test_nftables_spread_is_numgen_s_modulus():
    vmap = "numgen random mod 3 vmap { 0 : goto endpoint-A, 1 : goto endpoint-B, 2 : goto endpoint-C }"
    assert numgen_spread([RuleHit("ip kube-proxy", "service-X", vmap, 1)]) == 3
    assert numgen_spread([RuleHit("ip kube-proxy", "services", "ip daddr . meta l4proto . th dport vmap @x", 1)]) == 1


def test_ipvs_spread_counts_the_virtual_server_s_real_servers_of_some_weight():
    saved = """\
-A -t 10.96.0.10:80 -s rr
-a -t 10.96.0.10:80 -r 10.244.1.2:8080 -m -w 1
-a -t 10.96.0.10:80 -r 10.244.2.2:8080 -m -w 1
-a -t 10.96.0.10:80 -r 10.244.2.3:8080 -m -w 0
-a -u 10.96.0.10:80 -r 10.244.2.4:8080 -m -w 1
-A -t [fd00::a]:80 -s rr
-a -t [fd00::a]:80 -r [fd00:10:244:1::2]:8080 -m -w 1
"""
    assert ipvs_spread(saved, "TCP", "10.96.0.10", 80) == 2
    assert ipvs_spread(saved, "TCP", "fd00::a", 80) == 1
    assert ipvs_spread(saved, "TCP", "10.96.0.99", 80) == 1


def test_a_draw_among_more_endpoints_than_a_probe_reaches_keeps_one_connection_and_says_so(tmp_path):
    # Reaching each of 3 000 endpoints would take about 25 000 connections: one is sent, said as one draw of many.
    topo = topology(tmp_path)
    wide = replace(KEPT, spread=MAX_SPREAD + 1)
    observed, verdict, left = judged(topo, [wide, BRIDGED])
    assert len(left) == 1  # the second connection was never sent
    assert verdict.ok and observed.backend == "web-0"
    assert observed.path[0].startswith(f"one connection: the draw chose among {MAX_SPREAD + 1} endpoints")


def test_a_skipped_probes_record_has_every_key_a_run_probes_has(tmp_path):
    # A reader indexes both alike: a key a feature adds to the run record is added to the skipped one too.
    topo = topology(tmp_path)
    observed, verdict, _ = judged(topo, [KEPT, BRIDGED])
    record = to_record(ProbeResult(topo, topo.probes[0], observed, verdict))
    assert set(record["observed"]) == set(_NOTHING_OBSERVED)
