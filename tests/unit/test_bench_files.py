"""The scenarios `lab bench` runs without a file argument exist and load (a moved module once lost them)."""

from __future__ import annotations

from lab.bench.stages import CATALOGUE, DEFAULT
from lab.bench.steps import SCENARIO
from lab.describe.load import load_scenario


def test_bench_scenarios_load():
    for path in (DEFAULT, CATALOGUE / "lb-local-from-pods.yaml", SCENARIO):
        assert load_scenario(path).variants, path
    (topo,) = load_scenario(SCENARIO).variants
    assert [len(p.before) for p in topo.probes] == [0, 1] and topo.probes[0].source_port
