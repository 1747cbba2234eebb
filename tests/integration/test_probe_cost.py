"""A probe reads the rules of only the nodes it crossed (lab/probe/observe.py `met`). Proof that no evidence is
lost: the same scenarios, every node's rules read after every probe anyway, and no rule moved on a node the probe
was not seen on."""

from __future__ import annotations

import pytest
from support.host import REPO

from lab.api import run_variant
from lab.describe.load import load_scenario
from lab.pipeline import cannot_run
from lab.probe import observe

SCENARIOS = ["nodeport-source-ip.yaml", "lb-local-from-pods.yaml", "hairpin.yaml", "metallb-bgp-ipip.yaml"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_no_rule_moves_on_a_node_a_probe_did_not_cross(name, monkeypatch, host_unchanged):
    met_by_probe: dict[str, set[str]] = {}
    chosen = observe.met

    def every_actor(probe, running, frames, rule_actors):  # noqa: ANN001, ANN202
        # Every connection of a probe with attempts: the summary holds all their rules.
        met_by_probe.setdefault(probe.name, set()).update(chosen(probe, running, frames, rule_actors))
        return list(rule_actors)

    monkeypatch.setattr(observe, "met", every_actor)
    checked = 0
    for topo in load_scenario(REPO / "topologies" / name).variants:
        if cannot_run(topo):
            continue
        met_by_probe.clear()
        for result in run_variant(topo).results:
            moved = {actor for actor, _ in result.observed.rules}
            assert moved <= met_by_probe[result.probe.name], (topo.variant_label, result.probe.name)
            checked += 1
    assert checked
