"""The why of a REJECT the kernel did not answer names only what the node's SNMP counters show: the per-host
budget spent by a redirect, or by earlier errors, or a cause not known (lab/probe/why.py silent_reject)."""

from __future__ import annotations

from lab.probe.evidence.snmp import moved, parse_snmp, parse_snmp6
from lab.probe.icmp_sent import IPV6_RATELIMIT
from lab.probe.why import Budget, SentIcmp, silent_reject

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
    redirect = SentIcmp("at probe first-datagram", "node1", "IcmpOutRedirects", 1, (HOST,), 10.0)
    said = silent_reject("node1", HOST, {"IcmpOutRateLimitHost": 1}, True, [redirect], Budget(1000), 10.4)
    assert said.startswith("node1 sent no ICMP error: IcmpOutRateLimitHost +1 (its ICMP budget for 192.168.56.100")
    assert (
        "node1 had counted an ICMP redirect for 192.168.56.100 (IcmpOutRedirects +1 at probe first-datagram, 0.4 s"
        in said
    )
    assert "ip_rt_send_redirect" in said and "IcmpOutDestUnreachs" not in said
    assert "this verdict depends on timing" in said


def test_a_burst_is_named_and_no_redirect():
    burst = [SentIcmp("at probe burst", "node2", "IcmpOutDestUnreachs", 1, (HOST,), 10.0 + k / 10) for k in range(6)]
    redirect_elsewhere = SentIcmp("at probe first-datagram", "node1", "IcmpOutRedirects", 1, (HOST,), 9.0)
    said = silent_reject(
        "node2", HOST, {"IcmpOutRateLimitHost": 1}, True, [redirect_elsewhere, *burst], Budget(1000), 11.0
    )
    assert (
        "node2 had counted ICMP errors to 192.168.56.100 (IcmpOutDestUnreachs +6 at probe burst, 0.5 s before)" in said
    )
    assert "redirect" not in said


def test_without_a_counter_that_says_why_the_cause_is_not_known():
    said = silent_reject("node1", HOST, {}, True, [], Budget(1000), 1.0)
    assert said == "node1 sent no ICMP error and its counters do not say why (none of its ICMP counters moved): " + (
        "the cause is not known"
    )
    spent = silent_reject("node1", HOST, {"IcmpOutRateLimitHost": 1}, True, [], Budget(1000), 1.0)
    assert "what spent it is not known: no ICMP from node1 to 192.168.56.100 was seen before" in spent


def test_a_redirect_no_capture_saw_leave_is_told_as_made_for_the_host():
    made = SentIcmp("at probe redirected", "node1", "IcmpOutRedirects", 1, (HOST,), 10.0, seen=False)
    said = silent_reject("node1", HOST, {"IcmpOutRateLimitHost": 1}, True, [made], Budget(10000), 10.5)
    assert (
        "(IcmpOutRedirects +1 at probe redirected, 0.5 s before; made for 192.168.56.100, which node1 forwarded" in said
    )
    assert "no capture saw it leave" in said and "one error per 10000 ms" in said


def test_what_was_sent_between_probes_is_counted_without_a_time():
    between = SentIcmp("between probes, before check", "node1", "IcmpOutDestUnreachs", 8, (HOST,) * 6, None)
    said = silent_reject("node1", HOST, {"IcmpOutRateLimitHost": 1}, True, [between], Budget(1000), 1.0)
    seen = "6 of them seen going to 192.168.56.100"
    assert f"ICMP errors to 192.168.56.100 (IcmpOutDestUnreachs +8 between probes, before check, {seen})" in said
    # Counted, but seen going elsewhere (the tracer's markers, on loopback): not this host's budget.
    elsewhere = SentIcmp("between probes, before check", "node1", "IcmpOutDestUnreachs", 2, (), None)
    assert "what spent it is not known" in silent_reject(
        "node1", HOST, {"IcmpOutRateLimitHost": 1}, True, [elsewhere], Budget(1000), 1.0
    )


def test_a_kernel_without_rate_limit_counters_says_so():
    redirect = SentIcmp("at probe first-datagram", "node1", "IcmpOutRedirects", 1, (HOST,), 0.5)
    said = silent_reject("node1", HOST, {}, False, [redirect], Budget(1000), 1.0)
    assert "this kernel does not count the ICMP errors it rate-limits" in said and "the cause is not known" in said
    assert "node1 had counted ICMP for 192.168.56.100 (IcmpOutRedirects +1 at probe first-datagram" in said


HOST6 = "fd00:24:1::2"
SNMP6 = "Icmp6OutErrors                  \t0\nIcmp6OutRateLimitHost           \t3\nIcmp6OutDestUnreachs        \t6\n"


def test_icmpv6_counters_are_read_from_snmp6_by_nstat_names():
    counters = parse_snmp6(SNMP6)
    assert counters == {"Icmp6OutErrors": 0, "Icmp6OutRateLimitHost": 3, "Icmp6OutDestUnreachs": 6}
    assert moved(counters, dict(counters, Icmp6OutRateLimitHost=4)) == {"Icmp6OutRateLimitHost": 1}


def test_an_ipv6_host_is_told_by_icmpv6s_counters_and_its_route_scaled_budget():
    burst = [SentIcmp("at probe burst", "hub", "Icmp6OutDestUnreachs", 1, (HOST6,), 10.0) for _ in range(6)]
    budget = Budget(100, IPV6_RATELIMIT, 6)
    said = silent_reject("hub", HOST6, {"Icmp6OutRateLimitHost": 1}, True, burst, budget, 10.1)
    assert said.startswith(f"hub sent no ICMPv6 error: Icmp6OutRateLimitHost +1 (its ICMPv6 budget for {HOST6}")
    assert "one error per 100 ms (net.ipv6.icmp.ratelimit; a kernel without torvalds/linux 0201eedb69b2" in said
    assert f"hub had counted ICMPv6 errors to {HOST6} (Icmp6OutDestUnreachs +6 at probe burst, 0.1 s before)" in said
    # IPv4's counter says nothing of an IPv6 host, and no IPv4 sysctl is named for it.
    unknown = silent_reject("hub", HOST6, {"IcmpOutRateLimitHost": 1}, True, [], budget, 10.1)
    assert unknown.startswith("hub sent no ICMPv6 error and its counters do not say why (IcmpOutRateLimitHost +1)")
    assert "net.ipv4" not in said + unknown


def test_an_ipv6_redirect_is_not_said_to_share_the_budget_as_ipv4s_does():
    redirect = SentIcmp("at probe first-datagram", "hub", "Icmp6OutRedirects", 1, (HOST6,), 10.0)
    said = silent_reject("hub", HOST6, {"Icmp6OutRateLimitHost": 1}, True, [redirect], Budget(25, "x", 6), 10.4)
    assert "an ICMPv6 redirect for fd00:24:1::2 (Icmp6OutRedirects +1" in said
    assert "whose share of that budget is not known" in said and "ip_rt_send_redirect" not in said
