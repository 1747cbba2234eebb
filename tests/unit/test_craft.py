"""Crafted packets: reading a captured segment's sequence numbers, and the probe fields that ask for one."""

from __future__ import annotations

import struct

import pytest
from support.scenario import BASE, error_for, frame, frame6, write

from lab.describe.load import load_scenario
from lab.probe.craft import CRAFTS, Segment, crafted_segment, next_from, spoofed_answer, spoofed_packet


def tcp(seq: int, ack: int, flags: int, payload: bytes = b"") -> bytes:
    return struct.pack("!HHIIBBHHH", 8080, 40000, seq, ack, 0x50, flags, 502, 0, 0) + payload


def test_the_next_sequence_number_follows_the_last_segment_sent():
    syn_ack = frame("node2/veth-web", False, "10.244.2.2", "10.244.1.2", 6, tcp(1000, 501, 0x12))
    answer = frame("node2/veth-web", False, "10.244.2.2", "10.244.1.2", 6, tcp(1001, 501, 0x18, b"x" * 90))
    seg = Segment.of(answer)
    assert seg is not None and (seg.sport, seg.dport, seg.seq, seg.payload) == (8080, 40000, 1001, 90)
    assert next_from([syn_ack, answer], "10.244.2.2", 8080, "10.244.1.2", 40000) == (1091, 501)
    assert next_from([syn_ack], "10.244.2.2", 8080, "10.244.1.2", 40000) == (1001, 501)  # a SYN counts one
    assert next_from([answer], "10.244.2.9", 8080, "10.244.1.2", 40000) is None


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ("    craft: outOfWindow\n    protocol: UDP\n", "probes[0].craft", "established TCP connection"),
        ("    craft: outOfWindow\n    attempts: 3\n", "probes[0].attempts", "holds one connection"),
        ("    craft: spoof\n", "probes[0].craft", "outOfWindow"),
        ("    sourceAddress: 300.1.2.3\n", "probes[0].sourceAddress", "300.1.2.3"),
        ("    sourceAddress: fd00::7\n", "probes[0].sourceAddress", "fd00::7 is not an IPv4 address"),
        ("    sourceAddress: 198.51.100.7\n    keep: true\n", "probes[0]", "cannot be kept or crafted on"),
        ("    sourceAddress: 198.51.100.7\n    craft: outOfWindow\n", "probes[0]", "cannot be kept or crafted on"),
    ],
)
def test_craft_and_source_address_fields(tmp_path, extra, field, message):
    error = error_for(tmp_path, BASE + extra)
    assert error.field == field, str(error)
    assert message in error.message, str(error)


def test_a_spoofed_probe_keeps_its_address(tmp_path):
    (topo,) = load_scenario(write(tmp_path, BASE + "    sourceAddress: 198.51.100.7\n")).variants
    assert topo.probes[0].source_address == "198.51.100.7"


def tcp_flags(flags: int, sport: int = 8080, dport: int = 40000) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 0x50, flags, 502, 0, 0)


def test_a_spoofed_syn_is_judged_by_what_the_captures_saw():
    ports = {"web": "veth-web"}
    syn = frame("node1/veth-web", True, "198.51.100.7", "10.244.1.2", 6, tcp_flags(0x02, 40000, 8080))
    syn_ack = frame("node1/veth-web", False, "10.244.1.2", "198.51.100.7", 6, tcp_flags(0x12))
    rst = frame("node1/eth0", True, "203.0.113.10", "198.51.100.7", 6, tcp_flags(0x14))
    answered = spoofed_answer([syn, syn_ack], [], ports, "TCP", "198.51.100.7")
    assert answered is not None and answered.outcome == "delivered"
    assert answered.reply == {"backend": "web", "node": "node1", "peer": "198.51.100.7:40000"}
    refused = spoofed_answer([rst], [], ports, "TCP", "198.51.100.7")
    assert refused is not None and refused.outcome == "refused" and "node1/eth0 out" in refused.error
    assert (
        spoofed_answer([syn], [], ports, "TCP", "198.51.100.7") is None
    )  # the SYN reached the pod, nothing came back yet
    # The gateway's ICMP about the backend's answer (to an address nobody owns) is not an answer to the probe.
    lost_answer = frame("node1/eth0", False, "192.168.56.1", "203.0.113.10", 1, bytes([3, 0, 0, 0, 0, 0, 0, 0]))
    assert spoofed_answer([syn, lost_answer], [], ports, "TCP", "198.51.100.7") is None


