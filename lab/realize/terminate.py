"""SIGTERM as an exception raised where the run is, so that every `finally` tears its namespaces down (the lab
CLI exits 143 after it, like a shell; pytest stops as on Ctrl-C)."""

from __future__ import annotations

import os
import signal

_owner = 0  # the process that installed the handler (a live lab's keeper is a fork of the one that imported this)
_terminating = False


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread wherever it was."""


def _raise(*_: object) -> None:
    # Helper processes forked by pyroute2 inherit this handler; they must just die, not run our teardown.
    if os.getpid() != _owner:
        os._exit(143)
    global _terminating
    _terminating = True
    raise Terminated


def handle_sigterm() -> None:
    global _owner
    _owner = os.getpid()
    signal.signal(signal.SIGTERM, _raise)


def stop_if_terminated() -> None:
    """Raise Terminated again if SIGTERM's first one was swallowed (Python ignores exceptions in weakref
    callbacks and __del__, where the signal may have landed), so the run still stops at the next probe."""
    if _terminating:
        raise Terminated
