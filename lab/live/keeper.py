"""The keeper: the detached process that builds a live lab, keeps it, and runs probes asked over its socket.

`start` forks it (setsid and a second fork, so that it outlives the terminal and is nobody's child), waits for its
first word on a pipe (the summary, or why the lab could not be built) and returns. The keeper builds the variant
as the Python API does (lab.api.cluster.hold: the pipeline's stages and a probe session), writes its description
beside the run state, answers requests on /run/lab/<prefix>.sock (root-only), and tears everything down on SIGTERM
(`lab down`).

Every request is untrusted. Clients are read concurrently (one select loop, each with REQUEST_SECONDS to send
its request line of at most REQUEST_BYTES), so one that connects and sends nothing blocks nobody; the probes
themselves run one at a time, because they share the lab's probe session (its captures are forgotten before
each probe and its evidence marks are taken per probe: two at once would take each other's frames). A request
the schema refuses, or one whose probe fails inside the keeper, is answered with an error the client prints; the
failure is logged in /run/lab/<prefix>.log; the keeper and its lab stay up.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import selectors
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from lab.api.cluster import PROBE_TIMEOUT, Cluster, LabError, ScenarioSource, hold, pod_aliases
from lab.describe.readfile import ReadError, read_bytes
from lab.describe.topology import Axis, ProbeSpec, Topology, axis_text
from lab.judge.results import ProbeResult, Timing, VariantRun
from lab.live.adhoc import adhoc_probe
from lab.live.record import LIVE, LOG, LiveLab, LiveLabError
from lab.live.request import REQUEST_BYTES, ProbeRequest, RequestError, parse_request
from lab.live.summary import summary
from lab.realize.runs import write_beside
from lab.realize.terminate import Terminated, handle_sigterm
from lab.report.literal import literal
from lab.report.records import evidence_lines, headline, observed_text, to_record
from lab.report.terminal import print_scenario

IDLE = 5.0  # seconds between sweeps of the frames captured while no probe runs
REQUEST_SECONDS = 5.0  # a client's time to send its request line (lab probe sends it at once)
ANSWER_SECONDS = 10.0  # a client's time to take its answer
MAX_CLIENTS = 32  # connections waiting to send their request at one time; more are refused at once


def file_digest(path: Path) -> str:
    return hashlib.sha256(read_bytes(path)).hexdigest()


def start(path: Path, matrix: dict[str, list[Axis]], topo: Topology) -> list[str]:
    """Fork the keeper of `topo` (a variant of the scenario at `path`); its summary once the lab is up."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked processes
        os.close(read_end)
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        _detach(write_end)
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


