"""A run's state file (/run/lab/<prefix>.json) and how `lab down` tells a live run from a dead one (no root)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lab.realize.runs import Cleanup, RunState, alive, process_start, start_time

STAT = "1234 (a (weird) ) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 1 0 0 20 0 1 0 987654 10000 100"


def test_start_time_is_field_22_even_when_the_command_name_holds_spaces_and_parens():
    assert start_time(STAT) == 987654


def test_process_start_reads_proc_and_is_none_for_a_pid_that_is_gone():
    assert process_start(os.getpid()) == start_time(Path("/proc/self/stat").read_text())
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert process_start(gone.pid) is None


def test_a_pid_given_to_a_process_that_started_at_another_time_is_no_longer_the_run():
    me = process_start(os.getpid())
    assert me is not None
    assert alive(RunState("lab-0a0a0a", os.getpid(), me))
    assert not alive(RunState("lab-0a0a0a", os.getpid(), me + 1))  # same pid, another process


def test_state_round_trips_through_json():
    state = RunState("lab-0a0a0a", 42, 7, ("lab-0a0a0a-fabric", "lab-0a0a0a-node1"))
    assert RunState.from_json("lab-0a0a0a", state.to_json()) == state


@pytest.mark.parametrize(
    "text",
    [
        "",  # a file cut short (never written by lab: it renames whole files into place)
        '{"pid": 42, "start": 7',
        '{"pid": "42", "start": 7, "namespaces": []}',
        '{"pid": true, "start": 7, "namespaces": []}',
        '{"pid": 42, "start": 7}',
        '{"pid": 42, "start": 7, "namespaces": "lab-0a0a0a-x"}',
        '{"pid": 42, "start": 7, "namespaces": ["lab-0b0b0b-x"]}',  # another run's prefix
        '{"pid": 42, "start": 7, "namespaces": ["lab-0a0a0a-../../etc/passwd"]}',
        '{"pid": 42, "start": 7, "namespaces": ["lab-0a0a0a"]}',
        "[]",
    ],
)
def test_a_file_that_is_not_a_runs_state_names_nothing(text):
    assert RunState.from_json("lab-0a0a0a", text) is None


def test_cleanup_says_what_it_removed_and_what_it_left_and_why():
    cleanup = Cleanup(
        removed=["lab-0a0a0a-x"], live=["lab-0b0b0b-y"], not_plain=["lab-0c0c0c-z"], unrecorded=["lab-0d0d0d-w"]
    )
    lines = cleanup.lines()
    assert lines[0] == "removed 1 namespaces: lab-0a0a0a-x"
    assert lines[1].startswith("left 1 namespaces of runs still running (lab down --all removes them too)")
    assert "not a plain file" in lines[2] and lines[2].endswith("lab-0c0c0c-z")
    assert "no lab run recorded" in lines[3] and lines[3].endswith("lab-0d0d0d-w")
    assert Cleanup().lines() == ["removed 0 namespaces"]
