"""sameBackend: several connections are judged together, and one that reached another backend fails the probe;
the field is refused where it cannot be judged."""

from __future__ import annotations

import pytest
from support.scenario import BASE, ScriptedSession, error_for, write

from lab.describe.load import load_scenario
from lab.judge.attempts import run_probe
from lab.probe.session import Observation

SAME = BASE.replace(
    "    expect: {outcome: delivered, source: node2}\n",
    "    attempts: 3\n    expect: {outcome: delivered, sameBackend: true}\n",
)


def seen(*backends: str) -> list[Observation]:
    return [Observation("delivered", backend=b, node="node1", entry="node2") for b in backends]


@pytest.mark.parametrize(
    ("backends", "reason"),
    [
        (("web-1", "web-1", "web-1"), None),
        (("web-1", "web-0", "web-1"), "expected the same backend on every attempt, got web-0 ×1, web-1 ×2"),
    ],
)
def test_attempts_reaching_two_backends_fail(tmp_path, backends, reason):
    (topo,) = load_scenario(write(tmp_path, SAME)).variants
    _, verdict = run_probe(ScriptedSession(seen(*backends)), topo.probes[0], topo)  # type: ignore[arg-type]
    assert verdict.ok is (reason is None)
    assert reason is None or reason in verdict.reasons, verdict.reasons


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (SAME.replace("    attempts: 3\n", ""), "probes[0].expect.sameBackend", "give attempts: N"),
        (
            SAME.replace("outcome: delivered, sameBackend", "outcome: refused, sameBackend"),
            "probes[0].expect.outcome",
            "sameBackend only make sense when delivered",
        ),
    ],
)
def test_same_backend_is_refused_where_it_cannot_be_judged(tmp_path, text, field, message):
    error = error_for(tmp_path, text)
    assert error.field == field and message in error.message, str(error)
