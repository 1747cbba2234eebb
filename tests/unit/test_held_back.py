"""A kept connection's request no capture saw is put down to the client's retransmission timer only when the
client's own counters say its kernel sent nothing during the probe (lab/probe/explain.py held_back)."""

from __future__ import annotations

from lab.probe.explain import held_back


def test_the_timer_is_named_only_when_the_client_sent_nothing_and_had_retransmitted():
    said = held_back("never seen on any node interface", True, {})
    assert said.startswith("never seen on any node interface: the client's kernel sent no segment during the probe")
    assert "(TcpOutSegs +0)" in said and "retransmission timer" in said


def test_without_an_unanswered_exchange_before_the_timer_is_not_named():
    said = held_back("never seen on any node interface", False, {})
    assert "TcpOutSegs +0" in said and "retransmission" not in said


def test_a_segment_the_client_sent_that_no_capture_saw_is_said_as_such():
    said = held_back("never seen on any node interface", True, {"TcpOutSegs": 2})
    assert said.endswith("the client's kernel counted TcpOutSegs +2, which no capture saw")
