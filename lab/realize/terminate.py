"""SIGTERM as an exception raised where the run is, so that every `finally` tears its namespaces down (the lab
CLI exits 143 after it, like a shell; pytest stops as on Ctrl-C)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

_owner = 0  # the process that installed the handler (a live lab's keeper is a fork of the one that imported this)
_terminating = False
_deferring = 0  # inside deferred(): SIGTERM waits for the block's end
_pending = False  # a SIGTERM came inside deferred() and is still to be raised


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread wherever it was."""


def _raise(*_: object) -> None:
    # Helper processes forked by pyroute2 inherit this handler; they must just die, not run our teardown.
    if os.getpid() != _owner:
        os._exit(143)
    global _terminating, _pending
    _terminating = True
    if _deferring:
        _pending = True
    else:
        raise Terminated


@contextmanager
def deferred() -> Iterator[None]:
    """SIGTERM raised when the block is left, not inside it: a pyroute2 request runs an asyncio loop, and an
    exception raised in there leaves its async generators half-closed, which print tracebacks when collected. A
    request takes about a millisecond. Only a SIGTERM that came inside is raised: teardown after one already
    raised (deferred too) must go on to its end."""
    global _deferring, _pending
    if threading.current_thread() is not threading.main_thread():
        yield  # the handler runs in the main thread only, and only its blocks defer it
        return
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    if _pending and not _deferring:
        _pending = False
        raise Terminated


def close_all(closers: Iterable[Callable[[], object]]) -> None:
    """Call every closer in turn whatever one of them raised (the first failure is raised at the end), with
    SIGTERM waiting for the last: a teardown stopped halfway leaves what came after it running (a tracer inside a
    namespace about to be removed)."""
    failure: BaseException | None = None
    with deferred():
        for close in closers:
            try:
                close()
            except BaseException as exc:  # noqa: BLE001  # the rest are closed all the same, then it is raised
                failure = failure or exc
    if failure is not None:
        raise failure


def handle_sigterm() -> None:
    global _owner
    _owner = os.getpid()
    signal.signal(signal.SIGTERM, _raise)


def stop_if_terminated() -> None:
    """Raise Terminated again if SIGTERM's first one was swallowed (Python ignores exceptions in weakref
    callbacks and __del__, where the signal may have landed), so the run still stops at the next probe."""
    if _terminating:
        raise Terminated
