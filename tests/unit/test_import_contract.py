"""The tree is the pipeline: a stage imports only the stages before it (import-linter's contracts in
pyproject.toml, [tool.importlinter]). This test runs the contract on the tree, and on a copy of it with one
wrong import added, to show the contract catches one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}  # this tree's `lab`, before any installed one
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
        capture_output=True, text=True, cwd=root, env=env, check=False,
    )  # fmt: skip


def test_every_stage_imports_only_earlier_stages():
    done = lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 3 kept, 0 broken." in done.stdout


def test_the_contract_fails_when_a_stage_imports_a_later_one(tmp_path):
    shutil.copytree(REPO / "lab", tmp_path / "lab", ignore=shutil.ignore_patterns("__pycache__"))
    errors = tmp_path / "lab" / "describe" / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom lab.report import records, F401\n")
    done = lint_imports(tmp_path)
    assert done.returncode != 0
    assert "lab.describe is not allowed to import lab.report" in done.stdout
    assert "lab.describe.errors -> lab.report.records" in done.stdout


def test_the_contract_fails_when_a_probe_step_imports_a_later_one(tmp_path):
    shutil.copytree(REPO / "lab", tmp_path / "lab", ignore=shutil.ignore_patterns("__pycache__"))
    send = tmp_path / "lab" / "probe" / "send.py"
    send.write_text(send.read_text() + "\nfrom lab.probe import observe  # noqa: F401\n")
    done = lint_imports(tmp_path)
    assert done.returncode != 0
    assert "lab.probe.send -> lab.probe.observe" in done.stdout
