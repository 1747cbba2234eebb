"""Path MTU from captured frames (lab/probe/pmtu.py), and the fields that ask for it: a probe's size, a node's
link mtu, the cluster's tunnelMTU."""

from __future__ import annotations

import socket
import struct
from dataclasses import replace

import pytest
from support.scenario import BASE, error_for, frame, frame6, write

from lab.describe.load import load_scenario
from lab.probe.pmtu import TooBig, path_mtu

CLIENT, SERVICE, POD = "10.244.1.2", "10.96.0.10", "10.244.2.2"


def tcp(sport: int, dport: int, data: int = 0) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 1, 0x50, 0x18, 502, 0, 0) + bytes(data)


def frag_needed(mtu: int, src: str, dst: str, sport: int, dport: int) -> bytes:
    """ICMP type 3 code 4 naming `mtu`, quoting an IPv4 header from src to dst and its ports."""
    quoted = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 1500, 0, 0x4000, 63, 6, 0, *map(socket.inet_aton, (src, dst)))
    return struct.pack("!BBHHH", 3, 4, 0, 0, mtu) + quoted + struct.pack("!HHI", sport, dport, 1)


def at(f, t: float):
    return replace(f, at=t)


BIG = at(frame("node1/veth-client", False, CLIENT, SERVICE, 6, tcp(40000, 80, 1460)), 1.0)
SYN_NATTED = at(frame("node1/vxlan.calico", True, CLIENT, POD, 6, tcp(40000, 8080)), 0.5)
ICMP_BACK = at(frame("node1/veth-client", True, SERVICE, CLIENT, 1, frag_needed(1450, CLIENT, SERVICE, 40000, 80)), 1.1)
SMALLER = at(frame("node2/veth-web", True, CLIENT, POD, 6, tcp(40000, 8080, 1410)), 1.2)


def test_the_icmp_names_its_mtu_and_the_packet_it_quotes():
    made = TooBig.of(ICMP_BACK)
    assert made == TooBig(SERVICE, CLIENT, 1450, f"{CLIENT}:40000 > {SERVICE}:80")
    assert TooBig.of(BIG) is None


def test_a_translated_icmp_is_told_with_where_the_big_packet_died_and_what_came_after():
    said = path_mtu([SYN_NATTED, BIG, ICMP_BACK, SMALLER], f"{CLIENT}:40000", f"{SERVICE}:80", {}, "iptables")
    assert said == (
        "the client's 1500-byte packet was last seen node1/veth-client in; node1 answered with ICMP fragmentation"
        f" needed (MTU 1450), from {SERVICE}; it went out to the client (node1/veth-client out) quoting"
        f" {CLIENT}:40000 > {SERVICE}:80, the address the client called (the packet had been DNATed to {POD}:8080:"
        " conntrack took the error as RELATED and translated it back); then its 1450-byte packets were last seen"
        " node2/veth-web out"
    )


def test_an_untranslated_icmp_matches_no_socket():
    raw = at(
        frame("node1/veth-client", True, "10.244.1.0", CLIENT, 1, frag_needed(1450, CLIENT, POD, 40000, 8080)), 1.1
    )
    said = path_mtu([BIG, raw], f"{CLIENT}:40000", f"{SERVICE}:80", {"10.244.1.0": "node1/tunl0"}, "iptables")
    assert "from 10.244.1.0 (node1/tunl0)" in said
    assert said.endswith(
        f"quoting {CLIENT}:40000 > {POD}:8080, not {SERVICE}:80 which the client called: its kernel matches it to"
        " no socket"
    )


def test_an_icmp_that_never_reaches_the_client_and_none_at_all():
    lost = at(
        frame("node2/vxlan.calico", False, "10.244.2.0", CLIENT, 1, frag_needed(1450, CLIENT, POD, 40000, 8080)), 1.1
    )
    said = path_mtu([BIG, lost], f"{CLIENT}:40000", f"{SERVICE}:80", {}, "iptables")
    assert said.endswith("it was last seen node2/vxlan.calico in: it did not go out to the client")
    assert path_mtu([BIG], f"{CLIENT}:40000", f"{SERVICE}:80", {}, "iptables") == (
        "the client's 1500-byte packets were last seen node1/veth-client in; no ICMP fragmentation needed came back"
    )


TUNNEL = BASE.replace("cluster: {", "cluster: {cni: routed-tunnel, tunnel: vxlan, ")


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (BASE + "    size: 0\n", "probes[0].size", "expected a number of at least 1"),
        (BASE + "    size: 70000\n", "probes[0].size", "expected a number of at most 65507"),
        (BASE + "    size: 1400\n    craft: outOfWindow\n", "probes[0]", "plain probe"),
        (BASE.replace("podCIDR: 10.244.2.0/24}", "podCIDR: 10.244.2.0/24, mtu: 100}"), "nodes[1].mtu", "576"),
        (BASE.replace("cluster: {", "cluster: {tunnelMTU: 1400, "), "cluster.tunnelMTU", "cni: routed-tunnel"),
        (
            TUNNEL.replace("podCIDR: 10.244.2.0/24}", "podCIDR: 10.244.2.0/24, mtu: 1400}").replace(
                "cluster: {", "cluster: {tunnelMTU: 1400, "
            ),
            "cluster.tunnelMTU",
            "needs 1400 + 50 bytes of encapsulation on node2's link, whose MTU is 1400: at most 1350",
        ),
    ],
)
def test_size_and_mtu_fields(tmp_path, text, field, message):
    error = error_for(tmp_path, text)
    assert error.field == field, str(error)
    assert message in error.message, str(error)


