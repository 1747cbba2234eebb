"""`lab bench --sync N,N,...`: kube-proxy's sync of N Services on one node, per mode, with what it costs traffic and
what the kernel says meanwhile — the scale bugs users meet (kubernetes/kubernetes#135639: a soft lockup in the nftables
full sync on 6.12.55; #139513: super-linear sync time and an RCU stall in nf_tables_newset at ~44 000 Services with one
endpoint each; #139328: the cold start's one giant transaction).

Each run builds one node (the replay environment: a client pod on the node's cni0, every endpoint behind the node's
uplink, answered by the sink) with kube-proxy's rules for one Service already loaded, the Service a client keeps
connecting to. Timed, with the lab's renderers for the mode and release, loaded with the real tools as install loads
them:
- the full sync: kube-proxy restarted, its first sync of all N Services (ClusterIP Services with one endpoint each,
  the shape of #139513) over the rules of the one (ipvs: its sync from one Service to N);
- a one-endpoint change: one Service's endpoint replaced, kube-proxy's next sync as the lab renders it. The lab
  renders every sync of iptables and nftables mode whole (no partial restore, no incremental transaction: nftables
  replaces its table in one transaction), so this is kube-proxy's full resync, not the partial sync of iptables
  mode (MinimizeIPTablesRestore, on by default since 1.27) and nftables mode (#126013, 1.31): an upper bound there;
- traffic during the full sync: a new connection to the existing Service every few milliseconds from the client pod;
  the largest time without an answer and the slowest connection while the sync ran, against the median before it;
- the kernel's own warnings during the run, read from the kernel log (/dev/kmsg): RCU stalls, soft lockups, hung
  tasks, WARNINGs. Under `lab vm` that is the guest's kernel; on a shared machine, whatever else ran too.
"""

from __future__ import annotations

import errno
import math
import os
import platform
import re
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from rich.console import Console
from rich.table import Table

from lab.bench.scale import CLIENT, CONFIG, NODE_IP, POD_CIDR, plane, services, writers
from lab.describe.digits import is_ascii_number
from lab.doctor import kernel_has
from lab.install.dataplane import apply, load
from lab.install.echo import EchoServers, Listener
from lab.install.kernel_state import read_state
from lab.install.sync_failure import failed_sync
from lab.probe.client import send
from lab.render.dataplane import NodeDataplane, ipvs_plane
from lab.render.kubeproxy.ipvs import IpvsRules, render_ipvs
from lab.render.kubeproxy.kernel_state import Reads
from lab.render.kubeproxy.nftables import check_nftables_version
from lab.render.kubeproxy.service import Endpoint, ServicePort
from lab.render.kubeproxy.sync import SyncPlan, ipvs_proxier_sync
from lab.render.kubeproxy.versions import Release
from lab.replay.env import Setup, build

# The bench's modes: iptables mode with each backend of the iptables tools, nftables, ipvs.
MODES = ("nftables", "iptables-nft", "iptables-legacy", "ipvs")
MOST = 60_000  # ClusterIPs 172.30.0.0/16 and endpoints 10.180.0.0/16 are numbered 250 to a /24 (scale.services)
INTERVAL = 0.005  # seconds between the client's connections
TIMEOUT = 2.0  # a connection unanswered for longer is lost
ANSWERED_BEFORE = 5  # connections answered before the full sync starts
CHANGED_ENDPOINT = "10.181.0.1"  # the one endpoint's new address (outside every other endpoint's)
# The kernel's own warnings, as its log words them: "rcu: INFO: rcu_sched self-detected stall on CPU", "watchdog:
# BUG: soft lockup - CPU#13 stuck for 22s!", "INFO: task nft:123 blocked for more than 120 seconds.", "WARNING: CPU:
# 0 PID: 1 at net/netfilter/...".
WARNINGS = (
    ("RCU stall", re.compile(r"rcu.*(detected stall|self-detected stall)")),
    ("soft lockup", re.compile(r"soft lockup")),
    ("hung task", re.compile(r"blocked for more than \d+ seconds")),
    ("WARNING", re.compile(r"^WARNING:|\bWARNING: CPU:")),
)


def parse_sync_sizes(text: str) -> list[int]:
    """`1000,5000` → [1000, 5000], smallest first, each once; ValueError naming what is wrong. ASCII digits only:
    str.isdigit() and int() take any script's, and isdigit() also '²', which int() refuses in its own words."""
    sizes = set()
    for item in text.split(","):
        if not is_ascii_number(item) or not 1 <= int(item) <= MOST:
            raise ValueError(
                f"expected Service counts from 1 to {MOST}, comma-separated (e.g. 1000,5000), got {item!r}"
            )
        sizes.add(int(item))
    return sorted(sizes)


