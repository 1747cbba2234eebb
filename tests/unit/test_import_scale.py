"""`lab import` at a large cluster's size: the generated kubectl List `lab bench --import` times imports, and the
parts made linear for it (free podCIDR blocks, each node's client pod, the scenario's writer) give what the
pairwise and PyYAML-emitter versions gave, and refuse what they refused. No timing here: docs/scale.md has it."""

from __future__ import annotations

import argparse
import ipaddress
from pathlib import Path

import pytest
import yaml

from lab.bench.imports import cluster_list, import_list, parse_import_size
from lab.describe.errors import ScenarioError
from lab.describe.kubectl.cluster import Pod
from lab.describe.kubectl.objects import read_inputs
from lab.describe.kubectl.podblocks import free_blocks
from lab.describe.kubectl.scenario import Options, _clients, import_cluster
from lab.describe.kubectl.write import scenario_text
from lab.import_command import run_import

REPO = Path(__file__).resolve().parents[2]
FIXTURES = sorted((REPO / "tests" / "fixtures" / "kubectl").glob("*/"))


def pairwise_free(network: str, prefixlen: int, taken: list[str]) -> list[str]:
    """The definition: every block tested against every taken one."""
    nets = [ipaddress.ip_network(t) for t in taken]
    blocks = ipaddress.ip_network(network).subnets(new_prefix=prefixlen)
    return [str(b) for b in blocks if not any(b.overlaps(t) for t in nets)]


@pytest.mark.parametrize(
    ("network", "prefixlen", "taken"),
    [
        ("10.244.0.0/20", 24, []),
        ("10.244.0.0/20", 24, ["10.244.3.0/24", "10.244.1.0/24"]),
        ("10.244.0.0/20", 24, ["10.244.0.0/22", "10.244.1.0/24", "10.244.9.128/25"]),  # one holds another
        ("10.244.0.0/20", 24, ["10.244.0.0/16"]),  # everything taken
        ("10.244.0.0/20", 24, ["10.244.2.0/23", "10.244.2.0/24", "10.244.15.255/32", "1.2.3.0/24"]),
        ("10.244.0.0/20", 22, ["10.244.5.0/24", "10.244.0.7/32"]),
        ("10.0.0.0/16", 24, [f"10.0.{i}.0/24" for i in range(0, 256, 3)] + ["10.0.0.0/18"]),  # long one sorted first
        ("fd00:10:244::/56", 64, ["fd00:10:244:3::/64", "fd00:10:244::/62"]),
    ],
)
def test_free_blocks_are_those_no_taken_block_overlaps(network: str, prefixlen: int, taken: list[str]) -> None:
    nets = [ipaddress.ip_network(t) for t in taken]
    found = [str(b) for b in free_blocks(ipaddress.ip_network(network), prefixlen, nets)]
    assert found == pairwise_free(network, prefixlen, taken)


def pod(name: str, node: str, namespace: str = "default") -> Pod:
    return Pod(None, namespace, name, node, {}, False, True, ())  # type: ignore[arg-type]


def test_each_node_probes_from_its_first_backend_else_its_first_pod_else_itself() -> None:
    """The choice per node, as the scan of every pod per node made it."""
    b2, b1, other = pod("web-b", "node1"), pod("web-a", "node1", "zz"), pod("db", "node2")
    a, c = pod("a", "node2", "zz"), pod("c", "node1")
    chosen = _clients(["node1", "node2", "node3"], {id(b2): b2, id(b1): b1}, [b2, b1, other, a, c])
    assert chosen == {"node1": b2, "node2": other, "node3": None}


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_the_scenario_is_written_as_pyyaml_writes_it(fixture: Path) -> None:
    """libyaml's emitter, where PyYAML has it, writes each fixture's scenario byte for byte as PyYAML's own."""
    files = [str(f) for f in sorted(fixture.glob("*.yaml"))]
    scenario = import_cluster(read_inputs(files), Options(kube_version="1.31")).scenario

    class Plain(yaml.SafeDumper):
        def ignore_aliases(self, data: object) -> bool:
            return True

    head, text = scenario_text(scenario).split("\n", 1)
    assert head.startswith("# Written by lab import")
    assert text == yaml.dump(scenario, Dumper=Plain, sort_keys=False, default_flow_style=False, width=120)


def command(files: list[Path]) -> argparse.Namespace:
    return argparse.Namespace(
        files=[str(f) for f in files],
        output=None,
        service=[],
        kube_version="1.31",
        anonymize=False,
        name="imported",
        nodes=None,
    )


def test_a_generated_cluster_imports_every_node_pod_and_service(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    files = import_list(5, 23, 4, tmp_path)
    assert run_import(command(files), lambda _line: None) == 0
    scenario = yaml.safe_load(capsys.readouterr().out)
    assert [n["podCIDR"] for n in scenario["nodes"]] == [f"100.64.{n}.0/24" for n in range(5)]
    kinds = [m["kind"] for m in scenario["workload"]]
    assert (kinds.count("Pod"), kinds.count("Service"), kinds.count("EndpointSlice")) == (23, 4, 4)


def test_overlapping_podcidrs_in_a_generated_cluster_are_refused_as_before(tmp_path: Path) -> None:
    """node3's podCIDR inside node1's: refused naming both, as the pairwise check did (node3 runs no pod)."""
    files = import_list(5, 3, 1, tmp_path)
    files[0].write_text(files[0].read_text().replace("100.64.3.0/24", "100.64.1.128/25"))
    with pytest.raises(ScenarioError) as info:
        run_import(command(files), lambda _line: None)
    assert "Node node3: spec.podCIDRs: 100.64.1.128/25 overlaps node1's 100.64.1.0/24" in str(info.value)


def test_a_generated_list_is_one_kubectl_list() -> None:
    data = yaml.safe_load(cluster_list(3, 7, 2))
    assert data["kind"] == "List"
    kinds = [i["kind"] for i in data["items"]]
    assert (kinds.count("Node"), kinds.count("Pod"), kinds.count("Service"), kinds.count("EndpointSlice")) == (
        3,
        7,
        2,
        2,
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("1000,30000", "expected NODES,PODS,SERVICES"),
        ("10,x,1", "expected NODES,PODS,SERVICES"),
        ("0,1,1", "each at least 1"),
        ("2,501,1", "250 pods per node"),
    ],
)
def test_a_bad_import_size_is_refused_in_words(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        parse_import_size(text)
