"""A network namespace of a test's own, in the way pyroute2's test fixtures hand each test a fresh one: nothing
in it but loopback, commands run inside it, gone when the test ends. It is held by an `unshare -n` process that
the kernel kills when the test process dies (PR_SET_PDEATHSIG), and it has no name in /run/netns: even a killed
run leaves nothing behind, and the host's own namespace is never entered."""

from __future__ import annotations

import ctypes
import signal
import subprocess
from types import TracebackType

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class FreshNetns:
    def __init__(self) -> None:
        self.holder = subprocess.Popen(["unshare", "-n", "sleep", "infinity"], preexec_fn=_die_with_parent)

    def run(self, script: str, *args: str, input: str = "", timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """`sh -ec SCRIPT sh ARGS...` inside the namespace, `input` on its stdin."""
        argv = ["nsenter", "-t", str(self.holder.pid), "-n", "sh", "-ec", script, "sh", *args]
        return subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, check=False)

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait()

    def __enter__(self) -> FreshNetns:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
