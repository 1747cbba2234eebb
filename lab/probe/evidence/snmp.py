"""The kernel's own account of what it sent: each node's SNMP counters (/proc/net/snmp, what `nstat` reads),
read before and after every probe. They say what no capture can: an ICMP error the kernel decided not to send,
and why (IcmpOutRateLimitHost: the per-host budget, IcmpOutRateLimitGlobal: the host-wide one; both counted
from torvalds/linux d0941130c935 "icmp: Add counters for rate limits", Linux 6.2 and stable 6.1.y since late 2024; not
in 5.10), and which redirects it sent (IcmpOutRedirects).

Every node is read, both times, so a counter that moved on a node the probe was not seen on is not lost. Each
node's file is opened once, from inside its namespace (a proc file keeps the namespace it was opened in), and read
again at every probe with no namespace switch: some microseconds a node."""

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


def _open() -> int:
    # thread-self: the calling thread's namespace (/proc/self/net would be the main thread's, the host's).
    return os.open("/proc/thread-self/net/snmp", os.O_RDONLY | os.O_CLOEXEC)


class CounterFiles:
    """Each namespace's /proc/net/snmp, open while the probes run (closed before the namespaces are removed: an
    open file holds its namespace)."""

    def __init__(self) -> None:
        self._files: dict[str, int] = {}

    def read(self, namespaces: Sequence[str]) -> list[Counters]:
        """Each namespace's counters, in the order given."""
        if missing := [ns for ns in dict.fromkeys(namespaces) if ns not in self._files]:
            self._files.update(zip(missing, in_each_netns(missing, _open), strict=True))
        return [parse_snmp(os.pread(self._files[ns], 1 << 16, 0).decode()) for ns in namespaces]

    def close(self) -> None:
        files, self._files = self._files, {}
        for fd in files.values():
            os.close(fd)


def moved(before: Counters, after: Counters) -> Counters:
    """The kept counters that moved, by how much."""
    return {name: after[name] - before.get(name, 0) for name in KEPT if after.get(name, 0) != before.get(name, 0)}


def counted(delta: Counters) -> str:
    """`IcmpOutRateLimitHost +1, IcmpOutDestUnreachs +2`, as the evidence prints them."""
    return ", ".join(f"{name} {n:+d}" for name, n in delta.items())
