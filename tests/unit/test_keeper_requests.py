"""The live keeper's request schema and its catch-all, without a lab: each refusal names its field, and a request
whose probe fails inside the keeper is answered with an error and logged with its traceback, never the keeper's end."""

from __future__ import annotations

import logging
import socket
import threading
from types import SimpleNamespace

import pytest

from lab.live import commands
from lab.live.keeper import _answer
from lab.live.record import LiveLabError
from lab.live.request import RequestError, parse_request


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (b'{"name": "x", "width": 1e400}', "width: expected a whole number, not inf"),
        (b"[" * 1000, "recursion limit exceeded"),
        (b'{"name": "x", "verbose": "yes"}', "verbose: expected true or false, not 'yes'"),
        (
            b'{"name": "x", "from": "a", "to": "b:80"}',
            "a scenario probe (name) or an ad hoc one (from and to), not both",
        ),
        (b"{}", "a request names a scenario probe (name) or an ad hoc one (from and to)"),
        (b'{"from": "a", "to": "b:80", "via": "hostPort"}', "via: expected 'clusterIP'"),
        (b'{"name": "' + b"n" * 300 + b'"}', "name: expected at most 253 character(s)"),
        (b'["name"]', "expected a mapping of fields"),
    ],
)
def test_a_bad_request_is_refused_with_its_field(line, said):
    with pytest.raises(RequestError) as caught:
        parse_request(line)
    assert str(caught.value).startswith("bad request: ") and said in str(caught.value)


def test_a_good_request_reads_as_the_client_wrote_it():
    request = parse_request(b'{"from": "client", "to": "web:80", "protocol": "UDP", "width": 80, "color": true}')
    assert request.adhoc() == {"from": "client", "to": "web:80", "protocol": "UDP", "via": None, "node": None}
    assert (request.width, request.color, request.verbose) == (80, True, False)


def test_a_failure_inside_the_keeper_is_answered_and_logged(tmp_path):
    def fails(_: bytes) -> dict:
        raise ZeroDivisionError("a bug")

    log = logging.getLogger("test-keeper")
    handler = logging.FileHandler(tmp_path / "keeper.log")
    log.addHandler(handler)
    try:
        requests = SimpleNamespace(answer=fails, lab=SimpleNamespace(log=str(tmp_path / "keeper.log")))
        answer = _answer(requests, b'{"name": "x"}', log)  # type: ignore[arg-type]
    finally:
        log.removeHandler(handler)
        handler.close()
    assert answer["error"].startswith("the keeper failed on this request (ZeroDivisionError: a bug); the lab is")
    logged = (tmp_path / "keeper.log").read_text()
    assert "ZeroDivisionError: a bug" in logged and "Traceback" in logged


@pytest.mark.parametrize(
    ("said", "error"),
    [
        (b"", "closed the connection without an answer"),
        (b"{}\n", "answered something that is no probe's result: b'{}\\n'"),
        (b'{"text": "x"}\n', "answered something that is no probe's result"),
        (b"[" * 5000 + b"\n", "did not answer"),
        (
            b'{"error": "bad request: width: expected a whole number, not inf"}\n',
            "bad request: width: expected a whole number",
        ),
    ],
    ids=["nothing", "empty", "no-record", "nesting", "refused"],
)
def test_lab_probe_says_what_the_keeper_answered_instead_of_a_result(tmp_path, monkeypatch, said, error):
    """The client side of the socket: whatever comes back (a keeper that died says nothing), one clear error."""
    path = str(tmp_path / "keeper.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.makefile("rb").readline()
            conn.sendall(said)

    thread = threading.Thread(target=answer)
    thread.start()
    monkeypatch.setattr(commands, "pick", lambda _: SimpleNamespace(socket=path, prefix="lab-000000"))
    try:
        with pytest.raises(LiveLabError) as caught:
            commands.probe(None, {"name": "x"})
    finally:
        thread.join(5)
        server.close()
    assert error in str(caught.value)
