"""A command run where /run is private: a fresh tmpfs in a mount namespace of its own, so the machine's
/run/netns and /run/lab are never seen. Lab runs made there (and `lab down`, `lab ls`) meet only each other, never
another user's runs on the host, and whatever they pin in /run goes when the last process inside ends."""

from __future__ import annotations

import ctypes
import json
import os
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


CLONE_NEWNS = 0x00020000


def keep_lab_state_private() -> None:
    """From now on this process, and every process it starts, has /run/netns and /run/lab of its own (fresh
    tmpfs in a mount namespace of its own; the rest of the machine's files are shared as before): the test
    session's runs, `lab down`s and `lab ls`es meet no other run on the machine (another user's, another
    pytest's, another xdist worker's), and a killed run's namespaces go when the session ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) for a private /run/netns and /run/lab")
    # Mounts made from here on stay in this namespace, and the machine's never reach it.
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    for path, mode in (("/run/netns", "0755"), ("/run/lab", "0700")):  # as ip netns and lab make them
        os.makedirs(path, mode=int(mode, 8), exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"mode={mode}", "lab-test", path], check=True)
