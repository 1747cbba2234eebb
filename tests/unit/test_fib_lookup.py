"""What a failed input route lookup means (lab/probe/fib.py), and the why of a packet lost without a rule."""

from __future__ import annotations

import errno

import pytest
from support.scenario import frame, tcp

from lab.probe.fib import WayBack, refusal_text
from lab.probe.why import explain


@pytest.mark.parametrize(
    ("code", "src", "back", "said"),
    [
        (errno.EINVAL, "10.244.1.2", WayBack("lo", True, 0), "martian source: 10.244.1.2 is its own address"),
        (errno.EINVAL, "127.0.0.1", WayBack("lo", False, 0), "martian source: 127.0.0.1 is a loopback address"),
        (
            errno.EINVAL,
            "192.168.56.100",
            WayBack("cni0", False, 1),
            "reverse-path filter (rp_filter=1 on eth0): the route back to 192.168.56.100 leaves by cni0",
        ),
        (
            errno.EXDEV,
            "203.0.113.5",
            WayBack("", False, 2),
            "reverse-path filter (rp_filter=2 on eth0): the route back to 203.0.113.5 does not exist",
        ),
        (errno.EINVAL, "192.168.56.100", WayBack("eth0", False, 1), "martian: 192.168.56.100 > 10.96.0.1"),
        (errno.EINVAL, "192.168.56.100", WayBack("cni0", False, 0), "martian: 192.168.56.100 > 10.96.0.1"),
        (errno.ENETUNREACH, "192.168.56.100", WayBack("eth0", False, 0), "no route to 10.96.0.1"),
    ],
)
def test_a_refused_lookup_is_named(code, src, back, said):
    assert refusal_text(code, src, "10.96.0.1", "eth0", back).startswith(said)


def test_a_packet_lost_without_a_rule_is_explained_by_where_it_was_last_seen():
    syn = frame("node1/veth-web", True, "10.244.1.2", "10.244.1.2", 6, tcp(0x02))
    asked = []

    def lost(last, hits):
        asked.append(last)
        return "web's kernel refuses it on input: martian source"

    assert explain("dropped", [], [syn], False, "", lost) == "web's kernel refuses it on input: martian source"
    assert asked == [syn]
    said = explain("dropped", [], [syn], True, "", lost)
    assert said == "the backend received it, but its answer never reached the client: " + lost(syn, [])
    assert explain("dropped", [], [], False, "", lost) == "never seen on any node interface"
