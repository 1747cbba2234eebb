"""A time limit for code that could block forever (reading a FIFO, a keeper that stopped answering): past it, the
test gets Hung, a failure it can report, instead of hanging."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


class Hung(Exception):
    pass


def _on_alarm(*_: object) -> None:
    raise Hung


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
