"""Pure parts of the evidence: counter diffs ordered like a trace, and frame summaries."""

from __future__ import annotations

import socket
import struct

from lab.probe.capture import Frame
from lab.probe.evidence.counters import counter_hits, parse_counters

BEFORE = """\
*filter
:INPUT ACCEPT [10:600]
:FORWARD ACCEPT [5:300]
:OUTPUT ACCEPT [10:600]
:KUBE-EXTERNAL-SERVICES - [0:0]
[5:300] -A FORWARD -m conntrack --ctstate NEW -j KUBE-EXTERNAL-SERVICES
[0:0] -A KUBE-EXTERNAL-SERVICES -d 203.0.113.10/32 -p tcp -m tcp --dport 80 -j DROP
COMMIT
*nat
:PREROUTING ACCEPT [3:180]
:POSTROUTING ACCEPT [3:180]
:KUBE-SERVICES - [0:0]
:KUBE-EXT-X - [0:0]
[3:180] -A PREROUTING -j KUBE-SERVICES
[0:0] -A KUBE-SERVICES -d 203.0.113.10/32 -p tcp -m tcp --dport 80 -j KUBE-EXT-X
[0:0] -A KUBE-EXT-X -s 10.244.0.0/16 -j KUBE-SVC-X
COMMIT
"""


def bump(text: str, **moves: int) -> str:
    """Add packets to the counted lines whose rule text contains a key (underscores for spaces)."""
    out = []
    for line in text.splitlines():
        for needle, extra in moves.items():
            if needle.replace("_", " ") in line and line.startswith("["):
                packets, rest = line[1:].split(":", 1)
                line = f"[{int(packets) + extra}:{rest}"
        out.append(line)
    return "\n".join(out)


def test_hits_follow_jumps_in_hook_order_and_skip_accept_policies():
    after = bump(
        BEFORE,
        **{
            "-j_KUBE-SERVICES": 1,
            "--dport_80_-j_KUBE-EXT-X": 1,
            "-j_KUBE-EXTERNAL-SERVICES": 1,
            "--dport_80_-j_DROP": 1,
        },
    )
    after = after.replace(":FORWARD ACCEPT [5:300]", ":FORWARD ACCEPT [6:360]")
    hits = counter_hits(parse_counters(BEFORE), parse_counters(after))
    assert [(h.table, h.chain, h.verdict) for h in hits] == [
        ("nat", "PREROUTING", "KUBE-SERVICES"),
        ("nat", "KUBE-SERVICES", "KUBE-EXT-X"),
        ("filter", "FORWARD", "KUBE-EXTERNAL-SERVICES"),
        ("filter", "KUBE-EXTERNAL-SERVICES", "DROP"),
    ]
    assert all(h.packets == 1 for h in hits)


def test_no_movement_no_hits():
    assert counter_hits(parse_counters(BEFORE), parse_counters(BEFORE)) == []


def test_equal_rules_in_one_chain_are_kept_apart():
    rule = "-A X -j MARK --set-xmark 0x4000/0x4000"
    text = f"*nat\n:X - [0:0]\n[1:60] {rule}\n[0:0] {rule}\n"
    assert len(parse_counters(text)) == 2


def frame(proto: int, payload: bytes) -> Frame:
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        20 + len(payload),
        0,
        0,
        64,
        proto,
        0,
        socket.inet_aton("10.0.0.1"),
        socket.inet_aton("10.0.0.2"),
    )
    return Frame("node1", "eth0", False, 0.0, b"\x00" * 12 + b"\x08\x00" + ip + payload)


def test_frame_summaries():
    syn = struct.pack("!HHIIBBHHH", 1234, 80, 0, 0, 0x50, 0x02, 0, 0, 0)
    assert frame(6, syn).summary() == "10.0.0.1:1234 > 10.0.0.2:80 tcp [S]"
    assert frame(6, syn).opens_or_ends
    ack = syn[:13] + b"\x10" + syn[14:]
    assert not frame(6, ack).opens_or_ends
    assert frame(17, struct.pack("!HHHH", 5, 53, 8, 0)).summary() == "10.0.0.1:5 > 10.0.0.2:53 udp"
    assert frame(1, b"\x03\x03\x00\x00").summary() == "10.0.0.1 > 10.0.0.2 icmp type 3 code 3"
    arp = Frame("node1", "eth0", False, 0.0, b"\x00" * 12 + b"\x08\x06" + b"\x00" * 28)
    assert arp.summary() is None and not arp.opens_or_ends


