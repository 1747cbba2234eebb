"""The test session's runs are its own (tests/conftest.py): the machine (as the process that started pytest
sees it) never sees them, so no `lab down` or `lab run` of anyone else's sweeps them, and theirs never reach
the session."""

from __future__ import annotations

import os

from lab.realize import runs


def test_the_sessions_run_state_is_not_the_machines(host_unchanged):
    outside = f"/proc/{os.getppid()}"  # the shell (or xdist's controller) that started this process
    machine = f"{outside}/root"
    assert os.path.isdir(f"{machine}/run"), "the starting process's files cannot be read: the test means nothing"
    prefix = runs.new_prefix()
    try:
        assert os.path.exists(f"/run/lab/{prefix}.json")
        assert not os.path.exists(f"{machine}/run/lab/{prefix}.json")
        assert os.readlink("/proc/self/ns/mnt") != os.readlink(f"{outside}/ns/mnt")
    finally:
        runs.release(prefix)
