"""What came back to a client, told apart and named: refused, reset, unreachable (and the ICMP behind it)."""

from __future__ import annotations

import errno
import socket
import struct

import pytest
from support.scenario import BASE, error_for, frame, tcp, write

from lab.describe.load import load_scenario
from lab.describe.topology import Expected
from lab.judge.verdict import judge
from lab.probe.capture import Frame
from lab.probe.client import IcmpError, classify, parse_extended_error
from lab.probe.observation import Observation
from lab.probe.why import explain

NET_UNREACHABLE = IcmpError(3, 0, "192.168.56.1")
PORT_UNREACHABLE = IcmpError(3, 3, "10.244.1.2")
TIME_EXCEEDED = IcmpError(11, 0, "192.168.56.11")


def extended_error(origin: int, icmp_type: int, code: int, sender: str) -> bytes:
    """What the kernel puts in an IP_RECVERR message: struct sock_extended_err, then a sockaddr_in."""
    err = struct.pack("=IBBBBII", errno.ENETUNREACH, origin, icmp_type, code, 0, 0, 0)
    return err + struct.pack("=HH4s8x", socket.AF_INET, 0, socket.inet_aton(sender))


def test_an_icmp_error_is_read_with_its_type_code_and_sender():
    assert parse_extended_error(extended_error(2, 3, 0, "192.168.56.1")) == NET_UNREACHABLE
    assert str(NET_UNREACHABLE) == "ICMP net unreachable (type 3 code 0) from 192.168.56.1"
    assert str(TIME_EXCEEDED) == "ICMP time exceeded (TTL) in transit (type 11 code 0) from 192.168.56.11"
    assert str(IcmpError(3, 15, "1.2.3.4")) == "ICMP error (type 3 code 15) from 1.2.3.4"


def test_an_error_the_local_stack_made_is_no_icmp():
    assert parse_extended_error(extended_error(1, 0, 0, "0.0.0.0")) is None


@pytest.mark.parametrize(
    ("err", "icmp", "protocol", "outcome", "said"),
    [
        (errno.ECONNREFUSED, None, "TCP", "refused", "the SYN was answered with a RST"),
        (errno.ECONNREFUSED, PORT_UNREACHABLE, "UDP", "refused", "ICMP port unreachable (type 3 code 3)"),
        (errno.ECONNRESET, None, "TCP", "reset", "connection reset (RST) after it was established"),
        (errno.EHOSTUNREACH, TIME_EXCEEDED, "TCP", "unreachable", "ICMP time exceeded"),
        (errno.ENETUNREACH, NET_UNREACHABLE, "UDP", "unreachable", "ICMP net unreachable (type 3 code 0)"),
        (errno.ENOPROTOOPT, IcmpError(3, 2, "10.0.0.1"), "UDP", "unreachable", "ICMP protocol unreachable"),
        (errno.ENETUNREACH, None, "TCP", "unreachable", "ENETUNREACH from the source's own stack"),
        (errno.EPERM, None, "UDP", "dropped", "the source's own rules dropped it"),
    ],
)
def test_what_the_socket_said_decides_the_outcome(err, icmp, protocol, outcome, said):
    seen = classify(err, icmp, protocol)
    assert seen is not None and seen[0] == outcome and said in seen[1], seen


def test_an_error_that_is_no_answer_is_not_classified():
    assert classify(errno.EBADF, None, "TCP") is None


def test_expectations_may_say_unreachable_and_reset(tmp_path):
    for outcome in ("unreachable", "reset"):
        text = BASE.replace("expect: {outcome: delivered, source: node2}", f"expect: {{outcome: {outcome}}}")
        (topo,) = load_scenario(write(tmp_path, text)).variants
        assert topo.probes[0].expected.outcome == outcome


def test_an_unreachable_expectation_cannot_name_a_backend(tmp_path):
    said = str(error_for(tmp_path, BASE.replace("outcome: delivered, source", "outcome: unreachable, source")))
    assert "backend, node, source, sameBackend and affinity only make sense when delivered" in said


def test_unreachable_is_judged_like_any_outcome():
    expected = Expected("unreachable")
    assert judge(expected, Observation("unreachable")).ok
    assert judge(expected, Observation("dropped")).reasons == ("expected unreachable, got dropped",)


def unasked(last: Frame, hits: list) -> str:
    raise AssertionError("an answer came back: no lost packet to explain")


def test_why_names_the_icmp_error_and_where_it_was_seen():
    icmp = frame("node2/veth-tester", True, "192.168.56.1", "10.244.2.2", 1, b"\x03\x00\x00\x00")
    said = explain("unreachable", [], [icmp], False, "ICMP net unreachable (type 3 code 0) from the gateway", unasked)
    assert said == (
        "ICMP net unreachable (type 3 code 0) from the gateway: node2/veth-tester out carried "
        "192.168.56.1 > 10.244.2.2 icmp type 3 code 0"
    )


def test_why_of_a_reset_names_the_rst():
    rst = frame("node2/veth-tester", True, "10.96.0.10", "10.244.2.2", 6, tcp(0x04))
    said = explain("reset", [], [rst], False, "connection reset (RST) after it was established", unasked)
    assert said == (
        "connection reset (RST) after it was established: node2/veth-tester out carried "
        "10.96.0.10:80 > 10.244.2.2:40000 tcp [R]"
    )


def test_a_list_of_failure_outcomes_accepts_any_of_them(tmp_path):
    text = BASE.replace("expect: {outcome: delivered, source: node2}", "expect: {outcome: [dropped, unreachable]}")
    (topo,) = load_scenario(write(tmp_path, text)).variants
    expected = topo.probes[0].expected
    assert expected.outcomes == ("dropped", "unreachable")
    assert judge(expected, Observation("unreachable")).ok and judge(expected, Observation("dropped")).ok
    assert judge(expected, Observation("refused")).reasons == ("expected dropped or unreachable, got refused",)


@pytest.mark.parametrize("listed", ["[delivered, dropped]", "[dropped, dropped]", "[]"])
def test_a_list_of_outcomes_names_failures_each_once(tmp_path, listed):
    text = BASE.replace("expect: {outcome: delivered, source: node2}", f"expect: {{outcome: {listed}}}")
    error = error_for(tmp_path, text)
    assert error.field == "probes[0].expect.outcome" and "each once (not delivered)" in error.message, str(error)
