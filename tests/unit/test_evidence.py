"""Pure parts of the evidence: counter diffs ordered like a trace, and frame summaries."""

from __future__ import annotations

import socket
import struct

from lab.probe.capture import Frame
from lab.probe.evidence.counters import counter_hits, parse_counters
from lab.probe.evidence.nftrace import marker_missing

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


def _trace_message(trace_id: int, family: int, table: str, chain: str, kind: int, **fields: object) -> bytes:
    """An NFT_MSG_TRACE message laid out as the kernel sends it (include/uapi/linux/netfilter/nf_tables.h)."""

    def attr(number: int, payload: bytes) -> bytes:
        return struct.pack("=HH", 4 + len(payload), number) + payload + b"\0" * (-len(payload) % 4)

    body = attr(1, table.encode() + b"\0") + attr(2, chain.encode() + b"\0") + attr(4, struct.pack("!I", kind))
    body += attr(6, struct.pack("!I", trace_id))
    if "handle" in fields:
        body += attr(3, struct.pack("!Q", fields["handle"]))
    if "policy" in fields:
        body += attr(16, struct.pack("!I", fields["policy"]))
    if "network" in fields:
        nfproto = struct.pack("!I", fields.get("nfproto", 2))
        body += attr(15, nfproto) + attr(8, fields["network"]) + attr(9, fields["transport"])
    body = struct.pack("=BBH", family, 0, 0) + body
    return struct.pack("=IHHII", 16 + len(body), 10 << 8 | 17, 0, 0, 0) + body


def _ipv4(source: str, destination: str, protocol: int, length: int) -> bytes:
    return struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, length, 1, 0, 64, protocol, 0, *map(socket.inet_aton, (source, destination))
    )


SYN = {"network": _ipv4("10.244.2.2", "192.168.56.11", 6, 60), "transport": struct.pack("!HHII", 36604, 30080, 1, 0)}
MARKER_UDP = {"network": _ipv4("127.0.0.1", "127.0.0.1", 17, 44), "transport": struct.pack("!HHHH", 40004, 9, 24, 0)}
# A probe's packets in iptables-nft's tables as the kernel traces them: the window opens in the middle of the previous
# barrier's marker (its headers came before), then a probe's SYN, then this barrier's marker.
TRACE = b"".join(
    (
        _trace_message(0x77BC1EB0, 2, "nat", "OUTPUT", 3, handle=15),
        _trace_message(0x33742CB6, 1, "lab-trace", "prerouting", 1, policy=1, **SYN),
        _trace_message(0x33742CB6, 2, "nat", "PREROUTING", 3, handle=14, **SYN),
        _trace_message(0x33742CB6, 2, "nat", "KUBE-SERVICES", 3, handle=33),
        _trace_message(0x33742CB6, 2, "nat", "KUBE-NODEPORTS", 3, handle=48),
        _trace_message(0x33742CB6, 2, "nat", "PREROUTING", 1, policy=1),
        _trace_message(0x33742CB6, 2, "filter", "INPUT", 3, handle=9, **SYN),
        _trace_message(0xBA0F9D3F, 2, "nat", "OUTPUT", 3, handle=15, **MARKER_UDP),
        _trace_message(0xBA0F9D3F, 2, "nat", "KUBE-SERVICES", 2),  # a return: not a rule met
    )
)
PRINTED = """\
PACKET: 2 33742cb6 IN=eth0 SRC=10.244.2.2 DST=192.168.56.11 LEN=60 SPORT=36604 DPORT=30080 SYN
 TRACE: 2 33742cb6 nat:PREROUTING:rule:0xe:JUMP:KUBE-SERVICES  -4 -t nat -A PREROUTING -j KUBE-SERVICES
 TRACE: 2 33742cb6 nat:KUBE-SERVICES:rule:0x21:JUMP:KUBE-NODEPORTS  -4 -t nat -A KUBE-SERVICES -m addrtype \
--dst-type LOCAL -j KUBE-NODEPORTS
 TRACE: 2 33742cb6 nat:KUBE-NODEPORTS:rule:0x30:0xfffffffb  -4 -t nat -A KUBE-NODEPORTS -p tcp -j RETURN
 TRACE: 2 33742cb6 nat:PREROUTING:policy:ACCEPT
"""