def parse_modes(text: str) -> list[str]:
    """`nftables,ipvs` → ["nftables", "ipvs"]; ValueError naming what is wrong."""
    modes = text.split(",")
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"expected modes among {', '.join(MODES)}, comma-separated, got {mode!r}")
    if len(set(modes)) != len(modes):
        raise ValueError(f"each mode once, got {text!r}")
    return modes


def version_problem(version: str, modes: list[str]) -> str | None:
    """Why kube-proxy `version` cannot be benched in `modes` (None when it can)."""
    try:
        Release.of(version)
    except ValueError as exc:
        return str(exc)
    return check_nftables_version(version) if "nftables" in modes else None


def one_endpoint_changed(svcs: list[ServicePort]) -> list[ServicePort]:
    """The same Services with the endpoint of the one in the middle replaced (its pod restarted elsewhere)."""
    middle = len(svcs) // 2
    (endpoint,) = svcs[middle].endpoints
    moved = replace(svcs[middle], endpoints=(Endpoint(CHANGED_ENDPOINT, endpoint.port, is_local=False),))
    return [*svcs[:middle], moved, *svcs[middle + 1 :]]


@dataclass(frozen=True)
class Rendered:
    """What the bench loads for one set of Services: the dataplane, and in ipvs mode the rules its next sync is made
    from."""

    plane: NodeDataplane
    ipvs: IpvsRules | None = None


def render(mode: str, svcs: list[ServicePort], version: str) -> Rendered:
    if mode != "ipvs":
        return Rendered(plane("iptables" if mode == "iptables-nft" else mode, svcs, version))
    rules = render_ipvs(svcs, CONFIG, [NODE_IP], version)
    return Rendered(ipvs_plane(rules), rules)


def resync(mode: str, ns: str, old: Rendered, new: Rendered) -> None:
    """kube-proxy's sync from `old` to `new` as the lab plans and applies it (ipvs: from what the node's kernel holds,
    read first, as kube-proxy reads it)."""
    if new.ipvs is None or old.ipvs is None:
        plan = SyncPlan(new.plane)
    else:
        state = read_state(ns, Reads(ipvs=True))
        plan = ipvs_proxier_sync(ipvs_plane(new.ipvs, previous=old.ipvs), old.ipvs, new.ipvs, state)
    _refused(mode, apply(ns, plan, writers(mode)))


def _refused(mode: str, said: tuple[str, ...]) -> None:
    """A refused sync ends the bench: its time would not be a sync's. (What else a sync says, such as ipvs' graceful
    termination keeping a real server, is kube-proxy's usual work.)"""
    if refusals := [line for line in said if failed_sync(line)]:
        raise RuntimeError(f"{mode}: {refusals[0]}")


def first_sync(mode: str, ns: str, rendered: Rendered) -> None:
    _refused(mode, load(ns, rendered.plane, writers(mode)))


def full_sync(mode: str, ns: str, one: Rendered, every: Rendered) -> None:
    """kube-proxy restarted over the rules of one Service: its first sync of every Service (ipvs, whose first sync
    would make kube-ipvs0 again: its sync from the one Service to every one)."""
    if mode == "ipvs":
        resync(mode, ns, one, every)
    else:
        first_sync(mode, ns, every)


def warnings_in(messages: list[str]) -> Counter[str]:
    """How many of each kind of the kernel's warnings the log's messages hold."""
    found: Counter[str] = Counter()
    for message in messages:
        for kind, pattern in WARNINGS:
            if pattern.search(message):
                found[kind] += 1
    return found


@contextmanager
def kernel_log() -> Iterator[list[str]]:
    """The kernel log's messages written while the block runs (each record's text, /dev/kmsg's format: `prio,seq,
    time,flags;text`), in the list yielded once the block is left."""
    messages: list[str] = []
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.lseek(fd, 0, os.SEEK_END)  # from the next record on
        yield messages
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno != errno.EPIPE:  # EPIPE: records overwritten before being read; the next one follows
                    raise
                continue
            messages.append(record.decode(errors="replace").partition(";")[2].strip())
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Answer:
    started: float
    ended: float
    answered: bool


