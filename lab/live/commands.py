"""The live lab's commands as the CLI runs them: up, ls, exec, shell, probe, down."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import time
from pathlib import Path
from typing import Any

from lab.describe.topology import Axis, Topology
from lab.live.keeper import start
from lab.live.record import LiveLab, LiveLabError, NotRunnable, live_labs, pick
from lab.paths import NETNS_DIR
from lab.realize.runs import alive, process_start, recorded_runs, remove_leftovers

STOP_LIMIT = 60.0  # seconds a keeper may take to tear its lab down after SIGTERM


def up(path: Path, matrix: dict[str, list[Axis]], topo: Topology) -> list[str]:
    return start(path.resolve(), matrix, topo)


def listing() -> list[str]:
    labs = live_labs()
    if not labs:
        return ["no live lab (lab up FILE starts one)"]
    now = time.time()
    return [listed(lab, now) for lab in labs]


def listed(lab: LiveLab, now: float) -> str:
    """A live lab's line of `lab ls`: run, scenario and variant, time up, actors, keeper's pid, file."""
    up, pid = int(now - lab.created), lab.state.pid if lab.state else "?"
    return f"{lab.prefix}  {lab.title}  up {up} s  {len(lab.actors)} actors  keeper pid {pid}  {lab.scenario}"


def namespace_of(lab: LiveLab, actor: str) -> str:
    """The namespace of the actor `actor` names (NAME, or NAMESPACE/NAME of a pod), only if the run recorded it
    and it is still a plain file in /run/netns (never a symlink someone put there)."""
    ns = lab.actors[lab.actor(actor)]
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
    ns = namespace_of(pick(run), actor)
    runnable(command[0])
    return ["ip", "netns", "exec", ns, *command]


def runnable(name: str) -> None:
    """Refuse a command that cannot start, as a shell does (`ip netns exec` would say "exec of ... failed" and
    return 1, which reads as the command's own failure): 127 when there is no such command, 126 when it is
    not an executable file. The namespace sees the host's files, so the host's PATH is the one searched."""
    if "/" in name:
        found: str | None = name
        if not os.path.exists(name):
            raise NotRunnable(f"{name}: no such file", 127)
    else:
        found = shutil.which(name)
        if found is None:
            somewhere = shutil.which(name, mode=os.F_OK)
            if somewhere is None:
                raise NotRunnable(f"{name}: command not found", 127)
            found = somewhere
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise NotRunnable(f"{found}: not executable", 126)


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
    """Take live labs down (RUN; without it the only one; --all every one), then sweep dead runs' leftovers: with
    RUN only its own, and only what concerns it is said."""
    labs = live_labs()
    if everything:
        return [_stop(lab) for lab in labs] + remove_leftovers(include_live=True).lines()
    if run is None:
        if len(labs) > 1:
            listed = "; ".join(f"{lab.prefix} {lab.title}" for lab in labs)
            raise LiveLabError(f"{len(labs)} live labs: give RUN, one of {listed} (or --all: every one)")
        return [_stop(lab) for lab in labs] + remove_leftovers().lines()
    chosen = [lab for lab in labs if lab.prefix == run]
    state = next((state for state in recorded_runs() if state.prefix == run), None)
    if not chosen and state is None:
        known = ", ".join(lab.prefix for lab in labs) or "none"
        raise LiveLabError(f"no run {run}; the live labs are: {known}")
    if not chosen and state is not None and alive(state):
        return [f"{run} is no live lab but a run still going (pid {state.pid}): it removes its namespaces itself"]
    said = [_stop(lab) for lab in chosen]
    cleanup = remove_leftovers(only=run)
    return said + ([] if chosen and cleanup.empty else cleanup.lines())


def _stop(lab: LiveLab) -> str:
    """SIGTERM to the keeper, which tears its lab down; wait for it to be gone (SIGKILL after STOP_LIMIT, and
    then the leftover sweep removes what it recorded)."""
    state = lab.state
    assert state is not None  # read from the run state
    if alive(state):
        _warn_shells(lab)
        os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_LIMIT
    while process_start(state.pid) == state.start:
        if time.monotonic() > deadline:
            os.kill(state.pid, signal.SIGKILL)
            return f"{lab.prefix}: the keeper did not stop within {STOP_LIMIT:.0f} s: killed"
        time.sleep(0.05)
    return f"{lab.prefix}: {lab.title} taken down"


def _warn_shells(lab: LiveLab) -> None:
    """Tell every open `lab shell` of the lab, on its terminal, that the lab goes: its teardown kills what runs
    in the lab's namespaces, the shell too, which would otherwise vanish without a word. A shell is known by
    the LAB_RUN its environment was started with (shell_argv); each terminal is told once."""
    marker = f"LAB_RUN={lab.prefix}".encode()
    told: set[str] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker not in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                continue
            terminal = os.readlink(f"/proc/{pid}/fd/0")
        except OSError:  # gone meanwhile, or no stdin
            continue
        if terminal in told or not terminal.startswith(("/dev/pts/", "/dev/tty")):
            continue
        told.add(terminal)
        with contextlib.suppress(OSError):  # a terminal closed meanwhile has nobody to tell
            fd = os.open(terminal, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
            try:
                os.write(fd, f"\r\nlab down: {lab.prefix} is being taken down; this lab shell ends now\r\n".encode())
            finally:
                os.close(fd)
