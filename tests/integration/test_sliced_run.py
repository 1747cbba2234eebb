"""`lab run` of a sliced scenario as a user runs it: its line on stderr, `--json`'s `sliced` entry and the HTML
report's paragraph each name the built node and the stand-ins, beside a probe answered by a stand-in's pod."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.host import REPO

SLICED = REPO / "tests" / "integration" / "topologies" / "stand-ins.yaml"


def test_every_report_of_a_sliced_run_names_its_built_node_and_its_stand_ins(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lab", "run", str(SLICED), "--probe", "cluster-ip-to-stand-in", "--json"]
        + ["--html", str(tmp_path / "report")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    document = json.loads(done.stdout)
    (record,) = document["results"]
    # The probe went through node1's rules to a stand-in's pod: an address of node2's or node3's podCIDR.
    assert record["observed"]["backend"].split("|")[0].startswith(("10.244.2.", "10.244.3.")), record["observed"]
    (entry,) = document["sliced"]
    assert (entry["scenario"], entry["built"], entry["stand_ins"]) == ("stand-ins", ["node1"], ["node2", "node3"])
    assert "no kube-proxy of their own" in entry["stand_in"]
    assert "sliced: built node1; stand-ins (" in done.stderr and "): node2, node3" in done.stderr
    page = (tmp_path / "report" / "index.html").read_text()
    said = page.index('<p class="sliced">sliced: built node1; stand-ins (')
    assert page.index("): node2, node3</p>", said) < page.index('<article class="probe', said)
