"""What `lab import` says it did with what it saw, one note each: a node's state (NotReady, cordoned, tainted,
being deleted, labelled out of load balancers) and what the lab's load balancer does with it, where the release
came from, why a node was renamed, where --anonymize moved the addresses. Copies of tests/fixtures/kubectl, edited
in tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from lab.describe.kubectl.nodestate import Release
from lab.describe.kubectl.objects import read_inputs
from lab.describe.kubectl.scenario import Imported, Options, import_cluster
from lab.describe.kubectl.write import scenario_text
from lab.describe.load import load_scenario

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "kubectl"
SHOP_NODE = "ip-10-0-1-15.eu-west-1.compute.internal"  # the first of shop's three nodes
SHOP_LABEL = "ip-10-0-1-15-eu-west-1-compute-internal"
NO_LABEL = "not a DNS-1123 label (lower case, no dots), as the lab's node names are"


def _edited(tmp_path: Path, cluster: str, change: Callable[[dict[str, Any]], None], version: bool = True) -> list[str]:
    """The cluster's files, its dump.yaml copied with `change` made to every object of it."""
    data = yaml.safe_load((FIXTURES / cluster / "dump.yaml").read_text())
    for item in data["items"]:
        change(item)
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump(data))
    rest = ["kube-proxy.yaml", "version.yaml"] if version else ["kube-proxy.yaml"]
    return [str(dump), *(str(FIXTURES / cluster / f) for f in rest)]


def _on_node(name: str, change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(item: dict[str, Any]) -> None:
        if item["kind"] == "Node" and item["metadata"]["name"] == name:
            change(item)

    return apply


def _imported(files: list[str], **options: Any) -> Imported:
    return import_cluster(read_inputs(files), Options(**options))


def _one_note(result: Imported, *words: str) -> str:
    found = [n for n in result.notes if all(w in n for w in words)]
    assert len(found) == 1, (words, result.notes)
    return found[0]


def _valid(tmp_path: Path, result: Imported) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text(result.scenario))
    load_scenario(path)


def _ready(status: str) -> Callable[[dict[str, Any]], None]:
    def change(node: dict[str, Any]) -> None:
        for cond in node["status"]["conditions"]:
            if cond["type"] == "Ready":
                cond["status"] = status

    return change


def _taint(key: str, effect: str = "NoSchedule") -> Callable[[dict[str, Any]], None]:
    return lambda node: node["spec"].setdefault("taints", []).append({"key": key, "effect": effect})


def _pool(result: Imported) -> list[str] | None:
    return result.scenario["loadBalancers"][0].get("nodes")


def test_a_not_ready_node_is_built_and_kept_in_the_pool_said_once(tmp_path):
    result = _imported(_edited(tmp_path, "shop", _on_node(SHOP_NODE, _ready("Unknown"))))
    note = _one_note(result, f"Node {SHOP_NODE}", "Ready Unknown")
    assert "status.conditions[" in note and "built like any node" in note and "kept in the load balancer's pool" in note
    assert SHOP_LABEL in [n["name"] for n in result.scenario["nodes"]]
    assert _pool(result) is None  # every node, as without a NotReady one
    _valid(tmp_path, result)


def test_a_not_ready_node_without_a_load_balancer_says_so(tmp_path):
    result = _imported(_edited(tmp_path, "dual-stack", _on_node("node2", _ready("False"))))
    note = _one_note(result, "Node node2", "Ready False")
    assert note.endswith("the scenario has no cloud load balancer")


def test_a_ready_node_gets_no_note_of_its_state(tmp_path):
    result = _imported(_edited(tmp_path, "shop", lambda item: None))
    assert not [n for n in result.notes if "Ready " in n or "cordoned" in n or "taints" in n]


def test_a_cordoned_node_stays_in_the_pool_said_once(tmp_path):
    result = _imported(_edited(tmp_path, "shop", _on_node(SHOP_NODE, lambda n: n["spec"].update(unschedulable=True))))
    note = _one_note(result, f"Node {SHOP_NODE}", "spec.unschedulable")
    assert "cordoned" in note and note.endswith("built like any node; kept in the load balancer's pool")
    assert _pool(result) is None
    _valid(tmp_path, result)


