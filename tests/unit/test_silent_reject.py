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
    redirect = SentIcmp("at probe first-datagram", "node1", "IcmpOutRedirects", 1, (HOST,), 10.0)
    said = silent_reject("node1", HOST, {"IcmpOutRateLimitHost": 1}, True, [redirect], 1000, 10.4)
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
    said = silent_reject("node2", HOST, {"IcmpOutRateLimitHost": 1}, True, [redirect_elsewhere, *burst], 1000, 11.0)
    assert (
        "node2 had counted ICMP errors to 192.168.56.100 (IcmpOutDestUnreachs +6 at probe burst, 0.5 s before)" in said
    )
    assert "redirect" not in said


def test_without_a_counter_that_says_why_the_cause_is_not_known():
    said = silent_reject("node1", HOST, {}, True, [], 1000, 1.0)
    assert said == "node1 sent no ICMP error and its counters do not say why (none of its ICMP counters moved): " + (
        "the cause is not known"
    )
    spent = silent_reject("node1", HOST, {"IcmpOutRateLimitHost": 1}, True, [], 1000, 1.0)
    assert "what spent it is not known: no ICMP from node1 to 192.168.56.100 was seen before" in spent


def test_a_redirect_no_capture_saw_leave_is_told_as_made_for_the_host():
    made = SentIcmp("at probe redirected", "node1", "IcmpOutRedirects", 1, (HOST,), 10.0, seen=False)
    said = silent_reject("node1", HOST, {"IcmpOutRateLimitHost": 1}, True, [made], 10000, 10.5)
    assert (
        "(IcmpOutRedirects +1 at probe redirected, 0.5 s before; made for 192.168.56.100, which node1 forwarded" in said
    )
    assert "no capture saw it leave" in said and "one error per 10000 ms" in said


def test_what_was_sent_between_probes_is_counted_without_a_time():
    between = SentIcmp("between probes, before check", "node1", "IcmpOutDestUnreachs", 8, (HOST,) * 6, None)
    said = silent_reject("node1", HOST, {"IcmpOutRateLimitHost": 1}, True, [between], 1000, 1.0)
    seen = "6 of them seen going to 192.168.56.100"
    assert f"ICMP errors to 192.168.56.100 (IcmpOutDestUnreachs +8 between probes, before check, {seen})" in said
    # Counted, but seen going elsewhere (the tracer's markers, on loopback): not this host's budget.
    elsewhere = SentIcmp("between probes, before check", "node1", "IcmpOutDestUnreachs", 2, (), None)
    assert "what spent it is not known" in silent_reject(
        "node1", HOST, {"IcmpOutRateLimitHost": 1}, True, [elsewhere], 1000, 1.0
    )


def test_a_kernel_without_rate_limit_counters_says_so():
    redirect = SentIcmp("at probe first-datagram", "node1", "IcmpOutRedirects", 1, (HOST,), 0.5)
    said = silent_reject("node1", HOST, {}, False, [redirect], 1000, 1.0)
    assert "this kernel does not count the ICMP errors it rate-limits" in said and "the cause is not known" in said
    assert "node1 had counted ICMP for 192.168.56.100 (IcmpOutRedirects +1 at probe first-datagram" in said
