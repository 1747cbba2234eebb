"""Path MTU from captured frames (lab/probe/pmtu.py), and the fields that ask for it: a probe's size, a node's
link mtu, the cluster's tunnelMTU."""

from __future__ import annotations

import socket
import struct
from dataclasses import replace

import pytest
from support.scenario import BASE, error_for, frame, write

from lab.describe.load import load_scenario
from lab.probe.pmtu import FragNeeded, path_mtu

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
    made = FragNeeded.of(ICMP_BACK)
    assert made == FragNeeded(SERVICE, CLIENT, 1450, f"{CLIENT}:40000 > {SERVICE}:80")
    assert FragNeeded.of(BIG) is None


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
