"""Crafted packets: reading a captured segment's sequence numbers, and the probe fields that ask for one."""

from __future__ import annotations

import struct

import pytest
from support.scenario import BASE, error_for, frame

from lab.probe.craft import Segment, next_from


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
    ],
)
def test_craft_fields(tmp_path, extra, field, message):
    error = error_for(tmp_path, BASE + extra)
    assert error.field == field, str(error)
    assert message in error.message
