"""The echo servers' listeners of a whole cluster made on one thread moving from namespace to namespace
(EchoServers.listen_all, lab.realize.enter.in_netns_each): at ten thousand pods a thread each cost seconds of the
probe session's start. Each listener still listens in its own namespace: a client there reaches it over lo, and
the answer names it; a client of another namespace does not."""

from __future__ import annotations

import os
import threading

import pytest

from lab.install.echo import EchoServers, Listener
from lab.probe.client import send
from lab.realize import enter
from lab.realize.enter import create_netns_all, in_netns_each
from lab.realize.links import _netlink
from lab.realize.rtnl import Batch
from lab.realize.runs import new_prefix, record, release

LOOPBACK = 1


@pytest.fixture
def three_namespaces(host_unchanged):
    prefix = new_prefix()
    names = [f"{prefix}-a", f"{prefix}-b", f"{prefix}-c"]
    record(prefix, *names)
    socks = create_netns_all(names, _netlink)
    try:
        for name, sock in zip(names, socks, strict=True):
            batch = Batch(sock, name)
            batch.up(LOOPBACK)
            batch.commit()
        yield names
    finally:
        for sock in socks:
            sock.close()
        release(prefix)


class _Counted(threading.Thread):
    started: list[str] = []

    def start(self) -> None:
        _Counted.started.append(self.name)
        super().start()


def test_listeners_of_many_namespaces_are_made_on_one_thread_each_in_its_own(three_namespaces, monkeypatch):
    a, b, c = three_namespaces
    listeners = [
        Listener("web-a", "node", a, 8080, "TCP"),
        Listener("web-a", "node", a, 8081, "UDP"),
        Listener("web-b", "node", b, 8080, "TCP"),
    ]
    monkeypatch.setattr(enter.threading, "Thread", _Counted)
    _Counted.started.clear()
    echo = EchoServers()
    try:
        echo.listen_all(listeners)
        assert _Counted.started == ["netns:each"]
        monkeypatch.undo()
        echo.start()
        for netns, port, protocol, backend in (
            (a, 8080, "TCP", "web-a"),
            (a, 8081, "UDP", "web-a"),
            (b, 8080, "TCP", "web-b"),
        ):
            result = send(netns, "127.0.0.1", port, protocol, timeout=2.0)
            assert result.outcome == "delivered" and result.reply and result.reply["backend"] == backend, result
        # Nothing listens in c: its own kernel refuses the connection.
        assert send(c, "127.0.0.1", 8080, "TCP", timeout=2.0).outcome == "refused"
    finally:
        echo.close()


def test_a_namespace_entered_again_only_where_the_calls_move(three_namespaces):
    a, b, _ = three_namespaces

    def here() -> int:
        return os.stat("/proc/thread-self/ns/net").st_ino

    seen = in_netns_each([(a, here), (a, here), (b, here), (a, here)])
    inodes = {name: os.stat(f"/run/netns/{name}").st_ino for name in (a, b)}
    assert seen == [inodes[a], inodes[a], inodes[b], inodes[a]]
