"""lab bench --scale without a kernel: which frames time the SYN's way through the node."""

from __future__ import annotations

import socket
import struct

from lab.bench.scale import _transit
from lab.probe.capture import Frame


def syn(src: str, dst: str, flags: int = 0x02) -> bytes:
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, 0, 0, 64, 6, 0, socket.inet_aton(src), socket.inet_aton(dst))
    tcp = struct.pack("!HHIIBBHHH", 40000, 80, 0, 0, 0x50, flags, 0, 0, 0)
    return bytes(12) + b"\x08\x00" + ip + tcp


def test_transit_is_pod_out_to_node_out_of_the_syn():
    frames = [
        Frame("pod", "eth0", True, 10.000100, syn("10.0.1.7", "172.30.39.250")),
        Frame("node", "eth0", False, 10.000050, syn("192.168.0.1", "10.0.1.7", 0x12)),  # a SYN-ACK, not it
        Frame("node", "eth0", True, 10.000250, syn("10.0.1.7", "10.180.39.250")),
        Frame("pod", "eth0", False, 10.000400, syn("172.30.39.250", "10.0.1.7", 0x12)),
    ]
    assert round(_transit(frames) * 1e6) == 150
