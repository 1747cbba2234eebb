"""The why of a REJECT the kernel did not answer names only what the node's SNMP counters show: the per-host
budget spent by a redirect, or by earlier errors, or a cause not known (lab/probe/why.py silent_reject)."""

from __future__ import annotations

from lab.probe.evidence.snmp import moved, parse_snmp
from lab.probe.why import SentIcmp, silent_reject

HOST = "192.168.56.100"
SNMP = (
    "Ip: Forwarding OutDiscards\nIp: 1 0\n"
    "Icmp: OutMsgs OutRateLimitGlobal OutRateLimitHost OutDestUnreachs OutRedirects\nIcmp: 7 0 2 6 1\n"
    "IcmpMsg: OutType3\nIcmpMsg: 6\n"
)


def test_the_counters_are_read_by_nstat_names_and_only_those_that_moved_are_kept():
    counters = parse_snmp(SNMP)
    assert counters["IcmpOutRateLimitHost"] == 2 and counters["IcmpOutRedirects"] == 1
    after = dict(counters, IcmpOutRateLimitHost=3, IcmpOutMsgs=9, IcmpMsgOutType3=7)
    assert moved(counters, after) == {"IcmpOutRateLimitHost": 1}


def test_a_redirect_is_named_and_no_burst():
    redirect = SentIcmp("first-datagram", "node1", "IcmpOutRedirects", 1, frozenset({HOST}), 10.0)
    said = silent_reject("node1", HOST, {"IcmpOutRateLimitHost": 1}, True, [redirect], 1000, 10.4)
    assert said.startswith("node1 sent no ICMP error: IcmpOutRateLimitHost +1 (its ICMP budget for 192.168.56.100")
    assert "node1 had sent 192.168.56.100 an ICMP redirect (IcmpOutRedirects +1 at probe first-datagram, 0.4 s" in said
    assert "ip_rt_send_redirect" in said and "IcmpOutDestUnreachs" not in said
    assert "this verdict depends on timing" in said


def test_a_burst_is_named_and_no_redirect():
    burst = [SentIcmp("burst", "node2", "IcmpOutDestUnreachs", 1, frozenset({HOST}), 10.0 + k / 10) for k in range(6)]
    redirect_elsewhere = SentIcmp("first-datagram", "node1", "IcmpOutRedirects", 1, frozenset({HOST}), 9.0)
    said = silent_reject("node2", HOST, {"IcmpOutRateLimitHost": 1}, True, [redirect_elsewhere, *burst], 1000, 11.0)
    assert "node2 had sent 192.168.56.100 ICMP errors (IcmpOutDestUnreachs +6 at probe burst, 0.5 s before)" in said
    assert "redirect" not in said


def test_without_a_counter_that_says_why_the_cause_is_not_known():
    said = silent_reject("node1", HOST, {}, True, [], 1000, 1.0)
    assert said == "node1 sent no ICMP error and its counters do not say why (none of its ICMP counters moved): " + (
        "the cause is not known"
    )
    spent = silent_reject("node1", HOST, {"IcmpOutRateLimitHost": 1}, True, [], 1000, 1.0)
    assert "what spent it is not known: no ICMP from node1 to 192.168.56.100 was counted before" in spent


def test_a_kernel_without_rate_limit_counters_says_so():
    redirect = SentIcmp("first-datagram", "node1", "IcmpOutRedirects", 1, frozenset({HOST}), 0.5)
    said = silent_reject("node1", HOST, {}, False, [redirect], 1000, 1.0)
    assert "this kernel does not count the ICMP errors it rate-limits" in said and "the cause is not known" in said
    assert "before, node1 had sent 192.168.56.100 ICMP (IcmpOutRedirects +1 at probe first-datagram" in said
