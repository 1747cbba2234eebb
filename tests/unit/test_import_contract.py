"""The tree is the pipeline: a stage imports only the stages before it, and within probe a step (send, observe,
explain) only the steps before it (import-linter's contracts in pyproject.toml, [tool.importlinter]). This test
runs the contracts on the tree, and on copies of it with one wrong import added, to show they catch one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize(
    ("module", "wrong", "said"),
    [
        # A stage importing a later stage.
        (
            "describe/errors.py",
            "from lab.report import records",
            ["lab.describe is not allowed to import lab.report", "lab.describe.errors -> lab.report.records"],
        ),
        # A probe's sending importing its observing, which comes after it.
        ("probe/send.py", "from lab.probe import observe", ["lab.probe.send -> lab.probe.observe"]),
    ],
)
def test_the_contract_fails_when_a_module_imports_a_later_one(tmp_path, module, wrong, said):
    shutil.copytree(REPO / "lab", tmp_path / "lab", ignore=shutil.ignore_patterns("__pycache__"))
    changed = tmp_path / "lab" / module
    changed.write_text(changed.read_text() + f"\n{wrong}  # noqa: F401\n")
    done = lint_imports(tmp_path)
    assert done.returncode != 0
    for line in said:
        assert line in done.stdout


def test_the_contract_keeps_report_rendering_and_the_machine_out_of_the_stages(tmp_path):
    shutil.copytree(REPO / "lab", tmp_path / "lab", ignore=shutil.ignore_patterns("__pycache__"))
    html = tmp_path / "lab" / "report" / "html.py"
    html.write_text(html.read_text() + "\nfrom lab import pipeline  # noqa: F401\n")  # report running a variant
    network = tmp_path / "lab" / "describe" / "resolve" / "network.py"
    network.write_text(network.read_text() + "\nfrom lab import doctor  # noqa: F401\n")  # describe asking the machine
    done = lint_imports(tmp_path)
    assert done.returncode != 0
    assert "lab.report is not allowed to import lab.pipeline" in done.stdout
    assert "lab.describe is not allowed to import lab.doctor" in done.stdout
