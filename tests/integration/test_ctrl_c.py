"""Ctrl-C to a real `lab` process, at several instants of its imports and of its work: one line and exit 130,
never a traceback. (An interrupt while the interpreter itself starts, before it runs any of lab, is Python's.)"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.host import REPO

LAB = REPO / ".venv" / "bin" / "lab"


def _mapped(pid: int, library: str) -> bool:
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("after", [0.0, 0.02, 0.1, 0.3, 0.6, 1.0])
def test_ctrl_c_while_lab_imports_or_works_is_one_line_and_130(after):
    # `lab validate` of the catalogue, twenty times over: imports, then seconds of work even on a quiet machine
    # (once over, it ended within 0.6 s there). pydantic's compiled core is mapped in the middle of lab's
    # imports: from there on, every instant is lab's to answer.
    files = [str(path) for path in sorted((REPO / "topologies").glob("*.yaml"))] * 20
    proc = subprocess.Popen(
        [str(LAB), "validate", *files], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    deadline = time.monotonic() + 60
    while not _mapped(proc.pid, "pydantic_core") and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(after)
    assert proc.poll() is None, "lab ended before the interrupt: the test would mean nothing"
    proc.send_signal(signal.SIGINT)
    _, said = proc.communicate(timeout=60)
    assert "Traceback" not in said, said
    assert proc.returncode == 130, said
    assert len(said.strip().splitlines()) == 1 and said.startswith("interrupted"), said
