"""The kernel's own account of what it sent: each node's SNMP counters (/proc/net/snmp, and /proc/net/snmp6 in a run
with IPv6: what `nstat` reads), read before and after every probe. They say what no capture can: an ICMP error the
kernel decided not to send, and why (IcmpOutRateLimitHost: the per-host budget, IcmpOutRateLimitGlobal: the host-wide
one; both counted from torvalds/linux d0941130c935 "icmp: Add counters for rate limits", Linux 6.2 and stable 6.1.y
since late 2024; not in 5.10), and which redirects it sent (IcmpOutRedirects). ICMPv6 has its own:
Icmp6OutDestUnreachs, Icmp6OutRedirects, Icmp6OutErrors, Icmp6OutPktTooBigs and Icmp6OutRateLimitHost (the same
commit); what the host-wide budget withholds of ICMPv6 is counted in IPv4's IcmpOutRateLimitGlobal, which both
families share (net/ipv6/icmp.c icmpv6_global_allow). TCP's counters are one table for both families.

Every node is read, both times, so a counter that moved on a node the probe was not seen on is not lost. Each
node's files are opened once, from inside its namespace (a proc file keeps the namespace it was opened in), and
read again at every probe with no namespace switch: some microseconds a node; a text unchanged since the last
read (most nodes at most probes) is not parsed again."""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache

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


@cache
def _kept_columns(names: str) -> tuple[tuple[int, str], ...]:
    """Where the kept counters stand in a table's line of names (the same line in every namespace of a kernel)."""
    prefix, _, fields = names.partition(":")
    return tuple((i, prefix + field) for i, field in enumerate(fields.split()) if prefix + field in KEPT)


def parse_snmp(text: str) -> Counters:
    """/proc/net/snmp → the kept counters this kernel has, {"IcmpOutRedirects": n, ...}: each table is a line of
    names and a line of values. Read for every node twice a probe, so only the kept columns are converted."""
    counters: Counters = {}
    lines = text.splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if columns := _kept_columns(names):
            numbers = values.partition(":")[2].split()
            counters.update((name, int(numbers[i])) for i, name in columns if i < len(numbers))
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


def _open(name: str) -> int:
    # thread-self: the calling thread's namespace (/proc/self/net would be the main thread's, the host's).
    return os.open(f"/proc/thread-self/net/{name}", os.O_RDONLY | os.O_CLOEXEC)


class CounterFiles:
    """Each namespace's /proc/net/snmp (and snmp6 once a run with IPv6 asks), open while the probes run (closed
    before the namespaces are removed: an open file holds its namespace)."""

    def __init__(self) -> None:
        self._files: dict[tuple[str, str], int] = {}  # (namespace, file name) → its descriptor
        self._parsed: dict[tuple[str, str], tuple[bytes, Counters]] = {}  # the last text read there, parsed

    def read(self, namespaces: Sequence[str], ipv6: bool = False) -> list[Counters]:
        """Each namespace's counters, in the order given; with `ipv6`, IPv6's and ICMPv6's too (a second file,
        read only where a run holds IPv6)."""
        names = ("snmp", "snmp6") if ipv6 else ("snmp",)
        if missing := [ns for ns in dict.fromkeys(namespaces) if (ns, names[-1]) not in self._files]:
            opened = in_each_netns(missing, lambda: [_open(name) for name in names])
            for ns, fds in zip(missing, opened, strict=True):
                for name, fd in zip(names, fds, strict=True):
                    if (ns, name) in self._files:
                        os.close(fd)  # snmp, opened for an IPv4 read before
                    else:
                        self._files[ns, name] = fd
        return [self._counters(ns, "snmp") | (self._counters(ns, "snmp6") if ipv6 else {}) for ns in namespaces]

    def _counters(self, ns: str, name: str) -> Counters:
        text = os.pread(self._files[ns, name], 1 << 16, 0)
        last = self._parsed.get((ns, name))
        if last is None or last[0] != text:
            last = text, (parse_snmp if name == "snmp" else parse_snmp6)(text.decode())
            self._parsed[ns, name] = last
        return dict(last[1])

    def close(self) -> None:
        files, self._files = self._files, {}
        self._parsed.clear()
        for fd in files.values():
            os.close(fd)


def moved(before: Counters, after: Counters) -> Counters:
    """The kept counters that moved, by how much."""
    return {name: after[name] - before.get(name, 0) for name in KEPT if after.get(name, 0) != before.get(name, 0)}


def counted(delta: Counters) -> str:
    """`IcmpOutRateLimitHost +1, IcmpOutDestUnreachs +2`, as the evidence prints them."""
    return ", ".join(f"{name} {n:+d}" for name, n in delta.items())
