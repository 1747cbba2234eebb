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


# `nft -a monitor trace` as nft 1.0.6 prints iptables-nft's rules: the window opens in the middle of the previous
# barrier's marker (its packet line came before), then a probe's SYN, then this barrier's marker.
NFT_TRACE = """\
trace id 77bc1eb0 ip nat OUTPUT rule  counter jump KUBE-SERVICES # handle 15 (verdict jump KUBE-SERVICES)
trace id 33742cb6 inet lab-trace prerouting packet: ip saddr 10.244.2.2 ip daddr 192.168.56.11 tcp dport 30080
trace id 33742cb6 inet lab-trace prerouting rule meta nftrace set 1 # handle 2 (verdict continue)
trace id 33742cb6 inet lab-trace prerouting policy accept
trace id 33742cb6 ip nat PREROUTING packet: ip saddr 10.244.2.2 ip daddr 192.168.56.11 tcp dport 30080
trace id 33742cb6 ip nat PREROUTING rule  counter jump KUBE-SERVICES # handle 14 (verdict jump KUBE-SERVICES)
trace id 33742cb6 ip nat KUBE-SERVICES rule  jump KUBE-NODEPORTS # handle 33 (verdict jump KUBE-NODEPORTS)
trace id 33742cb6 ip nat KUBE-NODEPORTS rule meta l4proto tcp counter return # handle 48 (verdict return)
trace id 33742cb6 ip nat PREROUTING policy accept
trace id 33742cb6 ip filter INPUT packet: ip saddr 10.244.2.2 ip daddr 192.168.56.11 tcp dport 30080
trace id 33742cb6 ip filter INPUT unknown rule handle 9 (verdict drop)
trace id ba0f9d3f ip nat OUTPUT packet: oif "lo" ip saddr 127.0.0.1 ip daddr 127.0.0.1 udp sport 40004 udp dport 9
trace id ba0f9d3f ip nat OUTPUT rule  counter jump KUBE-SERVICES # handle 15 (verdict jump KUBE-SERVICES)
"""
PRINTED = """\
PACKET: 2 33742cb6 IN=eth0 SRC=10.244.2.2 DST=192.168.56.11 LEN=60 SPORT=36604 DPORT=30080 SYN
 TRACE: 2 33742cb6 nat:PREROUTING:rule:0xe:JUMP:KUBE-SERVICES  -4 -t nat -A PREROUTING -j KUBE-SERVICES
 TRACE: 2 33742cb6 nat:KUBE-SERVICES:rule:0x21:JUMP:KUBE-NODEPORTS  -4 -t nat -A KUBE-SERVICES -m addrtype \
--dst-type LOCAL -j KUBE-NODEPORTS
 TRACE: 2 33742cb6 nat:KUBE-NODEPORTS:rule:0x30:0xfffffffb  -4 -t nat -A KUBE-NODEPORTS -p tcp -j RETURN
 TRACE: 2 33742cb6 nat:PREROUTING:policy:ACCEPT
"""


def test_the_trace_counts_the_probes_packets_and_the_printer_names_the_rules():
    from lab.probe.evidence.xtrace import printed_rules, traced_counts

    counts = traced_counts(NFT_TRACE.splitlines())
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
NFT_TRACE6 = """trace id 06d08761 ip6 filter OUTPUT packet: ip6 saddr ::1 ip6 daddr ::1 udp sport 45412 udp dport 80
trace id 06d08761 ip6 filter OUTPUT rule udp dport 80 counter packets 0 bytes 0 accept # handle 2 (verdict accept)
trace id 06d08762 ip filter OUTPUT packet: oif "lo" ip saddr 127.0.0.1 ip daddr 127.0.0.1 udp sport 45413 udp dport 80
trace id 06d08762 ip filter OUTPUT rule udp dport 80 counter packets 0 bytes 0 accept # handle 2 (verdict accept)
"""
PRINTED6 = " TRACE: 10 06d08761 filter:OUTPUT:rule:0x2:ACCEPT  -6 -t filter \n"


def test_each_familys_tables_are_counted_apart_and_an_ip6_rule_left_to_the_listing():
    from lab.probe.evidence.xtrace import printed_rules, traced_counts

    assert traced_counts(NFT_TRACE6.splitlines()) == {
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
    said = marker_missing("lab-0abc12-node1", 10.04, None, 201)
    assert said.startswith("timed out after 10.0 s waiting for nft monitor trace in lab-0abc12-node1")
    assert "(201 sent)" in said and "too busy" in said
    ended = marker_missing("lab-0abc12-node1", 0.3, 1, 6)
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
