"""`lab import` of a cluster over the lab's 100 built nodes, sliced (lab/describe/kubectl/slicing.py): the nodes
the probes cross are built, every other is a stand-in (standIn: true) whose pods are bare endpoint addresses, and
the scenario written passes lab validate. The built-node limit is lowered where a small cluster shows the same."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml
from support.host import REPO

from lab import import_command
from lab.bench.imports import import_list
from lab.describe.errors import ScenarioError
from lab.describe.kubectl import slicing
from lab.describe.kubectl.slicing import built_nodes, probed_within, stand_in_endpoint
from lab.describe.load import load_scenario
from lab.import_command import add_import_command, run_import

NODES = [f"node{i}" for i in range(6)]
SLICED = (REPO / "tests" / "integration" / "topologies" / "stand-ins.yaml").read_text()


def test_under_the_limit_nothing_is_sliced() -> None:
    assert built_nodes([], NODES, {"default/web": ["node0", "node1"]}) is None


def test_over_the_limit_the_first_services_probed_nodes_are_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slicing, "MAX_NODES", 3)
    probed = {"default/web": ["node4", "node1"], "default/db": ["node2", "node5"]}
    assert built_nodes([], NODES, probed) == ["node1", "node4"]  # in the input's order


def test_nodes_asked_are_built_whatever_the_size() -> None:
    assert built_nodes(["node3", "node0"], NODES, {}) == ["node0", "node3"]


def test_a_node_asked_that_is_not_in_the_input_is_refused() -> None:
    with pytest.raises(ScenarioError, match="--nodes: no node node9, nodeX in the input"):
        built_nodes(["node1", "node9", "nodeX"], NODES, {})


def test_more_nodes_asked_than_the_lab_builds_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slicing, "MAX_NODES", 2)
    with pytest.raises(ScenarioError, match="at most 2 nodes are built, not 3"):
        built_nodes(["node0", "node1", "node2"], NODES, {})


def test_a_service_is_probed_only_when_every_node_it_is_probed_through_is_built() -> None:
    probed = {"default/web": ["node0", "node1"], "default/db": ["node0", "node4"]}
    assert probed_within(probed, ["node0", "node1"]) == {"default/web": ["node0", "node1"]}


def test_nodes_no_service_is_probed_through_alone_are_refused_in_words() -> None:
    with pytest.raises(ScenarioError, match="no Service is probed through node0 alone"):
        probed_within({"default/web": ["node0", "node1"]}, ["node0"])


READY = {"ready": True, "serving": True, "terminating": False}


def test_a_ready_stand_in_endpoint_is_its_address_alone() -> None:
    endpoint = {"addresses": ["10.244.7.3"], "conditions": READY, "nodeName": "node7", "zone": "a"}
    assert stand_in_endpoint(endpoint) == {"addresses": ["10.244.7.3"], "zone": "a"}


@pytest.mark.parametrize(
    "conditions",
    [
        {"ready": False, "serving": True, "terminating": True},
        {"ready": False, "serving": False, "terminating": False},
    ],
)
def test_a_stand_in_endpoint_not_ready_keeps_its_conditions(conditions: dict[str, bool]) -> None:
    endpoint = {"addresses": ["10.244.7.3"], "conditions": conditions, "nodeName": "node7"}
    assert stand_in_endpoint(endpoint) == {"addresses": ["10.244.7.3"], "conditions": conditions}


def _import(files: list[Path], nodes: str | None = None) -> tuple[argparse.Namespace, list[str]]:
    """`lab import FILES --kube-version 1.31 [--nodes NODES]`, parsed as the command line parses it."""
    parser = argparse.ArgumentParser()
    add_import_command(parser.add_subparsers(), run_import)
    asked = ["--nodes", nodes] if nodes is not None else []
    args = parser.parse_args(["import", *map(str, files), "--kube-version", "1.31", *asked])
    notes: list[str] = []
    assert run_import(args, notes.append) == 0
    return args, notes


def test_a_generated_cluster_over_the_limit_is_imported_sliced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Five nodes over a limit of three: two built, three stand-ins; every endpoint of every Service is written
    (the built nodes' rules are the whole cluster's), the stand-ins' as bare addresses, no Pod on a stand-in; the
    import's own bound counts the built nodes alone."""
    monkeypatch.setattr(slicing, "MAX_NODES", 3)
    monkeypatch.setattr(import_command, "MAX_NODES", 3)
    _args, notes = _import(import_list(5, 20, 5, tmp_path))
    scenario = yaml.safe_load(capsys.readouterr().out)
    built = [n["name"] for n in scenario["nodes"] if not n.get("standIn")]
    assert built == ["node0", "node1"]
    assert [n["name"] for n in scenario["nodes"] if n.get("standIn")] == ["node2", "node3", "node4"]
    assert any("sliced: 2 of the 5 nodes are built (node0, node1)" in note for note in notes)
    pods = [m for m in scenario["workload"] if m["kind"] == "Pod"]
    assert {p["spec"]["nodeName"] for p in pods} <= set(built)
    endpoints = [e for m in scenario["workload"] if m["kind"] == "EndpointSlice" for e in m["endpoints"]]
    assert len(endpoints) == 20
    bare = [e for e in endpoints if "nodeName" not in e]
    assert len(bare) == 12 and all(set(e) == {"addresses"} for e in bare)  # 4 pods on each of 3 stand-ins
    assert {p["from"].split("/")[0] for p in scenario["probes"]} <= {"default", *built}


