"""lab diff reads `iptables-save -c` output as it reads iptables-save's: each rule's counters (`[PACKETS:BYTES] -A
...`) and each chain's (`:CHAIN POLICY [PACKETS:BYTES]`) are dropped, as docs/diff.md says, in ipvs mode's dump too."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from lab.describe.load import load_scenario
from lab.render.dataplane import node_dataplane
from lab.replay.diff.command import diff_from_args

SCENARIO = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "diff" / "many-features.yaml"


def counted(rules: str) -> str:
    """`rules` as `iptables-save -c` writes them: every rule after its counters, every chain with its own."""
    rules = re.sub(r"^-A ", "[12:720] -A ", rules, flags=re.MULTILINE)
    return re.sub(r"^(:\S+ \S+)( \[0:0\])?$", r"\1 [3:180]", rules, flags=re.MULTILINE)


@pytest.mark.parametrize("mode", ["iptables", "ipvs"])
def test_iptables_save_c_output_diffs_as_identical(tmp_path: Path, mode: str) -> None:
    (topo,) = load_scenario(SCENARIO, {"proxyMode": [mode], "kubeVersion": ["1.31"]}).variants
    plane = node_dataplane(topo, "node1")
    given = {"rules": counted(plane.iptables)}
    if mode == "ipvs":
        given |= {"ipsets": plane.ipsets, "ipvs": plane.ipvs}
    assert "[12:720] -A KUBE-SERVICES " in given["rules"]
    for kind, text in given.items():
        (tmp_path / kind).write_text(text)
    args = argparse.Namespace(
        file=str(SCENARIO),
        node="node1",
        variant=[f"proxyMode={mode}", "kubeVersion=1.31"],
        matrix=None,
        rules6=None,
        nft=None,
        **{kind: str(tmp_path / kind) if kind in given else None for kind in ("rules", "ipsets", "ipvs")},
    )
    result, note, _ = diff_from_args(args)
    assert result.identical and not note, [d.as_json() for d in result.differences]
