"""The kernel's own account of what it sent: each node's SNMP counters (/proc/net/snmp, and /proc/net/snmp6 in a run
with IPv6: what `nstat` reads), read before and after every probe. They say what no capture can: an ICMP error the
kernel decided not to send, and why (IcmpOutRateLimitHost: the per-host budget, IcmpOutRateLimitGlobal: the host-wide
one; both counted from torvalds/linux d0941130c935 "icmp: Add counters for rate limits", Linux 6.2 and stable 6.1.y
since late 2024; not in 5.10), and which redirects it sent (IcmpOutRedirects). ICMPv6 has its own:
Icmp6OutDestUnreachs, Icmp6OutRedirects, Icmp6OutErrors, Icmp6OutPktTooBigs and Icmp6OutRateLimitHost (the same
commit); what the host-wide budget withholds of ICMPv6 is counted in IPv4's IcmpOutRateLimitGlobal, which both
families share (net/ipv6/icmp.c icmpv6_global_allow). TCP's counters are one table for both families.

Every node is read, both times: one thread moving from namespace to namespace reads one in about a tenth of a
millisecond, so a probe costs 0.2 ms per node (20 ms at a hundred nodes), and a counter that moved on a node the
probe was not seen on is not lost."""

from __future__ import annotations

from collections.abc import Sequence

from lab.realize.enter import in_each_netns

Counters = dict[str, int]

# The counters a probe's evidence keeps when they move (nstat's names: the line's prefix and the field).
KEPT = (
    "IcmpOutDestUnreachs",
    "IcmpOutRedirects",
    "IcmpOutErrors",
    "IcmpOutRateLimitHost",
    "IcmpOutRateLimitGlobal",
    "IpOutDiscards",
    "IpOutNoRoutes",
    "TcpOutSegs",
    "TcpRetransSegs",
    "Icmp6OutDestUnreachs",
    "Icmp6OutRedirects",
    "Icmp6OutErrors",
    "Icmp6OutPktTooBigs",
    "Icmp6OutRateLimitHost",
    "Ip6OutDiscards",
    "Ip6OutNoRoutes",
)


def parse_snmp(text: str) -> Counters:
    """/proc/net/snmp → {"IcmpOutRedirects": n, ...}: each table is a line of names and a line of values."""
    counters: Counters = {}
    lines = text.splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        prefix, _, fields = names.partition(":")
        _, _, numbers = values.partition(":")
        for field, number in zip(fields.split(), numbers.split(), strict=False):
            if number.lstrip("-").isdigit():
                counters[f"{prefix}{field}"] = int(number)
    return counters


def parse_snmp6(text: str) -> Counters:
    """/proc/net/snmp6 → {"Icmp6OutDestUnreachs": n, ...}: a name and its value per line, named as nstat names
    them."""
    counters: Counters = {}
    for line in text.splitlines():
        name, _, number = line.partition(" ")
        if number.strip().isdigit():
            counters[name] = int(number)
    return counters


def _read() -> str:
    # thread-self: the calling thread's namespace (/proc/self/net would be the main thread's, the host's).
    with open("/proc/thread-self/net/snmp") as f:
        return f.read()


def _read_both() -> tuple[str, str]:
    with open("/proc/thread-self/net/snmp6") as f:
        return _read(), f.read()


def read_counters(namespaces: Sequence[str], ipv6: bool = False) -> list[Counters]:
    """Each namespace's counters, in the order given; with `ipv6`, IPv6's and ICMPv6's too (a second file, read
    only where a run holds IPv6: a tenth of a millisecond more per namespace)."""
    if not ipv6:
        return [parse_snmp(text) for text in in_each_netns(namespaces, _read)]
    return [parse_snmp(v4) | parse_snmp6(v6) for v4, v6 in in_each_netns(namespaces, _read_both)]


def moved(before: Counters, after: Counters) -> Counters:
    """The kept counters that moved, by how much."""
    return {name: after[name] - before.get(name, 0) for name in KEPT if after.get(name, 0) != before.get(name, 0)}


def counted(delta: Counters) -> str:
    """`IcmpOutRateLimitHost +1, IcmpOutDestUnreachs +2`, as the evidence prints them."""
    return ", ".join(f"{name} {n:+d}" for name, n in delta.items())
