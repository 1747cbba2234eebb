"""Bounded work on untrusted input (issue 30, item 5): what no machine can build is refused before it is built, and
what it can is read in linear time. The time and memory limits below are generous guards against a return of the
old behaviour (an alias bomb took 20 s and 800 MB under lab import's bounds; 2 000 nodes 57 s), not speed
assertions."""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import pytest

from lab import import_command
from lab.describe import yamlsrc
from lab.describe.errors import ScenarioError
from lab.describe.kubectl import objects
from lab.describe.kubectl.objects import read_inputs
from lab.describe.load import load_scenario
from lab.describe.resolve.network import MAX_NODES
from lab.describe.resolve.workload import MAX_PODS

REPO = Path(__file__).resolve().parents[2]
NODEPORT = REPO / "tests" / "fixtures" / "kubectl" / "nodeport-source-ip"
DUAL = REPO / "tests" / "fixtures" / "kubectl" / "dual-stack"  # its dump has no anchors, so splits into documents


def _bomb(levels: int = 9) -> str:
    """The billion laughs: each anchor names nine aliases of the one before."""
    rows = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    rows += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(rows) + "\n"


def _grown() -> int:
    """How far this process's peak memory has grown, in MB (ru_maxrss only rises: what ran before is left out)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def _refused_within(seconds: float, megabytes: int, read) -> ScenarioError:  # noqa: ANN001
    before, started = _grown(), time.monotonic()
    with pytest.raises(ScenarioError) as info:
        read()
    assert time.monotonic() - started < seconds
    assert _grown() - before < megabytes
    return info.value


@pytest.mark.parametrize("bound", [yamlsrc.MAX_VALUES, objects.MAX_VALUES], ids=["scenario", "kubectl-dump"])
def test_an_alias_bomb_is_refused_before_it_is_built(bound):
    error = _refused_within(30, 200, lambda: yamlsrc.parse_yaml("bomb.yaml", _bomb(), bound, fast=True))
    assert error.file == "bomb.yaml" and error.field.startswith("a")
    assert "aliases repeat" in error.message and "values" in error.message


def test_an_alias_bomb_in_a_kubectl_dump_is_refused_by_lab_import(tmp_path):
    dump = tmp_path / "dump.yaml"
    dump.write_text("kind: List\nitems: []\n" + _bomb())
    error = _refused_within(30, 200, lambda: read_inputs([str(dump)]))
    assert error.message == f"aliases repeat more than {yamlsrc.MAX_REPEATED} values: write the values out"


def test_a_dump_of_many_values_is_read_in_linear_memory(tmp_path):
    """180 000 values of a large dump's shape, past a scenario's bound: read with no node tree (the tree's two
    marks per node were most of lab import's 2 GB), each value's line kept."""
    rows = "".join(f"  p{i}: {{a: {i}, b: x}}\n" for i in range(60_000))
    dump = tmp_path / "dump.yaml"
    dump.write_text("kind: List\nitems: []\nmetadata:\n" + rows)
    before = _grown()
    (src,) = yamlsrc.load_documents(dump, objects.MAX_BYTES, objects.MAX_VALUES)
    assert src.data["metadata"]["p59999"] == {"a": 59999, "b": "x"}
    assert src.line_of(("metadata", "p59999", "b")) == 60_003
    assert _grown() - before < 300


# --- several documents -------------------------------------------------------------------------------------------


def _documents_of(dump: Path) -> str:
    """The List's items, each its own document, as `kubectl get` of each object concatenated with --- gives."""
    text = dump.read_text()
    body = text[text.index("items:\n") + len("items:\n") : text.index("\nkind: List")]
    items = ["  " + chunk for chunk in ("\n" + body).split("\n- ")[1:]]
    return "".join("---\n" + "\n".join(line[2:] for line in item.split("\n")) + "\n" for item in items)


def test_kubectl_outputs_concatenated_with_dashes_import_as_one_list(tmp_path):
    split = tmp_path / "dump.yaml"
    split.write_text(_documents_of(DUAL / "dump.yaml") + "---\n")  # an empty last document is nothing
    together, apart = read_inputs([str(DUAL / "dump.yaml")]), read_inputs([str(split)])
    for kind, objs in together.objects.items():
        assert [o.data for o in apart.objects[kind]] == [o.data for o in objs], kind
    assert sum(len(o) for o in apart.objects.values()) > 5


def test_an_error_in_a_later_document_is_at_its_own_line(tmp_path):
    text = _documents_of(DUAL / "dump.yaml")
    dump = tmp_path / "dump.yaml"
    dump.write_text(text + "---\nkind: List\nitems:\n- 7\n")
    with pytest.raises(ScenarioError) as info:
        read_inputs([str(dump)])
    assert (info.value.line, info.value.field) == (text.count("\n") + 4, "List: items[0]")


def test_a_scenario_is_one_document(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text((REPO / "topologies" / "hairpin.yaml").read_text() + "---\nname: second\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.line == len((REPO / "topologies" / "hairpin.yaml").read_text().splitlines()) + 1
    assert "a second YAML document starts here (---): a scenario" in info.value.message
    assert "is one document" in info.value.message


@pytest.mark.parametrize("dump", ["shop/dump.yaml", "shop/dump.json", "nodeport-source-ip/dump.yaml"])
def test_kubectl_output_given_as_a_scenario_names_lab_import(dump):
    with pytest.raises(ScenarioError) as info:
        load_scenario(REPO / "tests" / "fixtures" / "kubectl" / dump)
    assert "it is kubectl output" in info.value.message
    assert "`lab import FILE -o scenario.yaml` writes a scenario" in info.value.message


# --- what a scenario may ask the lab to build --------------------------------------------------------------------


def _cluster(nodes: int, replicas: int = 1, blocks: str = "10.{a}.{b}.0/24", scale: int | None = None) -> str:
    """N nodes (each block from `blocks`, {a}.{b} the node's number in base 250, {c} 128 times it), a Deployment
    of `replicas` behind a Service, a probe, and one more after a scale step to `scale`."""
    rows = [
        "name: big",
        "cluster: {clusterCIDR: 10.0.0.0/8, serviceCIDR: 172.30.0.0/16, underlay: 192.168.0.0/16}",
        "nodes:",
    ]
    rows += [
        f"  - {{name: node{n}, ip: 192.168.{n // 250}.{n % 250 + 2}, "
        f"podCIDR: {blocks.format(a=n // 250, b=n % 250, c=n * 128)}}}"
        for n in range(nodes)
    ]
    rows += [
        "workload:",
        "  - kind: Deployment",
        "    metadata: {name: web}",
        f"    spec: {{replicas: {replicas}, selector: {{matchLabels: {{app: web}}}}, template: {{metadata: "
        "{labels: {app: web}}, spec: {containers: [{name: web, ports: [{containerPort: 80}]}]}}}",
        "  - kind: Service",
        "    metadata: {name: web}",
        "    spec: {selector: {app: web}, ports: [{port: 80}]}",
        "probes:",
        "  - {name: p, from: node0, to: {service: web, port: 80}, expect: {outcome: delivered}}",
    ]
    if scale is not None:
        rows.append(f"  - {{name: q, before: [{{scale: Deployment/web, replicas: {scale}}}], from: node0, "
                    "to: {service: web, port: 80}, expect: {outcome: delivered}}")  # fmt: skip
    return "\n".join(rows) + "\n"


def _error(tmp_path: Path, text: str) -> ScenarioError:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    started = time.monotonic()
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert time.monotonic() - started < 60  # a million replicas took 123 s and 1.2 GB to validate
    return info.value


def test_a_million_replicas_are_refused_before_any_is_placed(tmp_path):
    error = _error(tmp_path, _cluster(2, 1_000_000, blocks="10.{c}.0.0/9"))
    assert (error.line, error.field) == (9, "workload[0].spec.replicas")
    assert error.message.startswith(f"at most {MAX_PODS} pods (with the replicas scale steps create): this file asks "
                                    "for 1000000;")  # fmt: skip


def test_replicas_a_scale_step_creates_count_too(tmp_path):
    error = _error(tmp_path, _cluster(2, 10, blocks="10.{c}.0.0/9", scale=MAX_PODS + 1))
    assert error.field == "workload[0].spec.replicas" and f"this file asks for {MAX_PODS + 1};" in error.message


def test_more_nodes_than_the_lab_builds_are_refused(tmp_path):
    error = _error(tmp_path, _cluster(2_000))
    assert (error.line, error.field) == (3, "nodes")
    assert error.message.startswith(f"at most {MAX_NODES} nodes: this file asks for 2000;")


def test_the_largest_cluster_allowed_validates(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(_cluster(MAX_NODES, MAX_PODS))
    (topo,) = load_scenario(path).variants
    assert (len(topo.nodes), len(topo.pods)) == (MAX_NODES, MAX_PODS)


@pytest.mark.parametrize(
    ("blocks", "later", "said"),
    [
        ({3: "10.0.1.0/24"}, 3, "10.0.1.0/24 overlaps node1's 10.0.1.0/24"),  # the same block
        ({0: "10.0.0.0/16"}, 1, "10.0.1.0/24 overlaps node0's 10.0.0.0/16"),  # an earlier one holds a later one
        ({5: "10.0.0.0/22"}, 5, "10.0.0.0/22 overlaps node0's 10.0.0.0/24"),  # a later one holds earlier ones
        ({99: "10.0.50.128/25"}, 99, "10.0.50.128/25 overlaps node50's 10.0.50.0/24"),
    ],
)
def test_overlapping_pod_blocks_are_found_among_many_nodes(tmp_path, blocks, later, said):
    text = _cluster(MAX_NODES)
    for n, block in blocks.items():
        text = text.replace(f"name: node{n}, ip: 192.168.0.{n + 2}, podCIDR: 10.0.{n}.0/24",
                            f"name: node{n}, ip: 192.168.0.{n + 2}, podCIDR: {block}")  # fmt: skip
    error = _error(tmp_path, text)
    assert (error.field, error.message) == (f"nodes[{later}].podCIDR", said)


@pytest.mark.parametrize(("bound", "what"), [("MAX_PODS", "pods"), ("MAX_NODES", "nodes")])
def test_an_import_larger_than_the_lab_builds_is_refused_before_it_is_written(tmp_path, monkeypatch, bound, what):
    """A cluster of 68 000 pods took 15 minutes and 2.4 GB to be refused by lab validate's byte bound after it was
    written; now it is refused once its objects are read. The bound lowered here: the fixture's cluster is small."""
    monkeypatch.setattr(import_command, bound, 2)
    out = tmp_path / "s.yaml"
    files = [str(NODEPORT / f) for f in ("dump.yaml", "kube-proxy.yaml", "version.yaml")]
    args = argparse.Namespace(
        files=files, output=str(out), service=[], kube_version=None, anonymize=False, name="imported", nodes=None
    )
    with pytest.raises(ScenarioError) as info:
        import_command.run_import(args, lambda _: None)
    assert info.value.message.startswith(f"at most 2 {what} in a scenario (docs/scenarios.md): these objects ask for 3")
    assert "--service NAMESPACE/NAME" in info.value.message
    assert not out.exists()