def test_the_fields_reach_the_topology(tmp_path):
    text = TUNNEL.replace("podCIDR: 10.244.2.0/24}", "podCIDR: 10.244.2.0/24, mtu: 9000}")
    text = text.replace("cluster: {", "cluster: {tunnelMTU: 1400, ") + "    size: 1472\n"
    (topo,) = load_scenario(write(tmp_path, text)).variants
    assert [n.mtu for n in topo.nodes] == [1500, 9000]
    assert topo.cluster.tunnel_mtu == 1400 and topo.probes[0].size == 1472


def test_ipvs_quotes_the_packet_before_translating_it():
    said = path_mtu([SYN_NATTED, BIG, ICMP_BACK, SMALLER], f"{CLIENT}:40000", f"{SERVICE}:80", {}, "ipvs")
    assert (
        f"the address the client called (IPVS, which sends the connection to {POD}:8080, checks the MTU before"
        " translating the packet: its error quotes it as the client sent it)"
    ) in said


CLIENT6, SERVICE6, POD6, HUB6 = "fd00:10:244:1::2", "fd00:10:96::10", "fd00:10:244:2::2", "fd00:24:1::1"


def tcp6_packet(src: str, dst: str, sport: int, dport: int, data: int) -> bytes:
    """An IPv6 packet (header and TCP) as a Packet Too Big quotes it."""
    segment = tcp(sport, dport, data)
    addresses = [socket.inet_pton(socket.AF_INET6, a) for a in (src, dst)]
    return struct.pack("!IHBB16s16s", 6 << 28, len(segment), 6, 63, *addresses) + segment


def packet_too_big(mtu: int, src: str, dst: str, sport: int, dport: int) -> bytes:
    """ICMPv6 type 2 code 0 naming `mtu` (32 bits, RFC 4443 section 3.2), quoting the packet's start."""
    return struct.pack("!BBHI", 2, 0, 0, mtu) + tcp6_packet(src, dst, sport, dport, 1400)[:1232]


# The same path as the IPv4 tests', through hub: the SYN DNATed, the big request, hub's error, the request resent.
SYN6_NATTED, BIG6, PTB_BACK, SMALLER6 = (
    at(frame6(where, outgoing, src, dst, proto, l4), t)
    for where, outgoing, src, dst, proto, l4, t in (
        ("hub/to-c", True, CLIENT6, POD6, 6, tcp(40000, 8080), 0.5),
        ("hub/to-a", False, CLIENT6, SERVICE6, 6, tcp(40000, 80, 1440), 1.0),
        ("hub/to-a", True, HUB6, CLIENT6, 58, packet_too_big(1280, CLIENT6, SERVICE6, 40000, 80), 1.1),
        ("hub/to-c", True, CLIENT6, POD6, 6, tcp(40000, 8080, 1200), 1.2),
    )
)


def test_a_packet_too_big_is_read_as_ipv6s_fragmentation_needed():
    made = TooBig.of(PTB_BACK)
    assert made == TooBig(HUB6, CLIENT6, 1280, f"[{CLIENT6}]:40000 > [{SERVICE6}]:80", "ICMPv6 Packet Too Big")
    assert TooBig.of(BIG6) is None
    # ICMPv6's destination unreachable (type 1), whatever its code, is no Packet Too Big; IPv4's type 3 code 4
    # read as ICMPv6 would be hop limit exceeded.
    unreachable = at(
        frame6("hub/to-a", True, HUB6, CLIENT6, 58, bytes([1, 4]) + packet_too_big(1280, CLIENT6, SERVICE6, 1, 2)[2:]),
        1.1,
    )
    assert TooBig.of(unreachable) is None


def test_an_ipv6_path_mtu_says_packet_too_big_and_where_the_big_packet_died():
    said = path_mtu(
        [SYN6_NATTED, BIG6, PTB_BACK, SMALLER6], f"[{CLIENT6}]:40000", f"[{SERVICE6}]:80", {HUB6: "hub"}, "nftables"
    )
    assert said == (
        "the client's 1500-byte packet was last seen hub/to-a in; hub answered with ICMPv6 Packet Too Big (MTU 1280),"
        f" from {HUB6} (hub); it went out to the client (hub/to-a out) quoting [{CLIENT6}]:40000 > [{SERVICE6}]:80,"
        f" the address the client called (the packet had been DNATed to [{POD6}]:8080: conntrack took the error as"
        " RELATED and translated it back); then its 1260-byte packets were last seen hub/to-c out"
    )
    assert "fragmentation needed" not in said
    assert path_mtu([BIG6], f"[{CLIENT6}]:40000", f"[{SERVICE6}]:80", {}, "nftables") == (
        "the client's 1500-byte packets were last seen hub/to-a in; no ICMPv6 Packet Too Big came back"
    )


def test_a_packet_bigger_than_the_mtu_after_the_error_is_said_to_be_a_bundle():
    bundle = at(frame6("hub/to-c", True, CLIENT6, POD6, 6, tcp(40000, 8080, 1400)), 1.2)
    said = path_mtu([BIG6, PTB_BACK, bundle], f"[{CLIENT6}]:40000", f"[{SERVICE6}]:80", {}, "nftables")
    assert said.endswith(
        "then its 1460-byte packets were last seen hub/to-c out (more than the MTU 1280: a capture sees the segments"
        " a kernel's segmentation offload carries together as one frame)"
    )
