"""The probe's crafts, path MTU, ICMP budget and kept flows over IPv6, on the kernel (tests/support/ipv6.py builds
a, b and c around hub with realize's own functions). hub DNATs a Service-like address, fd00:24:5::10 port 80, to
c:8080 with ip6tables, as a proxier would: the crafted segments meet conntrack's window and its reverse NAT
(kubernetes#74839 over IPv6), a too-big request meets a 1280-byte link on hub (an ICMPv6 Packet Too Big
translated back), a REJECT spends hub's ICMPv6 budget for a (Icmp6OutRateLimitHost), and a kept flow's entries
are read from conntrack's IPv6 table."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing
from functools import partial
from types import SimpleNamespace
from typing import TypeVar

import pytest
from support.ipv6 import HUB_LAN, A, C, Ipv6Lab, ipv6_lab

from lab.describe.topology import NodeSpec
from lab.install.echo import EchoServers, Listener
from lab.install.tools import run_command
from lab.probe.capture import Captures
from lab.probe.client import ClientResult, send
from lab.probe.craft import CRAFTS, crafted_segment, next_from, send_from, send_raw, spoofed_answer
from lab.probe.evidence.snmp import CounterFiles, Counters, moved
from lab.probe.fib import input_refusal
from lab.probe.flows import KeptFlow, flow_entries
from lab.probe.icmp_sent import IPV6_RATELIMIT, icmp_budget, icmp_sent
from lab.probe.pmtu import path_mtu
from lab.probe.why import Budget, crafted_fate, silent_reject
from lab.realize.enter import write_sysctls

VIP = "fd00:24:5::10"  # what hub DNATs to c:8080, as a Service's clusterIP
SPOOFED = "fd00:24:1::99"  # on a's subnet, owned by nobody
NAMES = {A: "a", C: "c", VIP: "the Service", HUB_LAN: "hub"}
HUB_NODE = NodeSpec("hub", HUB_LAN, "fd00:24:1::/64", "")
T = TypeVar("T")
# Linux 6.0 (torvalds/linux 6e250dcbff1d) lets conntrack ignore a late retransmission instead of marking it
# INVALID: see lab/probe/craft.py.
IGNORES_LATE = tuple(int(n) for n in platform.release().split(".")[:2]) >= (6, 0)


@pytest.fixture
def natted(host_unchanged) -> Iterator[tuple[Ipv6Lab, EchoServers, Captures]]:
    with ipv6_lab() as lab, ExitStack() as stack:
        hub, c = lab.namespaces["hub"], lab.namespaces["c"]
        dnat = ("-d", VIP, "-p", "tcp", "--dport", "80", "-j", "DNAT", "--to-destination", f"[{C}]:8080")
        _read(hub, "ip6tables", "-t", "nat", "-A", "PREROUTING", *dnat)
        echo, captures = stack.enter_context(closing(EchoServers())), stack.enter_context(closing(Captures()))
        echo.listen(Listener("c", "hub", c, 8080, "TCP", hold=True, families=("IPv6",)))  # crafts and size need it
        echo.listen(Listener("c", "hub", c, 8081, "UDP", families=("IPv6",)))
        captures.add("hub", hub, {"to-a", "br0", "to-c"})
        echo.start()
        captures.start()
        yield lab, echo, captures


def _read(netns: str, *argv: str) -> str:
    return run_command(netns, argv)


def _waited(look: Callable[[], T | None], seconds: float = 2.0) -> T | None:
    """What `look` finds, asked until it finds something or `seconds` pass (a loaded machine delivers late)."""
    deadline = time.monotonic() + seconds
    while (found := look()) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return found


def _answer_since(captures: Captures, mark: int, protocol: str) -> ClientResult | None:
    return spoofed_answer(captures.since(mark), [], {}, protocol, SPOOFED)


def _invalid(hub: str) -> int:
    """Packets hub's FORWARD rule for conntrack's INVALID state counted."""
    listing = _read(hub, "ip6tables", "-L", "FORWARD", "-v", "-n", "-x")
    return sum(int(line.split()[0]) for line in listing.splitlines() if "INVALID" in line)


@pytest.mark.parametrize(
    ("name", "drop", "reached_from", "then"),
    [
        # kube-proxy's INVALID drop keeps the connection: the segment dies on hub.
        ("outOfWindow", True, None, "delivered"),
        # Without it, the segment reaches a from c's own address (not reverse-NATed): a resets what it does not
        # know, its RST resets c's end, and the next request is reset.
        ("outOfWindow", False, C, "reset"),
        ("lateRetransmission", False, VIP if IGNORES_LATE else C, "delivered" if IGNORES_LATE else "reset"),
        # In the window: conntrack takes it, reverse-NATs it and closes the entry; a's connection is reset.
        ("backendReset", False, VIP, "reset"),
    ],
)
def test_a_craft_over_ipv6_meets_conntracks_window_and_reverse_nat(natted, name, drop, reached_from, then):
    lab, _, captures = natted
    hub, craft = lab.namespaces["hub"], CRAFTS[name]
    _read(hub, "ip6tables", "-A", "FORWARD", "-m", "conntrack", "--ctstate", "INVALID", *(("-j", "DROP") * drop))
    mark = captures.mark()
    held = KeptFlow(lab.namespaces["a"], VIP, 80, "TCP", 2.0)
    try:
        assert held.first.outcome == "delivered", held.first
        assert held.first.reply is not None and held.first.reply["local"] == f"[{C}]:8080"
        following = _waited(lambda: next_from(captures.since(mark), C, 8080, A, held.port))
        assert following is not None, "c's answer was captured with its sequence numbers"
        sent = captures.mark()
        send_raw(lab.namespaces["c"], crafted_segment(craft, C, 8080, A, held.port, *following), A)
        time.sleep(0.3)  # the segment's way to a, and a's answer
        seq = (following[0] + craft.offset) % (1 << 32)
        said, reached = crafted_fate(captures.since(sent), craft, seq, A, NAMES)
        result = held.exchange()
    finally:
        held.close()
    if reached_from is None:
        assert not reached and said.startswith(f"the crafted {craft.what} was last seen hub/to-c in"), said
        assert _invalid(hub) >= 1
    else:
        assert reached, said
        assert said.startswith(f"the crafted {craft.what} reached the client from [{reached_from}]:"), said
        assert (_invalid(hub) == 0) == (reached_from == VIP), "only a segment conntrack took for INVALID is not NATed"
    assert result.outcome == then, result


def test_a_spoofed_ipv6_source_is_answered_to_that_address(natted):
    lab, echo, captures = natted
    a = lab.namespaces["a"]
    arrivals, mark = echo.mark(), captures.mark()
    send_from(a, SPOOFED, C, 8081, "UDP", 40001)
    delivered = _waited(lambda: spoofed_answer(captures.since(mark), echo.arrivals_since(arrivals), {}, "UDP", SPOOFED))
    assert delivered is not None and delivered.reply is not None, delivered
    assert (delivered.outcome, delivered.reply["peer"]) == ("delivered", f"[{SPOOFED}]:40001")
    # c's SYN-ACK to the spoofed source, seen coming from c into hub (as from a pod's veth into its node).
    mark = captures.mark()
    send_from(a, SPOOFED, C, 8080, "TCP", 40002)
    answered = _waited(lambda: spoofed_answer(captures.since(mark), [], {"c": "to-c"}, "TCP", SPOOFED))
    assert answered is not None and answered.reply == {"backend": "c", "node": "hub", "peer": f"[{SPOOFED}]:40002"}
    for protocol, port, error in (("TCP", 9999, "tcp [.R]"), ("UDP", 9999, "icmp6 type 1 code 4")):
        mark = captures.mark()
        send_from(a, SPOOFED, C, port, protocol, 40003)
        refused = _waited(partial(_answer_since, captures, mark, protocol))
        assert refused is not None and refused.outcome == "refused", refused
        assert error in refused.error and "(hub/to-c in)" in refused.error, refused


def _counters(ns: str) -> Counters:
    """The namespace's IPv4 and IPv6 SNMP counters now, read as a probe session reads them."""
    files = CounterFiles()
    try:
        return files.read([ns], ipv6=True)[0]
    finally:
        files.close()


