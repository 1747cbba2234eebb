"""`pytest -n N` keeps an xdist group's items in one worker with this project's settings (pyproject's addopts,
and a pytest that pytest-xdist can group under: pytest 9.2 silently lost the groups, pytest-dev/pytest-xdist#1386).
A scenario file's variants are built once per worker, and the tests that run `lab down` must not run beside a live
lab's, so a lost group is a wrong result, not a slower one."""

from __future__ import annotations

import re
import subprocess
import sys

from support.host import REPO

GROUPED = """\
import pytest

pytestmark = pytest.mark.xdist_group("together")


@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    pass
"""
LOOSE = """\
import time

import pytest


@pytest.mark.parametrize("i", range(6))
def test_loose(i):
    time.sleep(0.05)
"""


def test_an_xdist_groups_items_run_in_one_worker(tmp_path):
    (tmp_path / "test_a.py").write_text(GROUPED)
    (tmp_path / "test_b.py").write_text(GROUPED.replace("test_grouped", "test_grouped_too"))
    (tmp_path / "test_c.py").write_text(LOOSE)
    config = ["-c", str(REPO / "pyproject.toml"), "--rootdir", str(tmp_path), "-p", "no:cacheprovider"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *config, "-n", "2", "-v", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ran = re.findall(r"^\[(gw\d)\] .* PASSED (\S+)\s*$", done.stdout, re.MULTILINE)
    grouped = {worker for worker, nodeid in ran if "test_grouped" in nodeid}
    assert len(ran) == 18 and len(grouped) == 1, done.stdout
    assert all(nodeid.endswith("@together") for _, nodeid in ran if "test_grouped" in nodeid), done.stdout
