"""Waiting for an idle machine between timed runs.

The kernel frees a run's namespaces after the run has returned: at a thousand namespaces, about a second of one
core here, beginning a second or two after the teardown (the netns cleanup work). Timed back to back, the next run
would pay for it. So every timed run starts once the machine's CPUs have been idle for a while, and how long the
machine took to get there after a run is reported as the run's own cost to the kernel."""

from __future__ import annotations

import time
from collections.abc import Callable

BUSY = 0.10  # of the machine's CPUs: what counts as idle is less
QUIET = 3.0  # seconds idle in a row
LIMIT = 30.0  # a machine busy with other work is not waited for longer
STEP = 0.25


def cpu_times() -> tuple[int, int]:
    """(busy, total) ticks of every CPU since boot (/proc/stat's first line: idle and iowait are not busy)."""
    with open("/proc/stat") as stat:
        ticks = [int(field) for field in stat.readline().split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def settle(
    times: Callable[[], tuple[int, int]] = cpu_times,
    sleep: Callable[[float], None] = time.sleep,
    quiet: float = QUIET,
    limit: float = LIMIT,
) -> float | None:
    """Wait until the CPUs have been idle for `quiet` seconds in a row; the seconds waited before that idle stretch
    began (None if it did not come within `limit`)."""
    waited, idle_since = 0.0, 0.0
    before = times()
    while waited < limit:
        sleep(STEP)
        waited += STEP
        now = times()
        busy, total = now[0] - before[0], now[1] - before[1]
        before = now
        if total and busy / total >= BUSY:
            idle_since = waited
        elif waited - idle_since >= quiet:
            return idle_since
    return None
