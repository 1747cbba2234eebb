"""A step's command, bounded in time: a command that does not end (`sleep 400`, a server started in the
foreground) would hold the run forever."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess

from lab.install.tools import InstallError, netns_argv


def run_bounded(netns: str, node: str, argv: tuple[str, ...], seconds: float) -> str:
    """argv in a lab namespace, for at most `seconds`; its output, or an error saying what it said or that it was
    killed. The command leads a process group of its own, so that what it started is killed with it."""
    command = netns_argv(netns, argv)
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as process:
        try:
            out, said = process.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise InstallError(
                f"`{shlex.join(argv)}` on {node} did not finish within {seconds:g} s, and was killed with every "
                f"process it started (a `run:` step's `timeout:` gives it more, at most 3600)"
            ) from None
        except BaseException:  # Ctrl-C or SIGTERM while it runs: nothing of it outlives the run
            _kill_group(process)
            raise
    if process.returncode != 0:
        said = (said or out).strip()
        raise InstallError(f"`{shlex.join(argv)}` in {netns} exited with {process.returncode}: {said}")
    return out


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended meanwhile, and its group with it
        os.killpg(process.pid, signal.SIGKILL)
    # Not communicate(): a process that left the group (setsid) may hold the pipes open for as long as it runs.
    process.wait()
