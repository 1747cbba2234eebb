"""A live lab's keeper survives any request: each bad one (a width of 1e400, 100 000 `[`, more bytes than a
request may hold, a client that sends nothing, fields no client writes) is answered with an error, and the keeper
still answers a good probe after it. The lab is of a scenario whose probe names hold markup and ESC, which the
keeper prints as text. `lab up` leaves no descriptor of the caller's open (`(lab up ... 3>&1) | cat` returns)
and no working directory of the caller's busy."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.host import REPO

pytestmark = pytest.mark.xdist_group("lab-down")  # as test_live_lab's: `lab down` of the newest lab is ours

SCENARIO = REPO / "tests" / "integration" / "topologies" / "markup-names.yaml"
GOOD = "closes-[/]"


def lab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lab", *args], capture_output=True, text=True, cwd=REPO, timeout=timeout
    )


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A live lab brought up as `(lab up ...) 3>&1 | cat` from a directory of the caller's: cat ends at once only
    if the keeper closed the pipe it inherited as descriptor 3 (else `timeout` ends it: status 124)."""
    caller = tmp_path_factory.mktemp("caller")
    command = f"cd {caller} && ({sys.executable} -m lab up {SCENARIO} 3>&1) | timeout 20 cat"
    done = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, timeout=120, env=os.environ | {"PYTHONPATH": str(REPO)}
    )
    prefix = done.stdout.split(":", 1)[0]
    try:
        assert prefix.startswith("lab-"), done.stdout + done.stderr
        state = json.loads(Path(f"/run/lab/{prefix}.json").read_text())
        yield prefix, state["pid"], done.returncode
    finally:
        lab("down", prefix)


def send(prefix: str, data: bytes, close: bool = True) -> dict:
    """Raw bytes to the keeper's socket; its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(f"/run/lab/{prefix}.sock")
        sock.sendall(data)
        if close:
            sock.shutdown(socket.SHUT_WR)
        return json.loads(sock.makefile("rb").readline())


def still_answers(prefix: str) -> None:
    probed = lab("probe", "--run", prefix, GOOD, "--json", timeout=60)
    assert probed.returncode == 0, probed.stderr
    assert json.loads(probed.stdout)["probe"] == GOOD


def test_lab_up_leaves_the_callers_descriptors_and_directory(live):
    _, pid, status = live
    assert status == 0  # cat ended by itself: nobody but lab up held the pipe
    assert os.readlink(f"/proc/{pid}/cwd") == "/"


@pytest.mark.parametrize(
    ("request_line", "said"),
    [
        (b'{"name": "closes-[/]", "width": 1e400}\n', "width: expected a whole number, not inf"),
        (b"[" * 60_000 + b"\n", "recursion limit exceeded"),
        (b'{"name": "closes-[/]", "shell": "rm -rf /"}\n', "shell: unknown field; a request has name, from, to"),
        (b'{"name": "closes-[/]", "width": 0}\n', "width: expected a number of at least 1"),
        (b'{"from": "node1"}\n', "an ad hoc probe needs both from and to"),
        (b"\xff\xfe\n", "Invalid JSON"),
        (b"[" * 100_000 + b"\n", "more than 65536 bytes without a line's end"),
        (b'{"name": "[bold]nope[/]"}\n', "markup-names has no probe '[bold]nope[/]'"),
    ],
    ids=["width-1e400", "deep-nesting", "unknown-field", "narrow", "half-adhoc", "not-json", "too-long", "markup"],
)
def test_a_bad_request_is_answered_and_the_keeper_stays(live, request_line, said):
    prefix, pid, _ = live
    answer = send(prefix, request_line)
    assert said in answer.get("error", ""), answer
    assert Path(f"/proc/{pid}").exists()
    still_answers(prefix)


def test_a_probe_whose_name_is_markup_prints_as_text(live):
    prefix, _, _ = live
    probed = lab("probe", "--run", prefix, "-v", GOOD, timeout=60)
    assert probed.returncode == 0, probed.stderr
    assert GOOD in probed.stdout
    refused = lab("probe", "--run", prefix, "[red]x[/]\x1b[31m", timeout=60)
    assert refused.returncode == 2 and "has no probe '[red]x[/]\\x1b[31m'" in refused.stderr, refused.stderr


def test_a_silent_client_blocks_no_other(live):
    prefix, _, _ = live
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.settimeout(30)
        silent.connect(f"/run/lab/{prefix}.sock")
        good = send(prefix, b'{"name": "closes-[/]"}\n')
        assert good["record"]["probe"] == GOOD
        # Answered while the silent client still waits for its own answer: the keeper did not serve it first.
        silent.setblocking(False)
        with pytest.raises(BlockingIOError):
            silent.recv(1)
        silent.setblocking(True)
        answer = json.loads(silent.makefile("rb").readline())
    assert "no request line within 5 s" in answer["error"]
    still_answers(prefix)
