"""The keeper: the detached process that builds a live lab, keeps it, and runs probes asked over its socket.

`start` forks it (setsid and a second fork, so that it outlives the terminal and is nobody's child), waits for its
first word on a pipe (the summary, or why the lab could not be built) and returns. The keeper builds the variant
with the pipeline's stages, writes its description beside the run state, answers one request at a time on
/run/lab/<prefix>.sock (root-only), and tears everything down on SIGTERM (`lab down`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from lab.describe.load import load_scenario
from lab.describe.topology import Axis, ProbeSpec, Topology, axis_text
from lab.judge.attempts import run_probe
from lab.live.adhoc import adhoc_probe
from lab.live.record import LIVE, LiveLab, LiveLabError
from lab.live.summary import summary
from lab.pipeline import ProbeResult, Timing, VariantRun, running_kernel, standing
from lab.probe.session import ProbeSession
from lab.realize.runs import write_beside
from lab.realize.terminate import Terminated, handle_sigterm
from lab.report.records import evidence_lines, headline, observed_text, to_record
from lab.report.terminal import print_scenario

PROBE_TIMEOUT = 0.5  # seconds a probe waits for an answer, as `lab run`'s default
IDLE = 5.0  # seconds between sweeps of the frames captured while no probe runs
REQUEST_LIMIT = 300.0  # seconds a `lab probe` connection may take to send its request and take the answer


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def start(path: Path, matrix: dict[str, list[Axis]], topo: Topology) -> list[str]:
    """Fork the keeper of `topo` (a variant of the scenario at `path`); its summary once the lab is up."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked processes
        os.close(read_end)
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        _detach()
        status = 0
        try:
            _keep(path, matrix, topo.variant, write_end)
        except BaseException:  # noqa: BLE001 - the keeper's end, whatever it is; the parent was told if it could be
            status = 1
        os._exit(status)
    os.close(write_end)
    os.waitpid(child, 0)
    with os.fdopen(read_end, "rb") as pipe:
        said = pipe.readline()
    if not said:
        raise LiveLabError("the keeper stopped before the lab was up (lab down removes what it left)")
    word = json.loads(said)
    if "error" in word:
        raise LiveLabError(word["error"])
    return list(word["summary"])


def _detach() -> None:
    """No terminal: stdin, stdout and stderr from and to /dev/null."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _tell(fd: int, word: Mapping[str, Any]) -> None:
    os.write(fd, json.dumps(word).encode() + b"\n")
    os.close(fd)


def _keep(path: Path, matrix: dict[str, list[Axis]], variant: tuple[tuple[str, Axis], ...], tell: int) -> None:
    handle_sigterm()
    try:
        digest = file_digest(path)
        topo = next(t for t in load_scenario(path, matrix, kernel=running_kernel()).variants if t.variant == variant)
        with standing(topo) as stood, ProbeSession(stood.realized, PROBE_TIMEOUT) as session:
            realized = stood.realized
            actors = dict(realized.namespaces) | {p.name: realized.ns_of(p.name) for p in topo.built_pods}
            lab = LiveLab(
                realized.prefix,
                str(path),
                topo.scenario,
                {k: axis_text(v) for k, v in topo.variant},
                actors,
                time.time(),
                digest,
            )
            write_beside(realized.prefix, LIVE, lab.to_json())
            with _listening(lab.socket) as server:
                _tell(tell, {"summary": summary(topo, realized.prefix)})
                tell = -1
                _serve(server, _Requests(lab, matrix, topo, session))
    except Exception as exc:  # whatever stopped the build, `lab up` says it (a build error names its file and line)
        if tell >= 0:
            _tell(tell, {"error": str(exc) or type(exc).__name__})
        raise
    except Terminated:
        return


@contextlib.contextmanager
def _listening(path: str):  # noqa: ANN202 - a context manager of a socket
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)  # the socket file is root's alone
        try:
            server.bind(path)
        finally:
            os.umask(old)
        server.listen(8)
        server.settimeout(IDLE)
        yield server
    finally:
        server.close()


class _Requests:
    """What a live lab answers: a probe of its scenario by name, or an ad hoc one."""

    def __init__(self, lab: LiveLab, matrix: dict[str, list[Axis]], topo: Topology, session: ProbeSession) -> None:
        self.lab, self.matrix, self.topo, self.session = lab, matrix, topo, session

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            probe, adhoc = self._probe(request)
        except LiveLabError as exc:
            return {"error": str(exc)}
        self.session.captures.forget()
        observed, verdict = run_probe(self.session, probe, self.topo)
        result = ProbeResult(self.topo, probe, observed, verdict)
        out = io.StringIO()
        console = Console(file=out, width=int(request.get("width", 120)), force_terminal=bool(request.get("color")))
        if adhoc:
            console.print(f"  [bold]{headline(result)}[/bold]", highlight=False, soft_wrap=True)
            console.print(f"    observed: {observed_text(result)}", highlight=False, markup=False, soft_wrap=True)
            for line in evidence_lines(result):
                console.print(f"    {line}", highlight=False, markup=False, soft_wrap=True)
        else:
            if probe.before:
                steps = "; ".join(str(step) for step in probe.before)
                console.print(f"(not run here: the steps before {probe.name}: {steps})", markup=False)
            run = VariantRun(self.topo, [result], Timing(0, 0, 0, 0))
            print_scenario(self.topo.scenario, [run], console, verbose=bool(request.get("verbose")))
        return {"ok": adhoc or verdict.ok, "text": out.getvalue(), "record": to_record(result)}

    def _probe(self, request: dict[str, Any]) -> tuple[ProbeSpec, bool]:
        if name := request.get("name"):
            probe = next((p for p in self.topo.probes if p.name == name), None)
            if probe is None:
                known = ", ".join(p.name for p in self.topo.probes)
                raise LiveLabError(f"{self.topo.scenario} has no probe {name!r}; its probes are: {known}")
            if probe.flow and probe.flow not in self.session.flows:
                raise LiveLabError(
                    f"{name} checks the flow probe {probe.flow} keeps: run `lab probe {probe.flow}` first"
                )
            return probe, False
        path = Path(self.lab.scenario)
        if file_digest(path) != self.lab.digest:
            raise LiveLabError(f"{path} changed since lab up: lab down {self.lab.prefix}, then lab up again")
        return adhoc_probe(path, self.matrix, self.topo, request), True


def _serve(server: socket.socket, requests: _Requests) -> None:
    """One request at a time, until SIGTERM; frames captured while idle are dropped every IDLE seconds."""
    while True:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            requests.session.captures.forget()
            continue
        with conn:
            conn.settimeout(REQUEST_LIMIT)
            try:
                request = json.loads(conn.makefile("rb").readline() or b"{}")
                answer = requests.answer(request if isinstance(request, dict) else {})
            except (ValueError, OSError) as exc:
                answer = {"error": f"bad request: {exc}"}
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps(answer).encode() + b"\n")