def test_a_too_big_request_over_ipv6_is_told_by_the_packet_too_big_that_came_back(natted):
    lab, _, captures = natted
    hub = lab.namespaces["hub"]
    _read(hub, "ip", "link", "set", "to-c", "mtu", "1280")  # IPv6's minimum; c's own link stays at 1500
    before = _counters(hub)
    mark = captures.mark()
    # TCP: a's kernel lowers its path MTU to c's address and resends in smaller segments, which go through.
    result = send(lab.namespaces["a"], VIP, 80, "TCP", timeout=3.0, size=1400)
    assert result.outcome == "delivered", result
    said = path_mtu(captures.since(mark), result.local, f"[{VIP}]:80", NAMES, "iptables")
    # Its outer source too is the Service's: conntrack's NAT makes the error look as if the address the client
    # called had sent it (nf_nat_icmpv6_reply_translation).
    assert "hub answered with ICMPv6 Packet Too Big (MTU 1280), from fd00:24:5::10 (the Service)" in said, said
    assert (
        f"it went out to the client (hub/to-a out) quoting {result.local} > [{VIP}]:80, the address the client called"
        f" (the packet had been DNATed to [{C}]:8080: conntrack took the error as RELATED and translated it back)"
    ) in said, said
    assert said.startswith("the client's 1472-byte packet was last seen hub/"), said  # 1400 + TCP's 32 + IPv6's 40
    # a's TCP resends the request in segments that fit, handed to its veth as one (TSO) and forwarded by hub as one,
    # each segment fitting to-c: the captures see 1472 bytes go through the 1280-byte link.
    assert said.endswith(
        "then its 1472-byte packets were last seen hub/to-c out (more than the MTU 1280: a capture sees the segments a"
        " kernel's segmentation offload carries together as one frame)"
    ), said
    assert "fragmentation needed" not in said
    # UDP: no router fragments it; the error reaches the socket through IPV6_RECVERR, and nothing is resent.
    mark = captures.mark()
    datagram = send(lab.namespaces["a"], C, 8081, "UDP", timeout=2.0, size=1400)
    assert (datagram.outcome, datagram.error) == (
        "unreachable",
        f"ICMPv6 packet too big (type 2 code 0) from {HUB_LAN}",
    ), datagram
    said = path_mtu(captures.since(mark), datagram.local, f"[{C}]:8081", NAMES, "iptables")
    assert "hub answered with ICMPv6 Packet Too Big (MTU 1280)" in said and "the address the client called" in said
    delta = moved(before, _counters(hub))
    assert delta.get("Icmp6OutPktTooBigs") == 2, delta  # one per big packet; never rate-limited
    assert "IcmpOutDestUnreachs" not in delta


