"""The probe's parsers on IPv6: frames, IPV6_RECVERR messages and `conntrack -L -f ipv6` lines, each as this
kernel produced them between lab namespaces (tests/support/ipv6.py: a at fd00:24:1::2 and b at fd00:24:1::3 on
hub's bridge, c at fd00:24:2::2 behind hub), captured on hub."""

from __future__ import annotations

import errno

import pytest

from lab.install.conntrack import family_args, parse_entries
from lab.probe.capture import Frame
from lab.probe.client import IcmpError, classify, parse_extended_error
from lab.probe.craft import Segment
from lab.probe.evidence.base import RuleHit
from lab.probe.fib import WayBack, refusal_text
from lab.probe.icmp_sent import icmp_of
from lab.probe.pmtu import TooBig, ip_length
from lab.probe.sockets import destination
from lab.probe.why import explain
from lab.realize.families import default_route, endpoint, host_prefixlen, versions

# a's SYN to b:8080 (with MSS, SACK, timestamps and window scale options).
SYN = bytes.fromhex(
    "9abad1ab49449a6c2eb1d39e86dd600e58f100280640fd000024000100000000000000000002fd000024000100000000000000000003"
    "eb521f905e783a3d00000000a002fd20fa7e0000020405a00402080a1069c520000000000103030a"
)
# a's datagram "probe\n" to b:8081.
DATAGRAM = bytes.fromhex(
    "9abad1ab49449a6c2eb1d39e86dd6004fefa000e1140fd000024000100000000000000000002fd000024000100000000000000000003"
    "94181f91000efa6f70726f62650a"
)
# c's ICMPv6 port unreachable for a's datagram to c:9999, quoting it.
PORT_UNREACHABLE = bytes.fromhex(
    "42a0d1e77a857e7fb477c73386dd600a597e003e3a40fd000024000200000000000000000002fd000024000100000000000000000002"
    "01049b39000000006008c709000e113ffd000024000100000000000000000002fd000024000200000000000000000002cfdc270f000e"
    "fa6f70726f62650a"
)
# a's neighbour solicitation for b (IPv6's ARP request).
NEIGHBOUR_SOLICITATION = bytes.fromhex(
    "3333ff0000039a6c2eb1d39e86dd6000000000203afffd000024000100000000000000000002ff0200000000000000000001ff000003"
    "8700e28e00000000fd00002400010000000000000000000301019a6c2eb1d39e"
)
# What IPV6_RECVERR queued on a's UDP socket for that port unreachable: struct sock_extended_err (ECONNREFUSED,
# origin SO_EE_ORIGIN_ICMP6, type 1, code 4), then the sender as a struct sockaddr_in6.
RECVERR6 = bytes.fromhex("6f0000000301040000000000000000000a00000000000000fd00002400020000000000000000000200000000")
# `conntrack -L -f ipv6` on hub after those exchanges (bridged ones too: bridge-nf-call-ip6tables is on there).
CONNTRACK_IPV6 = """\
udp      17 29 src=fd00:24:1::2 dst=fd00:24:2::2 sport=35448 dport=8081 src=fd00:24:2::2 dst=fd00:24:1::2 sport=8081 dport=35448 mark=0 use=1
tcp      6 119 TIME_WAIT src=fd00:24:1::2 dst=fd00:24:2::2 sport=33310 dport=8080 src=fd00:24:2::2 dst=fd00:24:1::2 sport=8080 dport=33310 [ASSURED] mark=0 use=1
udp      17 29 src=fd00:24:1::2 dst=fd00:24:2::2 sport=53212 dport=9999 [UNREPLIED] src=fd00:24:2::2 dst=fd00:24:1::2 sport=9999 dport=53212 mark=0 use=1
conntrack v1.4.7 (conntrack-tools): 3 flow entries have been shown.
"""  # noqa: E501  # the tool's own lines


def frame(data: bytes) -> Frame:
    return Frame("hub", "to-a", False, 0.0, data)


def test_a_tcp_segment_over_ipv6_is_read_with_bracketed_sockets():
    syn = frame(SYN)
    assert syn.addresses == ("fd00:24:1::2", "fd00:24:1::3")
    assert syn.sockets == ("[fd00:24:1::2]:60242", "[fd00:24:1::3]:8080")
    assert syn.summary() == "[fd00:24:1::2]:60242 > [fd00:24:1::3]:8080 tcp [S]"
    assert syn.opens_or_ends
    assert destination(syn) == ("TCP", "fd00:24:1::3", 8080)
    assert ip_length(syn) == 80  # the 40-byte IPv6 header and a 40-byte TCP header with options
    segment = Segment.of(syn)
    assert segment is not None and (segment.sport, segment.dport, segment.flags, segment.payload) == (60242, 8080, 2, 0)