def test_a_node_tainted_for_deletion_leaves_the_pool_and_its_healthz_is_said_by_release(tmp_path):
    files = _edited(tmp_path, "shop", _on_node(SHOP_NODE, _taint("ToBeDeletedByClusterAutoscaler")))
    result = _imported(files)
    note = _one_note(result, f"Node {SHOP_NODE}", "spec.taints[0]")
    assert "kube-proxy 1.30 answers /healthz 503" in note and "left out of the load balancer's pool" in note
    assert _pool(result) == ["ip-10-0-2-27-eu-west-1-compute-internal", "ip-10-0-1-48-eu-west-1-compute-internal"]
    _valid(tmp_path, result)
    older = _one_note(_imported(files, kube_version="1.29"), f"Node {SHOP_NODE}", "spec.taints[0]")
    assert "kube-proxy 1.29 answers /healthz 200" in older and "left out of the load balancer's pool" in older


def test_a_node_being_deleted_leaves_the_pool(tmp_path):
    deleted = _on_node(SHOP_NODE, lambda n: n["metadata"].update(deletionTimestamp="2024-11-26T09:00:00Z"))
    result = _imported(_edited(tmp_path, "shop", deleted))
    note = _one_note(result, f"Node {SHOP_NODE}", "metadata.deletionTimestamp")
    assert "503" in note and "as the cloud's service controller leaves out a node being deleted" in note
    assert SHOP_LABEL not in _pool(result)


def test_a_node_excluded_from_load_balancers_leaves_the_pool(tmp_path):
    label = "node.kubernetes.io/exclude-from-external-load-balancers"
    result = _imported(
        _edited(tmp_path, "shop", _on_node(SHOP_NODE, lambda n: n["metadata"]["labels"].update({label: ""})))
    )
    note = _one_note(result, f"Node {SHOP_NODE}", f"metadata.labels.{label}")
    assert "left out of the load balancer's pool" in note and "kube-proxy ignores the label" in note
    assert SHOP_LABEL not in _pool(result)
    _valid(tmp_path, result)


def test_other_taints_are_said_in_one_note_and_change_nothing(tmp_path):
    tainted = _on_node("node1", lambda n: [_taint(k)(n) for k in ("dedicated", "node.kubernetes.io/unschedulable")])
    result = _imported(_edited(tmp_path, "dual-stack", tainted))
    note = _one_note(result, "Node node1", "spec.taints:")
    assert "dedicated:NoSchedule: built like any node" in note and "unschedulable" not in note


def test_the_release_from_a_version_file_is_said(tmp_path):
    result = _imported([str(FIXTURES / "dual-stack" / f) for f in ("dump.yaml", "kube-proxy.yaml", "version.yaml")])
    note = _one_note(result, "kubeVersion")
    assert "version.yaml:17: kubectl version: serverVersion.gitVersion: v1.31.2: kubeVersion 1.31" in note


def test_the_release_from_the_nodes_kube_proxy_is_said_with_their_other_releases(tmp_path):
    older = _on_node("node2", lambda n: n["status"]["nodeInfo"].update(kubeProxyVersion="v1.30.6"))
    result = _imported(_edited(tmp_path, "dual-stack", older, version=False))
    note = _one_note(result, "kubeVersion")
    assert "Node node1: status.nodeInfo.kubeProxyVersion: v1.31.2: kubeVersion 1.31: no kubectl version given" in note
    assert "the nodes' kube-proxy runs 1.30 on 1 node(s)" in note


def test_the_release_from_the_flag_is_said(tmp_path):
    result = _imported(_edited(tmp_path, "dual-stack", lambda item: None), kube_version="1.29")
    assert (
        _one_note(result, "kubeVersion") == "lab import: kubeVersion 1.29: from --kube-version, whatever the inputs say"
    )


def test_a_rename_gives_its_own_reason(tmp_path):
    files = _edited(tmp_path, "shop", lambda item: None)
    plain = _one_note(_imported(files), f"Node {SHOP_NODE}", "metadata.name")
    assert plain.endswith(f"named {SHOP_LABEL} in the scenario: {NO_LABEL}")
    anonymized = _one_note(_imported(files, anonymize=True), f"Node {SHOP_NODE}", "metadata.name")
    assert anonymized.endswith("named node-1 in the scenario: --anonymize renames every node")


