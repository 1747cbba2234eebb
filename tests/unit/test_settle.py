"""lab bench's wait for an idle machine (lab.bench.settle), on made-up CPU times."""

from __future__ import annotations

from lab.bench.settle import STEP, settle


def timeline(busy_steps: list[bool]):
    """CPU times whose every STEP is busy (a whole CPU of two) or idle, as listed; idle after the list."""
    state = {"busy": 0, "total": 0, "step": 0}

    def times() -> tuple[int, int]:
        return state["busy"], state["total"]

    def sleep(_: float) -> None:
        step = state["step"]
        state["step"] += 1
        state["total"] += 50
        state["busy"] += 25 if step < len(busy_steps) and busy_steps[step] else 1

    return times, sleep


def test_an_idle_machine_is_idle_at_once():
    times, sleep = timeline([])
    assert settle(times, sleep, quiet=1.0) == 0.0


def test_a_late_burst_of_work_is_waited_for():
    # idle for a second, then the kernel's cleanup for a second: the idle stretch begins after it
    times, sleep = timeline([False] * 4 + [True] * 4)
    assert settle(times, sleep, quiet=1.5) == 8 * STEP


def test_a_machine_never_idle_is_not_waited_for_beyond_the_limit():
    times, sleep = timeline([True] * 1000)
    assert settle(times, sleep, quiet=1.0, limit=5.0) is None