def test_a_udp_datagram_over_ipv6():
    udp = frame(DATAGRAM)
    assert udp.summary() == "[fd00:24:1::2]:37912 > [fd00:24:1::3]:8081 udp"
    assert destination(udp) == ("UDP", "fd00:24:1::3", 8081)
    assert udp.opens_or_ends and Segment.of(udp) is None


def test_an_icmpv6_error_tells_where_a_probe_went_but_neighbour_discovery_does_not():
    error = frame(PORT_UNREACHABLE)
    assert error.summary() == "fd00:24:2::2 > fd00:24:1::2 icmp6 type 1 code 4"
    assert error.opens_or_ends and error.sockets is None
    solicitation = frame(NEIGHBOUR_SOLICITATION)
    assert solicitation.summary() == "fd00:24:1::2 > ff02::1:ff00:3 icmp6 type 135 code 0"
    assert not solicitation.opens_or_ends


def test_the_icmp_readers_tell_icmpv6_by_its_own_protocol_and_types():
    # The ICMP budget's counters read ICMPv6's destination unreachable (type 1) as its own, never as IPv4's type 3;
    # a port unreachable is no Packet Too Big.
    assert icmp_of(frame(PORT_UNREACHABLE)) == (58, 1)
    assert icmp_of(frame(SYN)) is None
    assert TooBig.of(frame(PORT_UNREACHABLE)) is None


def test_an_ipv6_recverr_message_names_the_icmpv6_error_and_its_sender():
    icmp = parse_extended_error(RECVERR6)
    assert icmp == IcmpError(1, 4, "fd00:24:2::2", 6)
    assert str(icmp) == "ICMPv6 port unreachable (type 1 code 4) from fd00:24:2::2"
    assert classify(errno.ECONNREFUSED, icmp, "UDP") == ("refused", str(icmp))
    no_route = IcmpError(1, 0, "fd00:24:1::1", 6)
    assert classify(errno.ENETUNREACH, no_route, "UDP") == (
        "unreachable",
        "ICMPv6 no route to destination (type 1 code 0) from fd00:24:1::1",
    )
    assert str(IcmpError(2, 0, "fd00::1", 6)).startswith("ICMPv6 packet too big")


def test_conntrack_ipv6_entries_are_read_like_ipv4_ones():
    entries = parse_entries(CONNTRACK_IPV6)
    assert [(e.orig_src, e.orig_dst, e.orig_dport, e.reply_src) for e in entries] == [
        ("fd00:24:1::2", "fd00:24:2::2", 8081, "fd00:24:2::2"),
        ("fd00:24:1::2", "fd00:24:2::2", 8080, "fd00:24:2::2"),
        ("fd00:24:1::2", "fd00:24:2::2", 9999, "fd00:24:2::2"),
    ]
    assert family_args("ipv6") == ("-f", "ipv6") and family_args("") == ()


@pytest.mark.parametrize(
    ("address", "version", "prefixlen", "default", "written"),
    [("10.0.0.1", 4, 32, "0.0.0.0/0", "10.0.0.1:80"), ("fd00::1", 6, 128, "::/0", "[fd00::1]:80")],
)
def test_an_address_says_its_family(address, version, prefixlen, default, written):
    assert versions([address, "10.9.9.0/24"]) == {4, version}
    assert host_prefixlen(address) == prefixlen
    assert default_route(address) == default
    assert endpoint(address, 80) == written


def test_a_reject_answered_with_icmpv6_is_no_silent_reject():
    # c answered a's datagram with ICMPv6 port unreachable: the client got it, and the why says where it went.
    reject = RuleHit("filter", "KUBE-SERVICES", "-p udp -j REJECT", 1)
    told = frame(PORT_UNREACHABLE)
    unanswered = "the cause is not known"
    said = explain("dropped", [("hub", reject)], [told], False, "", lambda *_: "", lambda _: unanswered)
    assert said == "rejected on hub by filter KUBE-SERVICES: -p udp -j REJECT" and unanswered not in said
    refused = explain("refused", [], [told], False, "ICMPv6 port unreachable", lambda *_: "")
    assert refused == f"ICMPv6 port unreachable: hub/to-a in carried {told.summary()}"
    silent = explain("dropped", [("hub", reject)], [frame(DATAGRAM)], False, "", lambda *_: "", lambda _: "not known")
    assert silent.endswith("but no ICMPv6 error was sent back: not known")


def test_an_ipv6_loopback_source_is_a_martian_and_ipv6_has_no_rp_filter_to_blame():
    no_way = WayBack("", False, 0)
    assert (
        refusal_text(errno.EINVAL, "::1", "fd00:24:1::3", "eth0", no_way) == "martian source: ::1 is a loopback address"
    )
    said = refusal_text(errno.EINVAL, "fd00:24:9::1", "fd00:24:1::3", "eth0", no_way)
    assert said == "martian: fd00:24:9::1 > fd00:24:1::3 cannot arrive on eth0"
