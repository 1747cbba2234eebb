"""A kept flow's thread that meets an error it does not expect records it and carries on: it used to die with the
flow marked busy, and the next probe's `paused()` waited for it forever (a run hung until lab vm's time limit)."""

from __future__ import annotations

import socket
import threading

from lab.probe import flows
from lab.probe.client import ClientResult


def test_an_unexpected_error_in_the_flows_thread_is_recorded_and_does_not_hang_the_next_probe(monkeypatch):
    ours, theirs = socket.socketpair()
    monkeypatch.setattr(flows, "open_socket", lambda *_args: (ours, ClientResult("delivered", reply={"backend": "a"})))

    def broken(*_args: object) -> ClientResult:
        raise ValueError("Extra data: line 2 column 1")

    monkeypatch.setattr(flows, "exchange", broken)
    flow = flows.KeptFlow("unused", "10.0.0.1", 80, "UDP", timeout=0.1, every_ms=10)
    flow.resume()
    paused = threading.Event()

    def next_probe() -> None:
        with flow.paused():
            paused.set()

    for _ in range(3):  # the thread has met the error at least once before each pause
        thread = threading.Thread(target=next_probe, daemon=True)
        thread.start()
        assert paused.wait(timeout=5), "paused() never returned: the flow's thread died busy"
        paused.clear()
        thread.join(timeout=5)
    flow.close()
    theirs.close()
    errors = [e for e in flow.history[1:] if e.outcome]
    assert errors and all(e.outcome == "closed" for e in errors), flow.history