def test_nodes_asked_are_built_and_the_rest_stand_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Under the limit too. svc-2's pods are node2's, and it is probed through node0 (the first without one):
    probed; svc-0's other kind is node1, a stand-in: not probed."""
    _import(import_list(4, 8, 4, tmp_path), nodes="node2,node0")
    scenario = yaml.safe_load(capsys.readouterr().out)
    assert [n["name"] for n in scenario["nodes"] if not n.get("standIn")] == ["node0", "node2"]
    assert {p["name"].split("-http-")[0] for p in scenario["probes"]} == {"default-svc-2"}


def test_a_node_asked_that_no_input_has_is_refused_naming_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as info:
        _import(import_list(4, 8, 4, tmp_path), nodes="node1,nodeZ")
    assert info.value.field == "--nodes" and "no node nodeZ in the input" in info.value.message


@pytest.mark.parametrize("nodes", ["", "node1,,node2", "node1,"])
def test_an_empty_node_name_in_the_flag_is_refused(tmp_path: Path, nodes: str) -> None:
    with pytest.raises(ScenarioError) as info:
        _import(import_list(4, 8, 4, tmp_path), nodes=nodes)
    assert info.value.field == "--nodes" and "expected node names separated by commas" in info.value.message


def test_a_scenario_with_a_large_clusters_stand_in_endpoints_is_within_its_bound(tmp_path: Path) -> None:
    """40 000 stand-in endpoints in slices of 1 000 (EndpointSlice's own limit), written as lab import writes a
    stand-in's: some 120 000 values (a 1 000-node, 30 000-pod import's scenario has 127 000), over the 100 000 a
    scenario held before slicing, under its 250 000."""
    slices = "".join(
        "  - apiVersion: discovery.k8s.io/v1\n    kind: EndpointSlice\n"
        f"    metadata: {{name: web-{s}, labels: {{kubernetes.io/service-name: web}}}}\n"
        "    addressType: IPv4\n    ports: [{name: http, port: 8080, protocol: TCP}]\n    endpoints:\n"
        + "".join(f"      - addresses: [10.245.{a // 250}.{a % 250 + 2}]\n" for a in range(s * 1000, s * 1000 + 1000))
        for s in range(40)
    )
    wide = SLICED.replace("clusterCIDR: 10.244.0.0/16", "clusterCIDR: 10.244.0.0/15")
    node4 = "\n  - {name: node4, ip: 192.168.56.14, podCIDR: 10.245.0.0/16, standIn: true}"
    text = wide.replace("podCIDR: 10.244.3.0/24, standIn: true}", "podCIDR: 10.244.3.0/24, standIn: true}" + node4)
    text = text.split("probes:")[0]
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text + slices + "probes:" + SLICED.split("probes:")[1])
    (port,) = load_scenario(str(scenario)).variants[0].services[0].ports
    assert len(port.endpoints) == 40_003