# xtables-monitor --trace as iptables 1.8.9 prints it: the window opens in the middle of the previous barrier's
# marker (its PACKET line came before), then a probe's SYN, then this barrier's marker.
XTRACE = """\
 TRACE: 2 77bc1eb0 nat:OUTPUT:rule:0xf:JUMP:KUBE-SERVICES  -4 -t nat -A OUTPUT -j KUBE-SERVICES
PACKET: 1 33742cb6 IN=eth0 NFPROTO=2 SRC=10.244.2.2 DST=192.168.56.11 LEN=60 SPORT=36604 DPORT=30080 SYN
 TRACE: 1 33742cb6 lab-trace:prerouting:rule:0x3:CONTINUE
 TRACE: 1 33742cb6 lab-trace:prerouting:policy:ACCEPT
PACKET: 2 33742cb6 IN=eth0 SRC=10.244.2.2 DST=192.168.56.11 LEN=60 SPORT=36604 DPORT=30080 SYN
 TRACE: 2 33742cb6 nat:PREROUTING:rule:0xe:JUMP:KUBE-SERVICES  -4 -t nat -A PREROUTING -j KUBE-SERVICES
 TRACE: 2 33742cb6 nat:KUBE-SERVICES:rule:0x21:JUMP:KUBE-NODEPORTS  -4 -t nat -A KUBE-SERVICES -m comment \
--comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -j KUBE-NODEPORTS
 TRACE: 2 33742cb6 nat:KUBE-NODEPORTS:rule:0x30:0xfffffffb  -4 -t nat -A KUBE-NODEPORTS -p tcp -j RETURN
 TRACE: 2 33742cb6 nat:PREROUTING:policy:ACCEPT
PACKET: 2 33742cb6 IN=eth0 SRC=10.244.2.2 DST=192.168.56.11 LEN=60 SPORT=36604 DPORT=30080 SYN
 TRACE: 2 33742cb6 filter:INPUT:rule:0x9:DROP  -4 -t filter -A INPUT -p tcp -m tcp --dport 30080 -j DROP
PACKET: 2 ba0f9d3f OUT=lo SRC=127.0.0.1 DST=127.0.0.1 LEN=44 SPORT=40004 DPORT=9
 TRACE: 2 ba0f9d3f nat:OUTPUT:rule:0xf:JUMP:KUBE-SERVICES  -4 -t nat -A OUTPUT -j KUBE-SERVICES
"""


def test_xtables_trace_counts_the_probes_packets_like_counters():
    from lab.probe.evidence.xtrace import traced_counters

    counters = traced_counters(XTRACE.splitlines())
    assert counters == {
        ("filter", "INPUT", 9, "-p tcp -m tcp --dport 30080 -j DROP"): 1,
        ("nat", "KUBE-NODEPORTS", 0x30, "-p tcp -j RETURN"): 1,
        (
            "nat",
            "KUBE-SERVICES",
            0x21,
            '-m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" '
            "-j KUBE-NODEPORTS",
        ): 1,
        ("nat", "PREROUTING", -1, "policy ACCEPT"): 1,
        ("nat", "PREROUTING", 0xE, "-j KUBE-SERVICES"): 1,
    }
    # Ordered as counters are: the hook order, each jump followed where it was taken; ACCEPT policies left out.
    assert [str(hit) for hit in counter_hits({}, counters)] == [
        "nat PREROUTING: -j KUBE-SERVICES",
        'nat KUBE-SERVICES: -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in '
        'this chain" -j KUBE-NODEPORTS',
        "nat KUBE-NODEPORTS: -p tcp -j RETURN",
        "filter INPUT: -p tcp -m tcp --dport 30080 -j DROP",
    ]
