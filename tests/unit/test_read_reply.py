"""A backend's answer read from a socket (lab/probe/client.py read_reply): a held connection's late answer to an
earlier line, arriving with this exchange's, is not this exchange's answer, and no error either."""

from __future__ import annotations

import json
import socket

from lab.probe.client import read_reply


def test_the_last_line_is_this_exchanges_answer():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        late, now = {"pod": "web-0", "seq": "1"}, {"pod": "web-0", "seq": "2"}
        theirs.sendall(json.dumps(late).encode() + b"\n" + json.dumps(now).encode() + b"\n")
        assert read_reply(ours) == now


def test_an_http_answer_and_a_closed_connection():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"pod": "web-1"}\n')
        assert read_reply(ours) == {"pod": "web-1"}
        theirs.shutdown(socket.SHUT_WR)
        assert read_reply(ours) == {}