def _renamed(names: dict[str, str]) -> Callable[[dict[str, Any]], None]:
    """Nodes renamed, with every mention of them (a pod's nodeName, an endpoint's)."""

    def change(item: dict[str, Any]) -> None:
        if item["kind"] == "Node":
            item["metadata"]["name"] = names.get(item["metadata"]["name"], item["metadata"]["name"])
        if item["kind"] == "Pod":
            item["spec"]["nodeName"] = names.get(item["spec"]["nodeName"], item["spec"]["nodeName"])
        for ep in item.get("endpoints") or []:
            if "nodeName" in ep:
                ep["nodeName"] = names.get(ep["nodeName"], ep["nodeName"])

    return change


def test_a_node_renamed_because_another_took_its_name_says_whose(tmp_path):
    result = _imported(_edited(tmp_path, "dual-stack", _renamed({"node1": "node1.lab", "node2": "node1-lab"})))
    renames = [n for n in result.notes if "metadata.name" in n]
    assert len(renames) == 2, renames
    assert renames[0].endswith("Node node1.lab: metadata.name: named node1-lab in the scenario: " + NO_LABEL)
    assert renames[1].endswith(
        "Node node1-lab: metadata.name: named node1-lab-2 in the scenario: node node1.lab is named node1-lab in "
        "the scenario"
    )


def test_a_node_renamed_where_its_label_was_taken_says_so(tmp_path):
    result = _imported(_edited(tmp_path, "dual-stack", _renamed({"node1": "node1-lab", "node2": "node1.lab"})))
    renames = [n for n in result.notes if "metadata.name" in n]
    assert len(renames) == 1, renames
    assert renames[0].endswith(
        f"Node node1.lab: metadata.name: named node1-lab-2 in the scenario: {NO_LABEL}, and node1-lab is another "
        "node's name in the scenario"
    )


def test_anonymize_says_where_each_network_went_once(tmp_path):
    result = _imported(_edited(tmp_path, "shop", lambda item: None), anonymize=True)
    moved = [n for n in result.notes if n.startswith("lab import: --anonymize: ")]
    assert [n.removeprefix("lab import: --anonymize: ") for n in moved] == [
        "the pod network 100.64.0.0/16 moved to 10.244.0.0/16, each address in it at its offset",
        "the Service network 172.20.0.0/16 moved to 10.96.0.0/16, each address in it at its offset",
        "the nodes' network 10.0.0.0/22 moved to 192.168.56.0/22, each address in it at its offset",
        "2 other address(es) (external, load balancer) moved to 203.0.113.0/24",
        "1 other network(s) (source ranges) moved to blocks of 198.18.0.0/15",
    ]
    assert not [n for n in _imported(_edited(tmp_path, "shop", lambda item: None)).notes if "--anonymize" in n]


def test_before_1_27_a_not_ready_node_leaves_a_cluster_services_pool(tmp_path):
    def change(item: dict[str, Any]) -> None:
        _on_node(SHOP_NODE, _ready("False"))(item)
        if item["kind"] == "Service" and item["metadata"]["name"] == "web":
            item["spec"]["externalTrafficPolicy"] = "Cluster"
            item["spec"].pop("healthCheckNodePort")

    files = [f for f in _edited(tmp_path, "shop", change) if not f.endswith("kube-proxy.yaml")]  # of 1.30's fields
    older = _imported(files, kube_version="1.26")
    note = _one_note(older, f"Node {SHOP_NODE}", "Ready False")
    pool = "left out of the load balancer's pool (loadBalancers[].nodes),"
    assert note.endswith(
        f"{pool} as the cloud's service controller leaves out a node that is NotReady, before 1.27, from the pool "
        "of a Service of externalTrafficPolicy Cluster"
    )
    assert SHOP_LABEL not in _pool(older)
    _valid(tmp_path, older)
    assert _pool(_imported(files)) is None  # 1.30: StableLoadBalancerNodeSet keeps it


def test_healthz_drains_a_deleted_node_from_1_30_or_with_the_gate_from_1_28():
    drains = {
        (version, gate): Release(version, gate).drains
        for version in ("1.27", "1.28", "1.29", "1.30", "1.31")
        for gate in (None, True, False)
    }
    assert [key for key, on in drains.items() if on] == [
        ("1.28", True),
        ("1.29", True),
        ("1.30", None),
        ("1.30", True),
        ("1.31", None),
        ("1.31", True),
        ("1.31", False),  # GA and locked on: kube-proxy 1.31 refuses to turn it off
    ]
