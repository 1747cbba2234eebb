"""Batched rtnetlink requests (lab.realize.rtnl) on the kernel: what a batch asks is what the namespace has, a
batch longer than one write lands whole, and a request the kernel refuses is named with the kernel's reason."""

from __future__ import annotations

import subprocess

import pytest

from lab.realize.enter import NamespaceError, create_netns_all
from lab.realize.links import _netlink
from lab.realize.rtnl import SEND_LIMIT, Batch
from lab.realize.runs import new_prefix, record, release


@pytest.fixture
def two_namespaces(host_unchanged):
    prefix = new_prefix()
    names = [f"{prefix}-a", f"{prefix}-b"]
    record(prefix, *names)
    socks = create_netns_all(names, _netlink)
    try:
        yield names, socks
    finally:
        for sock in socks:
            sock.close()
        release(prefix)


def ip(netns: str, *argv: str) -> str:
    return subprocess.run(["ip", "-n", netns, *argv], capture_output=True, text=True, check=True).stdout


def test_a_batch_builds_what_it_asks(two_namespaces):
    (a, b), (sock_a, sock_b) = two_namespaces
    with open(f"/run/netns/{b}") as peer:
        here = Batch(sock_a, a)
        count = SEND_LIMIT + 10  # more than one write's worth: the rest goes in the next
        for i in range(count):
            here.veth(f"v{i}", 1000 + i, f"p{i}", 2000 + i, peer.fileno())
            here.up(1000 + i)
        here.commit()
    there = Batch(sock_b, b)
    there.up(1)
    there.address(2000, "10.1.0.2", 24)
    there.up(2000)
    there.route("0.0.0.0/0", gateway="10.1.0.1")
    there.route("10.9.0.0/16", oif=2000, scope=253)
    there.commit()
    assert len(ip(a, "-o", "link", "show", "up", "type", "veth").splitlines()) == count
    assert "2000: p0@if1000" in ip(b, "-o", "link", "show", "p0")
    assert "inet 10.1.0.2/24" in ip(b, "-o", "addr", "show", "p0")
    assert ip(b, "route").splitlines() == [
        "default via 10.1.0.1 dev p0 proto static ",
        "10.1.0.0/24 dev p0 proto kernel scope link src 10.1.0.2 ",
        "10.9.0.0/16 dev p0 proto static scope link ",
    ]


def test_a_refused_request_is_named_with_the_kernels_reason(two_namespaces):
    (a, _), (sock_a, _) = two_namespaces
    batch = Batch(sock_a, a)
    batch.up(1)
    batch.address(1, "10.2.0.1", 32)
    batch.address(1, "10.2.0.1", 32)
    with pytest.raises(NamespaceError, match=rf"{a}: address 10.2.0.1/32 on link 1 refused by the kernel: .*EEXIST"):
        batch.commit()
    batch.route("10.3.0.0/16", gateway="10.4.0.1")  # the socket is still usable, and no gateway is reachable
    with pytest.raises(NamespaceError, match=r"route 10.3.0.0/16 via 10.4.0.1 refused by the kernel: .*ENETUNREACH"):
        batch.commit()
