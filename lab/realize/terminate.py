"""SIGTERM as an exception raised where the run is, so that every `finally` tears its namespaces down (the lab
CLI exits 143 after it, like a shell; pytest stops as on Ctrl-C)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

_owner = 0  # the process that installed the handler (a live lab's keeper is a fork of the one that imported this)
_terminating = False
_deferring = 0  # inside deferred(): SIGTERM waits for the block's end


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread wherever it was."""


def _raise(*_: object) -> None:
    # Helper processes forked by pyroute2 inherit this handler; they must just die, not run our teardown.
    if os.getpid() != _owner:
        os._exit(143)
    global _terminating
    _terminating = True
    if not _deferring:
        raise Terminated


@contextmanager
def deferred() -> Iterator[None]:
    """SIGTERM raised when the block is left, not inside it: a pyroute2 request runs an asyncio loop, and an
    exception raised in there leaves its async generators half-closed, which print tracebacks when collected. A
    request takes about a millisecond."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    if _terminating and not _deferring:
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
