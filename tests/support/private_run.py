"""A command run where /run is private: a fresh tmpfs in a mount namespace of its own, so the machine's
/run/netns and /run/lab are never seen. Lab runs made there (and `lab down`, `lab ls`) meet only each other, never
another user's runs on the host, and whatever they pin in /run goes when the last process inside ends."""

from __future__ import annotations

import json
import subprocess
import sys

from support.host import REPO

PRIVATE_RUN = 'mount -t tmpfs -o mode=0755 lab-test /run && mkdir /run/netns /run/lab && exec "$@"'


def private_run(*argv: str) -> list[str]:
    """The argv that runs `argv` with a private /run."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", PRIVATE_RUN, "sh", *argv]


def report_of(code: str, *args: str, timeout: float = 60) -> dict:
    """Run Python `code` (with `args` as sys.argv[1:]) from the repository with a private /run; what it printed
    last, as JSON, comes back."""
    done = subprocess.run(
        private_run(sys.executable, "-c", code, *args), capture_output=True, text=True, cwd=REPO, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])