@pytest.mark.parametrize(
    ("name", "seq", "flags", "data"),
    [
        ("outOfWindow", (0xFFFF_FF00 + (1 << 30)) % (1 << 32), 0x18, True),
        ("lateRetransmission", 0xFFFF_FF00 - (1 << 30), 0x18, True),  # behind the window, not wrapped past it
        ("backendReset", 0xFFFF_FF00, 0x14, False),  # at the sequence number the backend sends next
    ],
)
def test_a_crafted_segment_lies_where_its_craft_puts_it(name, seq, flags, data):
    packet = crafted_segment(CRAFTS[name], "10.244.2.2", 8080, "10.244.1.2", 40000, 0xFFFF_FF00, 501)
    seg = Segment.of(frame("node2/veth-web", False, "10.244.2.2", "10.244.1.2", 6, packet[20:]))
    assert seg is not None
    assert (seg.sport, seg.dport, seg.seq, seg.ack, seg.flags) == (8080, 40000, seq, 501, flags)
    assert (seg.payload > 0) == data
    assert CRAFTS[name].is_it(seg, seq)
    assert not CRAFTS[name].is_it(seg, (seq + 1) % (1 << 32))


CLIENT6, POD6, SPOOFED6 = "fd00:10:244:1::2", "fd00:10:244:2::2", "fd00:198:51:100::7"


@pytest.mark.parametrize("name", sorted(CRAFTS))
def test_a_craft_to_an_ipv6_client_is_an_ipv6_packet_with_a_valid_checksum(name):
    from scapy.layers.inet import TCP
    from scapy.layers.inet6 import IPv6

    packet = crafted_segment(CRAFTS[name], POD6, 8080, CLIENT6, 40000, 0xFFFF_FF00, 501)
    assert packet[0] >> 4 == 6 and packet[6] == 6  # IPv6, next header TCP, no extension header
    seg = Segment.of(frame6("node2/veth-web", False, POD6, CLIENT6, 6, packet[40:]))
    seq = (0xFFFF_FF00 + CRAFTS[name].offset) % (1 << 32)
    assert seg is not None and (seg.src, seg.dst, seg.sport, seg.dport, seg.seq, seg.ack) == (
        POD6,
        CLIENT6,
        8080,
        40000,
        seq,
        501,
    )
    assert CRAFTS[name].is_it(seg, seq)
    # The TCP checksum is over IPv6's pseudo-header: what the client's kernel checks before it looks further.
    parsed = IPv6(packet)
    sent = parsed[TCP].chksum
    del parsed[TCP].chksum
    assert IPv6(bytes(parsed))[TCP].chksum == sent


def test_a_spoofed_ipv6_syn_and_datagram_carry_the_address_given():
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6

    datagram = IPv6(spoofed_packet(SPOOFED6, POD6, 8081, "UDP", 40000))
    assert (datagram.src, datagram.dst, datagram[UDP].dport, bytes(datagram[UDP].payload)) == (
        SPOOFED6,
        POD6,
        8081,
        b"probe\n",
    )
    syn = Segment.of(
        frame6("node1/eth0", False, SPOOFED6, POD6, 6, spoofed_packet(SPOOFED6, POD6, 8080, "TCP", 40000)[40:])
    )
    assert syn is not None and (syn.src, syn.flags) == (SPOOFED6, 0x02)


def test_a_spoofed_ipv6_probe_is_judged_by_icmpv6s_types():
    ports = {"web": "veth-web"}
    syn = frame6("node1/veth-web", True, SPOOFED6, POD6, 6, tcp_flags(0x02, 40000, 8080))
    syn_ack = frame6("node1/veth-web", False, POD6, SPOOFED6, 6, tcp_flags(0x12))
    answered = spoofed_answer([syn, syn_ack], [], ports, "TCP", SPOOFED6)
    assert answered is not None and answered.reply == {"backend": "web", "node": "node1", "peer": f"[{SPOOFED6}]:40000"}
    closed = frame6("node1/eth0", True, POD6, SPOOFED6, 58, bytes([1, 4, 0, 0, 0, 0, 0, 0]))
    refused = spoofed_answer([closed], [], ports, "UDP", SPOOFED6)
    assert refused is not None and refused.outcome == "refused"
    assert refused.error == f"answered with {POD6} > {SPOOFED6} icmp6 type 1 code 4 (node1/eth0 out)"
    no_route = frame6("node1/eth0", True, "fd00:192:168::1", SPOOFED6, 58, bytes([1, 0, 0, 0, 0, 0, 0, 0]))
    unreachable = spoofed_answer([no_route], [], ports, "UDP", SPOOFED6)
    assert unreachable is not None and unreachable.outcome == "unreachable"
    # ICMPv6's type 3 is hop limit exceeded, not IPv4's destination unreachable: no answer to the probe.
    assert (
        spoofed_answer(
            [frame6("node1/eth0", True, POD6, SPOOFED6, 58, bytes([3, 3]) + bytes(6))], [], ports, "UDP", SPOOFED6
        )
        is None
    )
