"""A probe's diagnosis reads why each node's rules were written (lab/probe/explain.py, RuleReasons). For the
workload the cluster was built with, those are the reasons render gave beside the rules it loaded (the pipeline
hands them to the probe session): asking again rendered each node alone, seconds a probe at 100 × 100. They must
be what rendering the node alone gives, ip-masq-agent's included; a workload a step changed is rendered afresh."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lab.bench.cluster import cluster_scenario
from lab.describe.load import load_scenario
from lab.probe import explain
from lab.probe.explain import RuleReasons
from lab.render.dataplane import render, rule_reasons
from lab.render.kubeproxy.nftables import check_nftables_version

CATALOGUE = Path(__file__).parents[2] / "topologies"


def _bench_cluster(tmp_path: Path):  # noqa: ANN202
    path = tmp_path / "cluster.yaml"
    path.write_text(cluster_scenario(3, 4))
    (topo,) = load_scenario(path).variants
    return topo


def _unrendered(*_: object) -> tuple:
    raise AssertionError("rendered again")


@pytest.mark.parametrize(
    "topo",
    [
        pytest.param("bench", id="bench-cluster"),
        *(
            pytest.param(t, id=f"lb-loopback-internal-lb-{i}")
            for i, t in enumerate(load_scenario(CATALOGUE / "lb-loopback-internal-lb.yaml").variants)
            if t.cluster.proxy_mode != "nftables" or not check_nftables_version(t.cluster.kube_version)
        ),
    ],
)
def test_rendered_reasons_are_each_node_rendered_alone(topo, tmp_path, monkeypatch):
    topo = _bench_cluster(tmp_path) if topo == "bench" else topo
    alone = {node.name: RuleReasons().of(topo, node.name) for node in topo.nodes}
    reasons = RuleReasons()
    reasons.rendered(topo, render(topo))
    monkeypatch.setattr(explain, "rule_reasons", _unrendered)
    assert {node.name: reasons.of(topo, node.name) for node in topo.nodes} == alone
    assert any(alone.values())


def test_a_changed_workload_is_rendered_afresh(tmp_path):
    topo = _bench_cluster(tmp_path)
    reasons = RuleReasons()
    reasons.rendered(topo, render(topo))
    fewer = replace(topo, services=())
    assert reasons.of(fewer, "node0") == rule_reasons(fewer, "node0")
    assert reasons.of(fewer, "node0") != reasons.of(topo, "node0")


def test_a_node_s_reasons_are_indexed_once_per_workload(tmp_path, monkeypatch):
    """Every attempt of every probe asks for a crossed node's reasons indexed by chain; indexing them anew each time
    cost a sliced import's node (120 000 reasons) minutes of probing."""
    topo = _bench_cluster(tmp_path)
    reasons = RuleReasons()
    reasons.rendered(topo, render(topo))
    indexed = reasons.placed(topo, "node0")
    monkeypatch.setattr(explain.PlacedReasons, "of", _unrendered)  # a second index would fail the test
    assert reasons.placed(topo, "node0") is indexed
    assert indexed.placed and all(b.chain == chain for (_, chain), bs in indexed.placed.items() for b in bs)
    fewer = replace(topo, services=())
    monkeypatch.undo()
    assert reasons.placed(fewer, "node0") is not indexed
