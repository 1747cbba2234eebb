"""close_all: a teardown goes to its end whatever one closer raises, and a SIGTERM that lands inside it (a real
signal to this process) is raised only once every closer has run."""

from __future__ import annotations

import os
import signal

import pytest

from lab.realize import terminate


@pytest.fixture
def sigterm_handled(monkeypatch):
    monkeypatch.setattr(terminate, "_terminating", False)
    monkeypatch.setattr(terminate, "_pending", False)
    previous = signal.getsignal(signal.SIGTERM)
    terminate.handle_sigterm()
    yield
    signal.signal(signal.SIGTERM, previous)


def test_every_closer_runs_and_the_first_failure_is_raised_after_them():
    closed = []

    def fails(name: str) -> None:
        closed.append(name)
        raise RuntimeError(name)

    with pytest.raises(RuntimeError) as raised:
        terminate.close_all([lambda: fails("first"), lambda: closed.append("second"), lambda: fails("third")])
    assert closed == ["first", "second", "third"] and str(raised.value) == "first"


def test_a_sigterm_inside_a_closer_waits_for_the_rest(sigterm_handled):
    closed = []

    def signalled() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs between bytecodes of the main thread: surely by now
            closed.append("signalled") if not closed else None
        closed.append("after the signal")

    with pytest.raises(terminate.Terminated):
        terminate.close_all([signalled, lambda: closed.append("next")])
    assert closed == ["signalled", "after the signal", "next"]


def test_teardown_after_a_sigterm_already_raised_goes_to_its_end(sigterm_handled):
    closed = []
    with pytest.raises(terminate.Terminated):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # raised in here, between two bytecodes
                pass
        finally:
            terminate.close_all([lambda: closed.append("first")])
            closed.append("after the teardown")
    assert closed == ["first", "after the teardown"]
