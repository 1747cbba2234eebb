"""A network namespace of a test's own, in the way pyroute2's test fixtures hand each test a fresh one: nothing
in it but loopback, commands run inside it, gone when the test ends. It is held by an `unshare -n` process that
the kernel kills when the test process dies (PR_SET_PDEATHSIG), and it has no name in /run/netns: even a killed
run leaves nothing behind, and the host's own namespace is never entered.

The holder says it is ready only from inside its new namespace: until `unshare` has run, its process is still
in the host's namespace, and `nsenter -t PID -n` would enter that (a race that once loaded kube-proxy's test
ruleset into the host). Every command checks again that the namespace is not the host's."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from types import TracebackType

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class FreshNetns:
    def __init__(self) -> None:
        # The shell runs after unshare(CLONE_NEWNET): its "ready" proves the holder is in the new namespace.
        self.holder = subprocess.Popen(
            ["unshare", "-n", "sh", "-c", "echo ready; exec sleep infinity"],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=_die_with_parent,
        )
        assert self.holder.stdout is not None
        if self.holder.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError("unshare -n did not start a namespace holder")
        self._check_not_host()

    def _check_not_host(self) -> None:
        """Refuse to go on if the holder's namespace is the host's (the test's own)."""
        mine, held = os.stat("/proc/self/ns/net"), os.stat(f"/proc/{self.holder.pid}/ns/net")
        if (mine.st_dev, mine.st_ino) == (held.st_dev, held.st_ino):
            self.close()
            raise RuntimeError("the namespace holder is in the host's network namespace: refusing to run in it")

    def run(self, script: str, *args: str, input: str = "", timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """`sh -ec SCRIPT sh ARGS...` inside the namespace, `input` on its stdin."""
        self._check_not_host()
        argv = ["nsenter", "-t", str(self.holder.pid), "-n", "sh", "-ec", script, "sh", *args]
        return subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, check=False)

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait()
        if self.holder.stdout is not None:
            self.holder.stdout.close()

    def __enter__(self) -> FreshNetns:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
