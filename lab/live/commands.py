"""The live lab's commands as the CLI runs them: up, ls, exec, shell, probe, down."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import time
from pathlib import Path
from typing import Any

from lab.describe.topology import Axis, Topology
from lab.live.keeper import start
from lab.live.record import LiveLab, LiveLabError, live_labs, pick
from lab.realize.enter import NETNS_DIR
from lab.realize.runs import alive, process_start, recorded_runs, remove_leftovers

STOP_LIMIT = 60.0  # seconds a keeper may take to tear its lab down after SIGTERM


def up(path: Path, matrix: dict[str, list[Axis]], topo: Topology) -> list[str]:
    return start(path.resolve(), matrix, topo)


def listing() -> list[str]:
    labs = live_labs()
    if not labs:
        return ["no live lab (lab up FILE starts one)"]
    now = time.time()
    return [
        f"{lab.prefix}  {lab.name} ({lab.variant_label})  up {int(now - lab.created)} s  "
        f"{len(lab.actors)} actors  keeper pid {lab.state.pid if lab.state else '?'}  {lab.scenario}"
        for lab in labs
    ]


def namespace_of(lab: LiveLab, actor: str) -> str:
    """The actor's namespace, only if the run recorded it and it is still a plain file in /run/netns (never a
    symlink someone put there)."""
    ns = lab.actors.get(actor)
    if ns is None:
        raise LiveLabError(f"{lab.prefix} has no actor {actor!r}; its actors are: {', '.join(sorted(lab.actors))}")
    entry = NETNS_DIR / ns
    try:
        info = entry.lstat()
    except FileNotFoundError:
        raise LiveLabError(f"{entry} is gone: the lab is being taken down") from None
    if not stat.S_ISREG(info.st_mode) or lab.state is None or ns not in lab.state.namespaces:
        raise LiveLabError(f"{entry} is not the namespace {lab.prefix} recorded: refusing to enter it")
    return ns


def exec_argv(run: str | None, actor: str, command: list[str]) -> list[str]:
    """What `lab exec` runs: the command in the actor's network namespace."""
    if not command:
        raise LiveLabError("lab exec ACTOR -- COMMAND: give the command after --")
    return ["ip", "netns", "exec", namespace_of(pick(run), actor), *command]


def shell_argv(run: str | None, actor: str) -> tuple[list[str], dict[str, str]]:
    """What `lab shell` runs: an interactive bash in the actor's namespace, its prompt naming actor and run."""
    lab = pick(run)
    ns = namespace_of(lab, actor)
    env = dict(os.environ, PS1=f"[{lab.prefix} {actor}] \\w# ", LAB_RUN=lab.prefix, LAB_ACTOR=actor)
    return ["ip", "netns", "exec", ns, "bash", "--norc", "-i"], env


def probe(run: str | None, request: dict[str, Any]) -> dict[str, Any]:
    """Ask the live lab's keeper to run a probe; its answer (text, record, ok) or an error."""
    lab = pick(run)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(lab.socket)
            sock.sendall(json.dumps(request).encode() + b"\n")
            said = sock.makefile("rb").readline()
            answer = json.loads(said) if said else None
        except (OSError, ValueError, RecursionError) as exc:
            raise LiveLabError(f"{lab.prefix}'s keeper did not answer: {exc}") from None
    if answer is None:
        raise LiveLabError(f"{lab.prefix}'s keeper closed the connection without an answer (is it up? lab ls)")
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        raise LiveLabError(answer["error"])
    if not isinstance(answer, dict) or not {"ok", "text", "record"} <= answer.keys():
        raise LiveLabError(f"{lab.prefix}'s keeper answered something that is no probe's result: {said[:200]!r}")
    return answer


def down(run: str | None, everything: bool) -> list[str]:
    """Take live labs down (RUN; without it the newest; --all every one), then sweep dead runs' leftovers."""
    labs = live_labs()
    if everything:
        chosen = labs
    elif run is not None:
        chosen = [lab for lab in labs if lab.prefix == run]
        if not chosen and not any(state.prefix == run for state in recorded_runs()):
            known = ", ".join(lab.prefix for lab in labs) or "none"
            raise LiveLabError(f"no run {run}; the live labs are: {known}")
    else:
        chosen = labs[-1:]
    said = [_stop(lab) for lab in chosen]
    return said + remove_leftovers(include_live=everything).lines()


def _stop(lab: LiveLab) -> str:
    """SIGTERM to the keeper, which tears its lab down; wait for it to be gone (SIGKILL after STOP_LIMIT, and
    then the leftover sweep removes what it recorded)."""
    state = lab.state
    assert state is not None  # read from the run state
    if alive(state):
        os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_LIMIT
    while process_start(state.pid) == state.start:
        if time.monotonic() > deadline:
            os.kill(state.pid, signal.SIGKILL)
            return f"{lab.prefix}: the keeper did not stop within {STOP_LIMIT:.0f} s: killed"
        time.sleep(0.05)
    return f"{lab.prefix}: {lab.name} ({lab.variant_label}) taken down"
