"""`lab run FILE --json` as a user runs it, from the repository: its results, once it exited 0."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from support.host import REPO


def run_results(*argv: str, timeout: float = 600) -> list[dict[str, Any]]:
    """The records of `lab run ARGV --json` (the run must pass: its stderr is the failure's message)."""
    done = subprocess.run(
        [sys.executable, "-m", "lab", "run", *argv, "--json"], capture_output=True, text=True, cwd=REPO, timeout=timeout
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    return json.loads(done.stdout)["results"]
