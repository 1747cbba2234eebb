"""A scenario item that fails with an error (not a verdict) reports the error and lab's own frames only: under a
plugin's item pytest's long traceback is hundreds of lines of pytest's and pluggy's internals per item (what the
VM test's guest printed, twice)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from support.host import REPO

CONFTEST = """
import lab.pytest_plugin as plugin
from lab.probe.evidence.base import EvidenceError

def interrupted(topology):
    raise EvidenceError("timed out after 10.0 s waiting for nft monitor trace in lab-0abc12-node1")

plugin.run_variant = interrupted  # what a variant's run raises, without building it
"""


def test_an_error_in_a_scenario_item_is_reported_in_a_few_lines(tmp_path):
    shutil.copy(REPO / "topologies" / "invalid-reset.yaml", tmp_path / "s.yaml")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "s.yaml"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 1, done.stdout[-3000:]
    failures = done.stdout.split(" FAILURES ", 1)[1].split(" short test summary info ", 1)[0]
    items = done.stdout.count("\nFAILED s.yaml::")  # every item of the file (its probes in each variant) fails
    assert items >= 4, done.stdout[-3000:]
    assert failures.count("E   lab.probe.evidence.base.EvidenceError: timed out after 10.0 s") == items
    assert "pluggy" not in failures and "_pytest" not in failures
    assert len(failures.splitlines()) <= 6 * items, failures
