"""Every report of a sliced run says which nodes were built and which stood in, and what a stand-in is (lab/report/
sliced.py): `lab run`'s line, `--json`'s `sliced` entries, the HTML report's paragraph above a variant's probes
and `lab up`'s summary; an unsliced run's reports are as they were."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from support.host import REPO
from support.scenario import BASE, write

from lab.cli import ran_notes
from lab.describe.load import load_scenario
from lab.describe.topology import NodeSpec, Topology
from lab.judge.results import ProbeResult, Timing, VariantRun
from lab.judge.verdict import Verdict
from lab.live.summary import summary
from lab.probe.observation import Observation
from lab.report.html import _variant
from lab.report.records import json_document
from lab.report.sliced import STAND_INS, sliced_line

SLICED = (REPO / "tests" / "integration" / "topologies" / "stand-ins.yaml").read_text()
NO_TIME = Timing(0, 0, 0, 0)


def _sliced(tmp_path: Path) -> Topology:
    return load_scenario(write(tmp_path, SLICED)).variants[0]


def _run(topo: Topology, skipped: str = "") -> VariantRun:
    results = [] if skipped else [_delivered(topo)]
    return VariantRun(topo, results, NO_TIME, skipped)


def _seven_stand_ins(tmp_path: Path) -> Topology:
    many = tuple(NodeSpec(f"s{i}", f"192.168.57.{i}", f"10.245.{i}.0/24", "", stand_in=True) for i in range(7))
    return replace(_sliced(tmp_path), stand_ins=many)


def _delivered(topo: Topology) -> ProbeResult:
    return ProbeResult(topo, topo.probes[0], Observation("delivered", backend="10.244.2.7"), Verdict(True))


def test_lab_runs_line_names_the_built_nodes_the_stand_ins_and_what_they_are(tmp_path: Path) -> None:
    topo = _sliced(tmp_path)
    assert sliced_line(topo) == f"sliced: built node1; stand-ins ({STAND_INS}): node2, node3"
    assert "no namespace and no kube-proxy of their own" in STAND_INS


def test_lab_run_says_it_and_the_wrappers_choice_of_a_variant_that_ran_never_of_a_skipped_one(tmp_path: Path) -> None:
    topo = _sliced(tmp_path)
    assert ran_notes(_run(topo)) == [f"stand-ins (default): {sliced_line(topo)}"]
    chosen = replace(topo, cluster=replace(topo.cluster, iptables_backend_why="iptables-wrapper of ... → nft"))
    assert ran_notes(_run(chosen))[1:] == ["stand-ins (default): iptables-wrapper of ... → nft"]
    assert ran_notes(_run(chosen, skipped="no ip_vs module")) == []


def test_the_line_names_five_stand_ins_and_counts_them_all_unless_told_to_name_every_one(tmp_path: Path) -> None:
    topo = _seven_stand_ins(tmp_path)
    assert sliced_line(topo).endswith("): s0, s1, s2, s3, s4, ... (7)")
    assert sliced_line(topo, most=None).endswith("): s0, s1, s2, s3, s4, s5, s6")


def test_json_names_each_sliced_variant_once_with_its_nodes(tmp_path: Path) -> None:
    topo = _sliced(tmp_path)
    run = _run(topo)
    document = json_document(run.results, [run], interrupted=False)
    assert document["sliced"] == [
        {
            "scenario": "stand-ins",
            "file": topo.file,
            "variant": {},
            "built": ["node1"],
            "stand_ins": ["node2", "node3"],
            "stand_in": f"stand-ins are {STAND_INS}",
        }
    ]
    assert [record["probe"] for record in document["results"]] == ["cluster-ip-to-stand-in"]


def test_json_names_a_variant_cut_short_by_its_results(tmp_path: Path) -> None:
    topo = _sliced(tmp_path)
    document = json_document([_delivered(topo)], [], interrupted=True)
    assert [entry["built"] for entry in document["sliced"]] == [["node1"]]


def test_json_names_no_built_node_of_a_variant_this_machine_skipped(tmp_path: Path) -> None:
    run = _run(_sliced(tmp_path), skipped="no ip_vs module")
    assert "sliced" not in json_document([], [run], interrupted=False)


def test_an_unsliced_runs_json_keeps_its_shape(tmp_path: Path) -> None:
    (topo,) = load_scenario(write(tmp_path, BASE)).variants
    run = _run(topo)
    assert list(json_document(run.results, [run], interrupted=False)) == ["results", "summary"]


def test_the_html_report_says_it_under_the_variants_heading_above_its_probes(tmp_path: Path) -> None:
    topo = _sliced(tmp_path)
    heading, said = _variant(VariantRun(topo, [], NO_TIME), tmp_path)
    assert heading == "<h3>default</h3>"
    assert said == (
        '<p class="sliced">sliced: built node1; stand-ins (nodes the lab does not build: their pods answer as '
        "addresses routed where the real ones would be, with no namespace and no kube-proxy of their own; a result "
        "through their pods is the built nodes&#x27; rules at work): node2, node3</p>"
    )


def test_the_html_report_names_every_stand_in_and_says_nothing_of_an_unsliced_or_skipped_variant(
    tmp_path: Path,
) -> None:
    _, said = _variant(VariantRun(_seven_stand_ins(tmp_path), [], NO_TIME), tmp_path)
    assert said.endswith("s4, s5, s6</p>")
    (unsliced,) = load_scenario(write(tmp_path, BASE)).variants
    assert not any("sliced" in part for part in _variant(VariantRun(unsliced, [], NO_TIME), tmp_path))
    skipped = _variant(_run(_sliced(tmp_path), skipped="no ip_vs module"), tmp_path)
    assert not any("sliced" in part for part in skipped)


def test_lab_ups_summary_says_it_below_the_built_nodes(tmp_path: Path) -> None:
    topo = _sliced(tmp_path)
    lines = summary(topo, "lab-0abc12")
    built = next(i for i, line in enumerate(lines) if line.startswith("  node      node1 "))
    assert lines[built + 1] == f"  {sliced_line(topo)}"
    (unsliced,) = load_scenario(write(tmp_path, BASE)).variants
    assert not any("sliced" in line for line in summary(unsliced, "lab-0abc12"))