def _detach(keep: int) -> None:
    """No terminal: stdin, stdout and stderr from and to /dev/null; no other descriptor the caller had open but
    `keep` (`(lab up ... 3>&1) | cat` would wait for the keeper to close its end of the pipe, that is for lab
    down); and the working directory `/`, so that the keeper holds no directory of the caller's busy."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    os.closerange(3, keep)
    os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
    os.chdir("/")


def _tell(fd: int, word: Mapping[str, Any]) -> None:
    os.write(fd, json.dumps(word).encode() + b"\n")
    os.close(fd)


def _keep(path: Path, matrix: dict[str, list[Axis]], variant: tuple[tuple[str, Axis], ...], tell: int) -> None:
    handle_sigterm()
    try:
        digest = file_digest(path)
        source = ScenarioSource(path, matrix)
        topo = next(t for t in source.load().variants if t.variant == variant)
        # Built as lab.up builds it; a refused first kube-proxy sync is said by every `lab probe`.
        with hold(source, topo, PROBE_TIMEOUT) as cluster:
            lab = LiveLab(
                cluster.prefix,
                str(path),
                topo.scenario,
                {k: axis_text(v) for k, v in topo.variant},
                {name: actor.namespace for name, actor in cluster.actors.items()},
                time.time(),
                digest,
                pod_aliases(topo.built_pods),
            )
            write_beside(cluster.prefix, LIVE, lab.to_json())
            with _listening(lab.socket) as server:
                _tell(tell, {"summary": summary(topo, cluster.prefix)})
                tell = -1
                _serve(server, _Requests(lab, matrix, topo, cluster), _logger(lab))
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


def _logger(lab: LiveLab) -> logging.Logger:
    """The keeper's log, beside its run state (removed with the run): what failed inside it, with a traceback."""
    write_beside(lab.prefix, LOG, "")
    log = logging.getLogger(f"lab.keeper.{lab.prefix}")
    handler = logging.FileHandler(lab.log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log.addHandler(handler)
    log.propagate = False
    return log


class _Requests:
    """What a live lab answers: a probe of its scenario by name, or an ad hoc one."""

    def __init__(self, lab: LiveLab, matrix: dict[str, list[Axis]], topo: Topology, cluster: Cluster) -> None:
        self.lab, self.matrix, self.topo, self.cluster = lab, matrix, topo, cluster

    def answer(self, line: bytes) -> dict[str, Any]:
        try:
            request = parse_request(line)
            probe, adhoc = self._probe(request)
        except (RequestError, LiveLabError) as exc:
            return {"error": str(exc)}
        result = self.cluster.run(probe)
        out = io.StringIO()
        console = Console(file=out, width=request.width, force_terminal=request.color)
        if adhoc:
            console.print(literal(f"  {headline(result)}", "bold"), soft_wrap=True)
            console.print(literal(f"    observed: {observed_text(result)}"), soft_wrap=True)
            for evidence in evidence_lines(result):
                console.print(literal(f"    {evidence}"), soft_wrap=True)
        else:
            if probe.before:
                steps = "; ".join(str(step) for step in probe.before)
                console.print(literal(f"(not run here: the steps before {probe.name}: {steps})"))
            run = VariantRun(self.topo, [result], Timing(0, 0, 0, 0))
            print_scenario(self.topo.scenario, [run], console, verbose=request.verbose)
        return probe_answer(result, out.getvalue())

    def _probe(self, request: ProbeRequest) -> tuple[ProbeSpec, bool]:
        if name := request.name:
            try:
                return self.cluster.own_probe(name), False
            except LabError as exc:  # no such probe, or one checking a flow no probe keeps yet
                raise LiveLabError(str(exc)) from None
        path = Path(self.lab.scenario)
        try:
            changed = file_digest(path) != self.lab.digest
        except ReadError as exc:
            raise LiveLabError(f"{path}: {exc}: lab down {self.lab.prefix}, then lab up again") from None
        if changed:
            raise LiveLabError(f"{path} changed since lab up: lab down {self.lab.prefix}, then lab up again")
        return adhoc_probe(path, self.matrix, self.topo, request.adhoc()), True


@dataclass
class _Client:
    """A connection still sending its request line."""

    conn: socket.socket
    deadline: float
    received: bytearray = field(default_factory=bytearray)


def _serve(server: socket.socket, requests: _Requests, log: logging.Logger) -> None:
    """Until SIGTERM: read every client's request as it comes, answer each complete one in turn; frames captured
    while idle are dropped every IDLE seconds."""
    clients: dict[int, _Client] = {}
    swept = time.monotonic()
    with selectors.DefaultSelector() as selector:
        selector.register(server, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            wait = min([IDLE, *(c.deadline - now for c in clients.values())])
            for key, _ in selector.select(max(wait, 0)):
                if key.fileobj is server:
                    _accept(server, selector, clients)
                else:
                    client = clients[key.fd]
                    try:
                        if (line := _receive(client)) is None:
                            continue
                        answer = _answer(requests, line, log)
                    except RequestError as exc:
                        answer = {"error": str(exc)}
                    selector.unregister(client.conn)
                    del clients[key.fd]
                    _reply(client.conn, answer)
            now = time.monotonic()
            for fd, client in list(clients.items()):
                if now >= client.deadline:
                    selector.unregister(client.conn)
                    del clients[fd]
                    _reply(client.conn, {"error": f"bad request: no request line within {REQUEST_SECONDS:g} s"})
            if not clients and now - swept >= IDLE:
                requests.cluster.forget_frames()
                swept = now


def _accept(server: socket.socket, selector: selectors.BaseSelector, clients: dict[int, _Client]) -> None:
    try:
        conn, _ = server.accept()
    except OSError:  # the client gave up between select and accept
        return
    if len(clients) >= MAX_CLIENTS:
        _reply(conn, {"error": f"the keeper is reading {MAX_CLIENTS} other requests: try again"})
        return
    conn.setblocking(False)
    clients[conn.fileno()] = _Client(conn, time.monotonic() + REQUEST_SECONDS)
    selector.register(conn, selectors.EVENT_READ)


def _receive(client: _Client) -> bytes | None:
    """The client's request line once it is complete (or what it sent before it closed), None until then."""
    try:
        chunk = client.conn.recv(REQUEST_BYTES + 1 - len(client.received))
    except BlockingIOError:
        return None
    except OSError:
        chunk = b""
    client.received += chunk
    if b"\n" in client.received:
        return bytes(client.received.split(b"\n", 1)[0])
    if not chunk:  # closed before a full line: answered as what it sent
        return bytes(client.received)
    if len(client.received) > REQUEST_BYTES:
        raise RequestError(f"bad request: more than {REQUEST_BYTES} bytes without a line's end")
    return None


def _answer(requests: _Requests, line: bytes, log: logging.Logger) -> dict[str, Any]:
    """The answer to one request line; a failure inside the keeper is answered and logged, never its end."""
    try:
        return requests.answer(line)
    except Exception as exc:  # noqa: BLE001 - whatever one probe raised, the lab stays up for the next one
        log.exception("request %r failed", line[:500])
        return {
            "error": f"the keeper failed on this request ({type(exc).__name__}: {exc}); the lab is still up; "
            f"details in {requests.lab.log}"
        }


def _reply(conn: socket.socket, answer: Mapping[str, Any]) -> None:
    with conn:
        conn.setblocking(True)
        conn.settimeout(ANSWER_SECONDS)
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps(answer).encode() + b"\n")


def probe_answer(result: ProbeResult, text: str) -> dict:
    """The keeper's answer to a probe: ok None when it ran but this machine could not judge it (Verdict.skipped),
    as --json's record says."""
    ok = None if result.verdict.skipped else result.verdict.ok
    return {"ok": ok, "text": text, "record": to_record(result)}