def test_a_reject_over_ipv6_spends_hubs_icmpv6_budget_for_the_client(natted):
    lab, _, captures = natted
    hub, a = lab.namespaces["hub"], lab.namespaces["a"]
    _read(hub, "ip6tables", "-A", "FORWARD", "-p", "udp", "--dport", "9998", "-j", "REJECT")
    # A new namespace's own value says which rule the kernel follows: torvalds/linux 0201eedb69b2 made the default
    # 100 ms (from 1000) when it stopped dividing the cost for a host reached through a wider route (a /64 here).
    scaled = icmp_budget(hub, 6).ms == 1000
    write_sysctls(hub, {"net.ipv6.icmp.ratelimit": "1000"})
    budget = icmp_budget(hub, 6)
    assert budget == Budget(1000, IPV6_RATELIMIT, 6)
    before, mark = _counters(hub), captures.mark()
    outcomes = [send(a, C, 9998, "UDP", timeout=0.2).outcome for _ in range(6)]
    spent = time.monotonic()  # the last error: the budget refills from here
    outcomes += [send(a, C, 9998, "UDP", timeout=0.2).outcome for _ in range(2)]
    burst = moved(before, _counters(hub))
    # Each error as it leaves for a's port (br0 carries it first): one frame each, as a node's eth0 shows them.
    frames = [f for f in captures.since(mark) if f.ifname == "to-a"]
    assert outcomes == ["refused"] * 6 + ["dropped"] * 2  # a burst of 6, then nothing
    assert (burst.get("Icmp6OutDestUnreachs"), burst.get("Icmp6OutRateLimitHost")) == (6, 2), burst
    assert "IcmpOutRateLimitHost" not in burst and "IcmpOutDestUnreachs" not in burst  # IPv4's say nothing of it
    # 500 ms after the burst: an error saved up only where the /64 route divides the cost by 4; at 1.3 s, one in any.
    time.sleep(max(0.0, spent + 0.5 - time.monotonic()))
    assert send(a, C, 9998, "UDP", timeout=0.2).outcome == ("refused" if scaled else "dropped")
    time.sleep(max(0.0, spent + 1.3 - time.monotonic()))
    assert [send(a, C, 9998, "UDP", timeout=0.2).outcome for _ in range(2)] == ["refused", "dropped"]
    sent = icmp_sent("at probe burst", [HUB_NODE], frames, {"hub": burst}, time.perf_counter(), ())
    assert [(s.counter, s.count, s.to) for s in sent] == [("Icmp6OutDestUnreachs", 6, (A,) * 6)]
    said = silent_reject("hub", A, {"Icmp6OutRateLimitHost": 1}, True, sent, budget, time.perf_counter())
    assert said.startswith(f"hub sent no ICMPv6 error: Icmp6OutRateLimitHost +1 (its ICMPv6 budget for {A}")
    assert "refills by one error per 1000 ms (net.ipv6.icmp.ratelimit; a kernel without" in said
    assert f"hub had counted ICMPv6 errors to {A} (Icmp6OutDestUnreachs +6 at probe burst" in said