def reached(ns: str, ip: str, endpoint: str) -> tuple[bool, str]:
    """Whether a new connection from `ns` to `ip`:80 was answered by `endpoint` (the sink answers every address it is
    sent, the ClusterIP itself too when no rule translates it: the address it was reached at tells), and what it met
    otherwise."""
    result = send(ns, ip, 80, "TCP", TIMEOUT)
    local = (result.reply or {}).get("local", "")
    if result.outcome == "delivered" and local == f"{endpoint}:80":
        return True, ""
    return False, f"{result.outcome} at {local}" if local else f"{result.outcome} ({result.error})"


class Client:
    """New connections to one Service from the client pod, one every INTERVAL, on a thread of its own, until stopped;
    answered when its endpoint answered."""

    def __init__(self, ns: str, service: ServicePort) -> None:
        self.ns, self.ip, self.endpoint = ns, str(service.cluster_ip), service.endpoints[0].ip
        self.answers: list[Answer] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._connect, name="bench-sync-client", daemon=True)

    def _connect(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            answered, _ = reached(self.ns, self.ip, self.endpoint)
            self.answers.append(Answer(started, time.perf_counter(), answered))
            self._stop.wait(INTERVAL)

    def __enter__(self) -> Client:
        self._thread.start()
        return self

    def answered_before(self, count: int, within: float) -> None:
        """Wait for `count` answered connections, the median the sync's are read against (a fixed wait left none
        under lab vm's emulated CPU, where a connection takes longer than the wait); none within `within` seconds
        ends the bench: the Service was not reached before the sync."""
        deadline = time.perf_counter() + within
        while sum(a.answered for a in self.answers) < count:
            if time.perf_counter() > deadline:
                raise RuntimeError(
                    f"before the full sync: {self.ip}:80 was not answered by its endpoint {self.endpoint} "
                    f"{count} times within {within:.0f} s: timings would not count"
                )
            time.sleep(INTERVAL)

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass(frozen=True)
class Traffic:
    """What the client met: its connections' median time before the sync; during it the slowest, the largest time
    without an answer and the connections lost."""

    before_ms: float
    slowest_ms: float
    gap_ms: float
    lost: int
    during: int


def traffic(answers: list[Answer], start: float, end: float) -> Traffic:
    """The client's connections read against the sync's start and end (a connection is the sync's when it ended
    after the sync started and began before it ended)."""
    before = [a.ended - a.started for a in answers if a.ended < start and a.answered]
    during = [a for a in answers if a.ended >= start and a.started <= end]
    answered = sorted(min(max(a.ended, start), end) for a in during if a.answered)
    edges = [start, *answered, end]
    return Traffic(
        statistics.median(before) * 1e3 if before else math.nan,
        max((a.ended - a.started for a in during), default=0.0) * 1e3,
        max(b - a for a, b in zip(edges, edges[1:], strict=False)) * 1e3,
        sum(not a.answered for a in during),
        len(during),
    )


@dataclass(frozen=True)
class Sample:
    full: float  # seconds
    change: float
    traffic: Traffic
    warnings: Counter[str]


def _timed(step: Callable[[], None]) -> tuple[float, float]:
    start = time.perf_counter()
    step()
    return start, time.perf_counter()


def _check(ns: str, service: ServicePort, endpoint: str, what: str) -> None:
    answered, met = reached(ns, str(service.cluster_ip), endpoint)
    if not answered:
        raise RuntimeError(
            f"{what}: a connection to {service.cluster_ip}:80 was not answered by its endpoint {endpoint} but "
            f"{met}: timings would not count"
        )


def measure(
    mode: str, one: Rendered, every: Rendered, changed: Rendered, existing: ServicePort, moved: ServicePort
) -> Sample:
    """One run on a node built for it: the full sync with the client connecting to the `existing` Service, then the
    change of the `moved` one's endpoint, each checked on the node."""
    setup = Setup((NODE_IP,), POD_CIDR, CLIENT, str(existing.cluster_ip), 80, "TCP", ())
    with build(setup) as env, kernel_log() as log:
        node = env.namespaces["node"]
        echo = EchoServers()
        try:
            echo.listen(Listener("sink", "sink", env.namespaces["sink"], 80, "TCP", transparent=True))
            echo.start()
            first_sync(mode, node, one)
            with Client(env.source_ns, existing) as client:
                client.answered_before(ANSWERED_BEFORE, TIMEOUT * 10)
                start, end = _timed(lambda: full_sync(mode, node, one, every))
                time.sleep(0.1)
            _check(env.source_ns, moved, moved.endpoints[0].ip, f"{mode} after the full sync")
            change = _timed(lambda: resync(mode, node, every, changed))
            _check(env.source_ns, moved, CHANGED_ENDPOINT, f"{mode} after the change")
        finally:
            echo.close()
    return Sample(end - start, change[1] - change[0], traffic(client.answers, start, end), warnings_in(log))


def growth(seconds: float, previous: float, size: int, previous_size: int) -> str:
    """A time against the previous size's, and the exponent k of time ∝ Services^k between the two (1: linear)."""
    if previous <= 0 or seconds <= 0:
        return ""
    return f"{seconds / previous:.1f}× (k={math.log(seconds / previous) / math.log(size / previous_size):.2f})"


def said_warnings(found: Counter[str]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in found.items()) or "none"


def _row(mode: str, size: int, render_s: float, samples: list[Sample], previous: tuple[int, float] | None) -> list[str]:
    full = statistics.median(s.full for s in samples)
    worst = max(samples, key=lambda s: s.traffic.gap_ms).traffic
    found: Counter[str] = sum((s.warnings for s in samples), Counter())
    return [
        mode,
        str(size),
        f"{render_s:.1f}",
        f"{full:.2f}",
        growth(full, previous[1], size, previous[0]) if previous else "",
        f"{statistics.median(s.change for s in samples):.2f}",
        f"{worst.before_ms:.1f}",
        f"{worst.slowest_ms:.0f}",
        f"{worst.gap_ms:.0f}",
        f"{worst.lost}/{worst.during}",
        said_warnings(found),
    ]


def unavailable(mode: str) -> str | None:
    """Why this kernel cannot run the mode (None when it can)."""
    if mode == "ipvs" and not (kernel_has("ip_vs") and kernel_has("dummy")):
        return "this kernel has no ip_vs or dummy module: run it under lab vm"
    return None


def _rendered(
    renders: dict[tuple[str, int], tuple[Rendered, Rendered, float]], mode: str, svcs: list[ServicePort], version: str
) -> tuple[Rendered, Rendered, float]:
    """The full sync's and the change's rules and the seconds each took to render, kept for the other iptables
    backend's mode (the same rules, loaded with the other tools)."""
    started = time.perf_counter()
    rendered = (render(mode, svcs, version), render(mode, one_endpoint_changed(svcs), version))
    seconds = (time.perf_counter() - started) / 2
    for same in ("iptables-nft", "iptables-legacy") if mode.startswith("iptables") else (mode,):
        renders[same, len(svcs)] = (*rendered, seconds)
    return renders[mode, len(svcs)]


def run_sync_bench(sizes: list[int], modes: list[str], version: str, repeat: int, console: Console) -> int:
    load_before = f"{os.getloadavg()[0]:.2f}"
    table = Table(title=f"lab bench --sync: kube-proxy {version}'s sync of N ClusterIP Services, one endpoint each")
    for column in ("mode", "Services", "render s", "full sync s", "× previous size (k)", "one-endpoint change s",
                   "connect ms before", "slowest ms during", "largest gap ms", "lost/during",
                   "kernel warnings"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("mode", "kernel warnings") else "right")
    renders: dict[tuple[str, int], tuple[Rendered, Rendered, float]] = {}
    for mode in modes:
        if reason := unavailable(mode):
            table.add_row(mode, "", "", "skipped", *[""] * 6, reason)
            continue
        previous = None
        one = render(mode, services(1), version)
        for size in sizes:
            svcs = services(size)
            every, changed, render_s = renders.get((mode, size)) or _rendered(renders, mode, svcs, version)
            samples = [measure(mode, one, every, changed, svcs[0], svcs[len(svcs) // 2]) for _ in range(repeat)]
            row = _row(mode, size, render_s, samples, previous)
            table.add_row(*row)
            previous = (size, statistics.median(s.full for s in samples))
            # Each row as it is measured: a run stopped later (lab vm's timeout) keeps what it measured.
            console.print(f"[dim]{time.strftime('%H:%M:%S')} {' | '.join(row)}[/dim]", soft_wrap=True)
    table.caption = (
        f"median of {repeat}; traffic and warnings: the run with the largest gap, warnings summed over the runs. "
        "full sync: kube-proxy restarted over one Service's rules (ipvs: its sync from one to N); one-endpoint change: "
        "the lab's resync, whole (no partial sync rendered). k: time ∝ Services^k against the previous size. "
        f"render s: the lab's own, per set of rules, not timed in the syncs. {os.cpu_count()} cores, kernel "
        f"{platform.release()}; load average {load_before} at the start, {os.getloadavg()[0]:.2f} at the end"
    )
    console.print(table)
    return 0
