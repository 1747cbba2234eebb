"""A probe's `question:` (source or fate) is validated like every field, and its one-line answer is built from the
observation and the translation chain it is given: other evidence, another answer. (What the kernel does is
checked in tests/integration/test_seed_answers.py, against each field report's conclusion.)"""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario
from lab.judge.results import ProbeResult
from lab.judge.verdict import Verdict
from lab.probe.diagnosis import DNAT, MASQUERADE, Diagnosis, Step
from lab.probe.evidence.base import RuleHit
from lab.probe.observation import Observation
from lab.render.kubeproxy.because import Setting
from lab.report.answer import answer

CLUSTER = Setting("externalTrafficPolicy", "Cluster", "Service default/web")
MASQUERADED = Step(
    MASQUERADE,
    "node2",
    "nat KUBE-POSTROUTING",
    "masqueraded",
    setting=CLUSTER,
    source=("192.168.56.100", "192.168.56.12"),
)
CHOSEN = Step(DNAT, "node2", "nat KUBE-SEP-X", "DNATed by nat KUBE-SEP-X to 10.244.1.2:8080 (web-0)")
DROP = RuleHit(
    "filter", "KUBE-EXTERNAL-SERVICES", '-m comment --comment "default/web:http has no local endpoints" -j DROP', 1
)


@pytest.mark.parametrize("value", ["where", "Source", "true", "[source]"])
def test_a_question_other_than_source_or_fate_is_refused_in_words(tmp_path, value):
    error = str(error_for(tmp_path, BASE + f"    question: {value}\n"))
    assert "probes[0].question" in error and "expected 'source' or 'fate'" in error, error


def result(tmp_path, question: str, observed: Observation) -> ProbeResult:
    (topo,) = load_scenario(write(tmp_path, BASE + f"    question: {question}\n")).variants
    probe = topo.probes[0]
    assert probe.question == question
    return ProbeResult(topo, probe, observed, Verdict(True))


def test_source_names_the_address_the_node_and_the_setting_that_rewrote_it(tmp_path):
    seen = Observation(
        "delivered", "web-0", "node1", "192.168.56.12", "node2", diagnosis=Diagnosis((CHOSEN, MASQUERADED))
    )
    said = answer(result(tmp_path, "source", seen))
    assert said == "web-0 saw node2 (192.168.56.12): masqueraded on node2: externalTrafficPolicy Cluster"


def test_source_kept_is_said_the_clients_own(tmp_path):
    seen = Observation("delivered", "web-0", "node1", "192.168.56.100", "client", diagnosis=Diagnosis((CHOSEN,)))
    said = answer(result(tmp_path, "source", seen))
    assert said == "web-0 saw client (192.168.56.100): the client's own address, no step on the way rewrote it"


def test_source_of_each_endpoint_reached_is_grouped(tmp_path):
    masqueraded = Observation(
        "delivered", "web-0", "node1", "192.168.56.12", "node2", diagnosis=Diagnosis((MASQUERADED,))
    )
    members = (masqueraded, replace(masqueraded, backend="web-1"))
    seen = replace(masqueraded, members=members)
    said = answer(result(tmp_path, "source", seen))
    assert said.startswith("web-0, web-1 saw node2 (192.168.56.12): masqueraded on node2"), said


def test_a_source_question_of_a_connection_not_delivered_says_its_fate(tmp_path):
    seen = Observation("dropped", rules=(("node2", DROP),))
    said = answer(result(tmp_path, "source", seen))
    assert said == 'dropped on node2 by filter KUBE-EXTERNAL-SERVICES ("default/web:http has no local endpoints")'


def test_fate_of_a_delivered_connection_names_the_backend_its_node_and_the_choice(tmp_path):
    seen = Observation("delivered", "web-0", "node1", diagnosis=Diagnosis((CHOSEN,)))
    said = answer(result(tmp_path, "fate", seen))
    assert said == "delivered by web-0 on node1; node2: DNATed by nat KUBE-SEP-X to 10.244.1.2:8080 (web-0)"


def test_fate_without_a_dropping_rule_is_what_the_captures_said(tmp_path):
    seen = Observation("dropped", explanation="the answer reached the client from 10.0.0.1:30000, not 10.0.0.9:80")
    said = answer(result(tmp_path, "fate", seen))
    assert said == "dropped: the answer reached the client from 10.0.0.1:30000, not 10.0.0.9:80"


def test_an_nftables_verdict_map_without_a_comment_is_said_whole(tmp_path):
    hit = RuleHit("kube-proxy", "service-endpoints-check", "ip daddr . th dport vmap @no-endpoint-services", 1, "DROP")
    said = answer(result(tmp_path, "fate", Observation("dropped", rules=(("node2", hit),))))
    assert said.endswith("service-endpoints-check: ip daddr . th dport vmap @no-endpoint-services"), said


def test_a_probe_without_a_question_has_no_answer(tmp_path):
    (topo,) = load_scenario(write(tmp_path, BASE)).variants
    seen = Observation("delivered", "web-0", "node1", "192.168.56.12", "node2", diagnosis=Diagnosis((MASQUERADED,)))
    assert answer(ProbeResult(topo, topo.probes[0], seen, Verdict(True))) == ""


def test_several_connections_through_several_entries_say_each_source_by_its_entry(tmp_path):
    seen = Observation(
        "delivered",
        "web-0|web-1",
        "node1",
        "192.168.56.11|10.244.1.0",
        "node1|node2/tunl0",
        source_by_entry="entry|entry/tunl0",
        diagnosis=Diagnosis((MASQUERADED,)),
    )
    said = answer(result(tmp_path, "source", seen))
    assert said == (
        "web-0|web-1 saw entry|entry/tunl0 (node1, node2/tunl0); the connection shown: masqueraded on node2: "
        "externalTrafficPolicy Cluster"
    )
