"""`expect: observe`: a probe with no expectation yet (what lab import writes) passes whatever the kernel did, and
says so in the tables; it cannot be mixed with what only a delivered probe is judged on."""

from __future__ import annotations

import pytest
from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario
from lab.judge.verdict import judge
from lab.probe.session import Observation
from lab.report.records import expectation_text

EXPECT = "    expect: {outcome: delivered, source: node2}\n"
OBSERVING = BASE.replace(EXPECT, "    expect: observe\n")


def test_every_outcome_passes(tmp_path):
    expected = load_scenario(write(tmp_path, OBSERVING)).variants[0].probes[0].expected
    assert expected.observe
    assert expectation_text(expected) == "anything (observe)"
    for outcome in ("delivered", "refused", "reset", "unreachable", "dropped", "accepted"):
        assert judge(expected, Observation(outcome, backend="web-0", source_ip="192.168.56.12")).ok, outcome


def test_written_as_an_outcome_too(tmp_path):
    text = BASE.replace(EXPECT, "    expect: [{when: {}, outcome: observe}]\n")
    assert load_scenario(write(tmp_path, text)).variants[0].probes[0].expected.observe


@pytest.mark.parametrize("field", ["backend: web-0", "source: client", "node: node1"])
def test_observe_judges_nothing_else(tmp_path, field):
    error = error_for(tmp_path, BASE.replace(EXPECT, f"    expect: {{outcome: observe, {field}}}\n"))
    assert error.field.endswith("expect.outcome")
    assert "observe accepts whatever happens" in error.message