def test_the_trace_counts_the_probes_packets_and_the_printer_names_the_rules():
    from lab.probe.evidence.nltrace import parse_messages
    from lab.probe.evidence.xtrace import printed_rules, traced_counts

    counts = traced_counts(parse_messages(TRACE))
    assert counts == {
        ("ip", "nat", "PREROUTING", 14, ""): 1,
        ("ip", "nat", "KUBE-SERVICES", 33, ""): 1,
        ("ip", "nat", "KUBE-NODEPORTS", 48, ""): 1,
        ("ip", "nat", "PREROUTING", -1, "policy ACCEPT"): 1,
        ("ip", "filter", "INPUT", 9, ""): 1,
    }
    assert printed_rules(PRINTED.splitlines()) == {
        ("ip", "nat", "PREROUTING", 14): "-j KUBE-SERVICES",
        ("ip", "nat", "KUBE-SERVICES", 33): "-m addrtype --dst-type LOCAL -j KUBE-NODEPORTS",
        ("ip", "nat", "KUBE-NODEPORTS", 48): "-p tcp -j RETURN",
    }


# ip6tables-nft's rules in the trace (the ip6 family's tables), and what xtables-monitor 1.8.9 printed for one: the
# rule's text empty after "Parsing nftables rule failed" (this machine, kernel 6.18).
UDP6 = {
    "nfproto": 10,
    "network": struct.pack(
        "!IHBB16s16s",
        6 << 28,
        8,
        17,
        64,
        socket.inet_pton(socket.AF_INET6, "::1"),
        *[socket.inet_pton(socket.AF_INET6, "::1")],
    ),
    "transport": struct.pack("!HHHH", 45412, 80, 8, 0),
}
UDP4 = {"network": _ipv4("127.0.0.1", "127.0.0.1", 17, 28), "transport": struct.pack("!HHHH", 45413, 80, 8, 0)}
TRACE6 = _trace_message(0x06D08761, 10, "filter", "OUTPUT", 3, handle=2, **UDP6) + _trace_message(
    0x06D08762, 2, "filter", "OUTPUT", 3, handle=2, **UDP4
)
PRINTED6 = " TRACE: 10 06d08761 filter:OUTPUT:rule:0x2:ACCEPT  -6 -t filter \n"


def test_each_familys_tables_are_counted_apart_and_an_ip6_rule_left_to_the_listing():
    from lab.probe.evidence.nltrace import parse_messages
    from lab.probe.evidence.xtrace import printed_rules, traced_counts

    assert traced_counts(parse_messages(TRACE6)) == {
        ("ip6", "filter", "OUTPUT", 2, ""): 1,
        ("ip", "filter", "OUTPUT", 2, ""): 1,
    }
    assert printed_rules(PRINTED6.splitlines()) == {}


def test_a_tables_listing_names_its_rules_by_handle_in_each_chains_order():
    from lab.probe.evidence.xtrace import listed_rules

    nft = """\
table ip filter { # handle 1
\tchain INPUT { # handle 1
\t\ttype filter hook input priority filter; policy accept;
\t\tmeta l4proto tcp tcp dport 30080 counter packets 0 bytes 0 drop # handle 9
\t\t counter packets 0 bytes 0 jump KUBE-FIREWALL # handle 12
\t}
\tchain KUBE-FIREWALL { # handle 4
\t}
}
"""
    save = "*filter\n:INPUT ACCEPT [0:0]\n:KUBE-FIREWALL - [0:0]\n-A INPUT -p tcp -m tcp --dport 30080 -j DROP\n"
    save += "-A INPUT -j KUBE-FIREWALL\nCOMMIT\n"
    assert listed_rules(nft, save, "filter") == {
        ("ip", "filter", "INPUT", 9): "-p tcp -m tcp --dport 30080 -j DROP",
        ("ip", "filter", "INPUT", 12): "-j KUBE-FIREWALL",
    }
    assert listed_rules(nft.replace("table ip ", "table ip6 "), save, "filter", "ip6") == {
        ("ip6", "filter", "INPUT", 9): "-p tcp -m tcp --dport 30080 -j DROP",
        ("ip6", "filter", "INPUT", 12): "-j KUBE-FIREWALL",
    }


