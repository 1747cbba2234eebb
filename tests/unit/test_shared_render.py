"""render writes what the nodes of a cluster share once (SharedRules in lab/render/kubeproxy/iptables.py): every
node's rules must stay byte for byte what rendering that node alone writes, over every variant of the catalogue
(and each workload its steps leave), and the bench's generated cluster."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lab.bench.cluster import cluster_scenario
from lab.describe.load import load_scenario
from lab.describe.topology import Topology
from lab.render.dataplane import node_dataplane, render

CATALOGUE = Path(__file__).parents[2] / "topologies"


def _workloads(topo: Topology) -> list[Topology]:
    """The variant, and the cluster each workload-changing step leaves it running."""
    workloads = [topo]
    for probe in topo.probes:
        for step in probe.before:
            if step.pods is not None or step.services is not None:
                last = workloads[-1]
                pods = step.pods if step.pods is not None else last.pods
                services = step.services if step.services is not None else last.services
                workloads.append(replace(last, pods=pods, services=services))
    return workloads


def _same_as_alone(topo: Topology) -> int:
    """Assert each node's shared rendering is its own; how many nodes were compared."""
    planes = render(topo)
    for node in topo.nodes:
        assert planes[node.name] == node_dataplane(topo, node.name), f"{topo.scenario} {topo.variant_label} {node.name}"
    return len(planes)


@pytest.mark.parametrize("path", sorted(CATALOGUE.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_catalogue_variant_renders_each_node_as_alone(path):
    variants = [t for t in load_scenario(path).variants if t.cluster.proxy_mode == "iptables"]
    compared = sum(_same_as_alone(workload) for topo in variants for workload in _workloads(topo))
    assert compared or not variants


def test_the_bench_cluster_renders_each_node_as_alone(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(cluster_scenario(6, 40))
    (topo,) = load_scenario(path).variants
    assert _same_as_alone(topo) == 6
    # Local policies make the endpoints' locality matter: each node's own rules, still the same as alone.
    local = replace(topo, services=tuple(replace(s, external_policy="Local") for s in topo.services))
    planes = render(local)
    assert planes["node0"].iptables != planes["node1"].iptables
    assert _same_as_alone(local) == 6