def test_a_kept_flows_entries_are_read_from_conntracks_ipv6_table(natted):
    lab, _, _ = natted
    realized = SimpleNamespace(ns_of=lab.namespaces.__getitem__)  # the one thing flow_entries asks of a run
    for dst, port, protocol in ((VIP, 80, "TCP"), (C, 8081, "UDP")):
        flow = KeptFlow(lab.namespaces["a"], dst, port, protocol, 2.0)
        try:
            assert flow.first.outcome == "delivered", flow.first
            entries = flow_entries(realized, [HUB_NODE], protocol, flow.port, dst)  # type: ignore[arg-type]
            assert [(node, e.orig_src, e.orig_dst, e.orig_dport, e.reply_src) for node, e in entries] == [
                ("hub", A, dst, port, C)
            ]
            # The IPv4 table holds nothing of it: a flow is looked up in its own family's.
            assert flow_entries(realized, [HUB_NODE], protocol, flow.port, "10.0.0.1") == []  # type: ignore[arg-type]
        finally:
            flow.close()


def test_hubs_input_route_lookup_over_ipv6_says_why_it_refuses_a_packet(natted):
    lab, _, _ = natted
    hub = lab.namespaces["hub"]
    said = input_refusal(hub, A, "fd00:24:3::9", "br0")
    assert said == "no route to fd00:24:3::9 (ip route get fd00:24:3::9 from fd00:24:1::2 iif br0: ENETUNREACH)", said
    assert input_refusal(hub, A, C, "br0") == ""  # routed: nothing refuses it