def test_a_trace_marker_that_does_not_come_is_named_a_timeout_with_how_long_it_waited():
    said = marker_missing("lab-0abc12-node1", 10.04, "", 201, "nft monitor trace")
    assert said.startswith("timed out after 10.0 s waiting for nft monitor trace in lab-0abc12-node1")
    assert "(201 sent)" in said and "too busy" in said
    ended = marker_missing("lab-0abc12-node1", 0.3, "exited with status 1", 6, "nft monitor trace")
    assert ended.startswith("nft monitor trace in lab-0abc12-node1 exited with status 1 after 0.3 s")


# What nft 1.0.6's `monitor trace` printed for a marker and the port unreachable it drew (this machine, kernel 6.18).
MARKER = (
    'packet: oif "lo" ip saddr 127.0.0.1 ip daddr 127.0.0.1 ip dscp cs0 ip ecn not-ect ip ttl 64 ip id 31298 ip '
    "protocol udp ip length 44 udp sport 47734 udp dport 9 udp length 24 @th,64,96 0x6c61622d74726163652d6d61 "
)
MARKER_ERROR = (
    'packet: oif "lo" ip saddr 127.0.0.1 ip daddr 127.0.0.1 ip dscp cs6 ip ecn not-ect ip ttl 64 ip id 55713 ip '
    "protocol icmp ip length 72 icmp type destination-unreachable icmp code port-unreachable icmp id 0 icmp sequence 0 "
    "@th,64,96 0x4500002c7a4240004011c27c "
)


def test_only_the_tracers_own_loopback_packets_are_left_out():
    from lab.probe.evidence.nftrace import is_marker

    assert is_marker(MARKER) and is_marker(MARKER_ERROR)
    # A node's own probe to 127.0.0.1:NODEPORT, and the port unreachable quoting its 34-byte datagram, are traced.
    assert not is_marker(MARKER.replace("udp dport 9 ", "udp dport 30501 "))
    assert not is_marker(MARKER_ERROR.replace("0x4500002c", "0x45000022"))
    assert not is_marker(MARKER.replace("ip protocol udp", "ip protocol tcp").replace("udp dport 9 ", "tcp dport 9 "))


def test_the_trace_reader_leaves_out_only_the_tracers_own_loopback_packets():
    from lab.probe.evidence.nltrace import TracePacket

    marker = TracePacket(2, MARKER_UDP["network"], MARKER_UDP["transport"])
    quoted = _ipv4("127.0.0.1", "127.0.0.1", 17, 44)[:12]
    error = TracePacket(2, _ipv4("127.0.0.1", "127.0.0.1", 1, 72), b"\x03\x03\0\0\0\0\0\0" + quoted)
    assert marker.is_marker() and error.is_marker() and marker.udp_ports() == (40004, 9)
    # A node's own probe to 127.0.0.1:NODEPORT, and the port unreachable quoting its 34-byte datagram, are traced.
    assert not TracePacket(2, marker.network, struct.pack("!HHHH", 40004, 30501, 24, 0)).is_marker()
    short = _ipv4("127.0.0.1", "127.0.0.1", 17, 34)[:12]
    assert not TracePacket(2, error.network, error.transport[:8] + short).is_marker()
    assert not TracePacket(2, _ipv4("127.0.0.1", "127.0.0.1", 6, 44), marker.transport).is_marker()
    assert not TracePacket(2, SYN["network"], SYN["transport"]).is_marker()
