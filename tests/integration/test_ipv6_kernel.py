"""IPv6 through realize's and probe's own functions on the kernel (tests/support/ipv6.py builds a, b and c around
hub): addresses usable the moment they are added (no DAD wait), neighbour discovery across a lab bridge,
forwarding and br_netfilter for IPv6 in the lab's namespaces only, the echo servers and clients over IPv6, the
captures and `conntrack -f ipv6` reading what went by, and ICMPv6 errors through IPV6_RECVERR."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest
from support.host import lab_namespaces
from support.ipv6 import HUB_LAN, OVERLAY, UNDERLAY, VXLAN_PORT, A, B, C, Ipv6Lab, ipv6_lab, vxlan_lab

from lab.install.conntrack import udp_entries
from lab.install.echo import EchoServers, Listener
from lab.probe.capture import Captures
from lab.probe.client import send


def _read(netns: str, *argv: str) -> str:
    return subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def lab(host_unchanged) -> Iterator[Ipv6Lab]:
    with ipv6_lab() as built:
        yield built
    assert not set(built.namespaces.values()) & set(lab_namespaces()), "the run's teardown left namespaces"


@pytest.fixture
def served(lab) -> Iterator[tuple[Ipv6Lab, EchoServers, Captures]]:
    echo, captures = EchoServers(), Captures()
    try:
        for backend in ("b", "c"):
            echo.listen(Listener(backend, "hub", lab.namespaces[backend], 8080, "TCP", families=("IPv4", "IPv6")))
            echo.listen(Listener(backend, "hub", lab.namespaces[backend], 8081, "UDP", families=("IPv6",)))
        captures.add("hub", lab.namespaces["hub"], {"to-a", "br0", "to-c"})
        echo.start()
        captures.start()
        yield lab, echo, captures
    finally:
        echo.close()
        captures.close()


def test_addresses_are_usable_at_once_and_ipv6_is_on_in_the_labs_namespaces_only(lab):
    start = time.monotonic()
    for actor in ("a", "b", "c"):
        # Nothing tentative: no address waits for duplicate address detection.
        assert _read(lab.namespaces[actor], "ip", "-6", "addr", "show", "tentative") == ""
    hub = lab.namespaces["hub"]
    assert _read(hub, "sysctl", "-n", "net.ipv6.conf.all.forwarding", "net.bridge.bridge-nf-call-ip6tables") == "1\n1\n"
    # The first packet a sends, just built: a over the bridge to b (neighbour discovery across it), and through
    # hub's forwarding to c; a TCP connection each, answered.
    for target in (B, C):
        result = send(lab.namespaces["a"], target, 22, "TCP", timeout=2.0)
        assert result.outcome == "refused", result  # a RST from the target's kernel: it was reached
    assert time.monotonic() - start < 1.0, "DAD would have held the addresses for a second or more"
    assert f"{HUB_LAN} dev eth0 lladdr" in _read(lab.namespaces["a"], "ip", "-6", "neigh", "show", HUB_LAN)


def test_tcp_and_udp_over_ipv6_reach_the_echo_servers_which_see_the_clients_address(served):
    lab, echo, captures = served
    mark = captures.mark()
    for target, backend in ((B, "b"), (C, "c")):
        for protocol, port in (("TCP", 8080), ("UDP", 8081)):
            result = send(lab.namespaces["a"], target, port, protocol, timeout=2.0)
            assert result.outcome == "delivered", result
            assert result.reply is not None and result.reply["backend"] == backend
            assert result.reply["peer"] == result.local and result.local.startswith(f"[{A}]:")
            assert result.reply["local"] == f"[{target}]:{port}"
    assert {(a.backend, a.protocol, a.peer_ip) for a in echo.arrivals} == {
        (backend, protocol, A) for backend in ("b", "c") for protocol in ("TCP", "UDP")
    }
    seen = [f.summary() for f in captures.since(mark) if f.opens_or_ends]
    # The SYN to c where hub forwards it, and its SYN-ACK where hub sends it back to a over the bridge.
    assert any(s and s.startswith(f"[{A}]:") and s.endswith(f"> [{C}]:8080 tcp [S]") for s in seen), seen
    assert any(s and s.startswith(f"[{C}]:8080 > [{A}]:") and s.endswith("tcp [S.]") for s in seen), seen


def test_icmpv6_errors_reach_a_udp_client_through_ipv6_recverr(served):
    lab, _, captures = served
    mark = captures.mark()
    closed = send(lab.namespaces["a"], C, 9999, "UDP", timeout=2.0)
    assert (closed.outcome, closed.error) == ("refused", f"ICMPv6 port unreachable (type 1 code 4) from {C}")
    nowhere = send(lab.namespaces["a"], "fd00:24:3::9", 9999, "UDP", timeout=2.0)
    assert nowhere.outcome == "unreachable"
    assert nowhere.error == f"ICMPv6 no route to destination (type 1 code 0) from {HUB_LAN}"
    assert f"{C} > {A} icmp6 type 1 code 4" in [f.summary() for f in captures.since(mark)]


def test_conntrack_lists_the_ipv6_flows_hub_forwarded(served):
    lab, _, _ = served
    hub = lab.namespaces["hub"]
    # conntrack hooks a namespace's traffic once a rule there needs it.
    _read(hub, "ip6tables", "-A", "FORWARD", "-m", "conntrack", "--ctstate", "NEW", "-j", "ACCEPT")
    result = send(lab.namespaces["a"], C, 8081, "UDP", timeout=2.0)
    assert result.outcome == "delivered", result
    sport = int(result.local.rpartition(":")[2])
    entries = [e for e in udp_entries(hub, "ipv6") if f"sport={sport} " in e.text]
    assert [(e.orig_src, e.orig_dst, e.orig_dport, e.reply_src) for e in entries] == [(A, C, 8081, C)]
    # Without -f, conntrack lists every family's entries; with -f ipv4, IPv4's only.
    assert [e.text for e in udp_entries(hub) if f"sport={sport} " in e.text] == [e.text for e in entries]
    assert not [e for e in udp_entries(hub, "ipv4") if f"sport={sport} " in e.text], "IPv4's table has no IPv6 flow"


def test_a_vxlan_tunnel_over_an_ipv6_underlay_carries_ipv6(host_unchanged):
    with vxlan_lab() as built:
        echo, captures = EchoServers(), Captures()
        try:
            echo.listen(Listener("n2", "n2", built.namespaces["n2"], 8080, "TCP", families=("IPv6",)))
            captures.add("n2", built.namespaces["n2"], {"eth0", "vxlan0"})
            echo.start()
            captures.start()
            result = send(built.namespaces["n1"], OVERLAY["n2"], 8080, "TCP", timeout=2.0)
            assert result.outcome == "delivered", result
            assert result.reply is not None and result.reply["peer"].startswith(f"[{OVERLAY['n1']}]:")
            frames = captures.since(0)
        finally:
            echo.close()
            captures.close()
    inner = [f for f in frames if f.ifname == "vxlan0" and (f.summary() or "").endswith("tcp [S]")]
    outer = [f.sockets for f in frames if f.ifname == "eth0" and f.sockets and not f.opens_or_ends]
    assert inner and inner[0].addresses == (OVERLAY["n1"], OVERLAY["n2"])
    # The encapsulation: UDP to the VXLAN port between the underlay's IPv6 addresses, not a frame of its own.
    assert any(
        dst == f"[{UNDERLAY['n2']}]:{VXLAN_PORT}" and src.startswith(f"[{UNDERLAY['n1']}]:") for src, dst in outer
    )
    assert not set(built.namespaces.values()) & set(lab_namespaces())
