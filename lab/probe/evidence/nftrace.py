"""The kernel's own trace of a probe as evidence: `nft monitor trace` inside a node namespace.

A table of our own (`inet lab-trace`, hooked before conntrack: trace_table.py) sets nftrace on every packet; the
kernel then reports each rule a packet meets, in every nftables table (kube-proxy's nftables mode,
and iptables-nft's rules too, which xtrace.py reads the iptables way). Events travel asynchronously,
so after a probe the tracer sends a marker datagram through the same hooks and waits for its event:
everything before it has arrived.
"""

from __future__ import annotations

import platform
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from lab.install.tools import require
from lab.probe.evidence.base import EvidenceError, RuleHit
from lab.probe.evidence.trace_table import add_trace_table
from lab.realize.enter import in_netns

MARKER_PORT = 9  # discard: the marker is sent to the node's own loopback and dropped unanswered
MARKER_DATA = b"lab-trace-marker"
_LINE = re.compile(r"^trace id (\w+) (\w+) (\S+) (\S+) (.*)$")
TCP_SYN = re.compile(r" tcp flags == syn(?: |$)")  # a connection's first packet, not its SYN-ACK
_COMMENT = re.compile(r' comment "(?:[^"\\]|\\.)*"')
_VERDICT = re.compile(r" \(verdict [^)]*\)$")
_REJECT = re.compile(r"(?<![\w-])reject(?![\w-])")


@dataclass(frozen=True)
class TraceEvent:
    trace_id: str
    family: str
    table: str
    chain: str
    text: str  # "packet: ...", "rule ... (verdict ...)", "policy accept", "verdict ..."

    @property
    def verdict(self) -> str:
        match = re.search(r"\(verdict (\w+)", self.text) or re.search(r"^policy (\w+)", self.text)
        return match.group(1) if match else ""

    def __str__(self) -> str:
        return f"{self.table} {self.chain}: {self.text}"


def parse_trace(lines: list[str]) -> list[TraceEvent]:
    events = []
    for line in lines:
        if match := _LINE.match(line.strip()):
            events.append(TraceEvent(*match.groups()))
    return events


# The tracer's own packets: a marker (UDP from loopback to loopback's discard port) and the port unreachable it draws,
# known by the datagram it quotes (nft prints the quoted IP header's first 12 bytes as @th,64,96: length 44, UDP). A
# probe's own loopback traffic (a node's connection to 127.0.0.1:NODEPORT, and the errors answering it) is traced
# like any other.
_QUOTED = f"0x4500{20 + 8 + len(MARKER_DATA):04x}[0-9a-f]{{10}}11"
_MARKER = re.compile(
    rf"ip saddr 127\.0\.0\.1 ip daddr 127\.0\.0\.1 "
    rf"(.* udp dport {MARKER_PORT}(?!\d)|.* icmp code port-unreachable .*@th,64,96 {_QUOTED})"
)


def is_marker(text: str) -> bool:
    return _MARKER.search(text) is not None


def packet_events(events: list[TraceEvent], wanted: Callable[[str], bool]) -> list[TraceEvent]:
    """The rule events of the packets whose `packet:` line (the text after "packet:") is `wanted`.

    The kernel starts each base chain's trace with a `packet:` line; a packet's trace id can change
    from one hook to the next, and a later packet (the same connection's FIN, say) can get an id
    used before. So each stretch of events under an id belongs to the packet of its latest
    `packet:` line.
    """
    chosen: dict[str, bool] = {}
    found = []
    for event in events:
        if event.text.startswith("packet: "):
            chosen[event.trace_id] = wanted(event.text.removeprefix("packet:"))
        elif chosen.get(event.trace_id):
            found.append(event)
    return found


def event_verdict(event: TraceEvent) -> str:
    """DROP or REJECT (kube-proxy's reject-chain: `reject`, which the kernel reports as a drop), else
    the verdict the trace names (`jump services`, `accept`, ...)."""
    statement = _COMMENT.sub("", _VERDICT.sub("", event.text))
    if event.text.startswith("rule ") and _REJECT.search(statement):
        return "REJECT"
    return "DROP" if event.verdict == "drop" else event.verdict


def rule_hits(events: list[TraceEvent]) -> list[RuleHit]:
    """Rules that matched, and policies that dropped (not those that let the packet on), in the order
    the packet met them; `packets` counts the traced packets that met each."""
    hits: dict[tuple[str, str, str], RuleHit] = {}
    for event in events:
        if not (event.text.startswith("rule ") or event.verdict == "drop"):
            continue
        key = (event.table, event.chain, event.text.removeprefix("rule "))
        seen = hits.get(key)
        hits[key] = RuleHit(*key, packets=seen.packets + 1 if seen else 1, action=event_verdict(event))
    return list(hits.values())


class MonitorLines:
    """A monitor command run in one namespace, every line it prints kept in order by a reader thread."""

    def __init__(self, netns: str, monitor: tuple[str, ...]) -> None:
        self.netns, self.name = netns, monitor[0]
        self._lines: list[str] = []
        self._cond = threading.Condition()
        argv = [require("ip"), "netns", "exec", netns, require("stdbuf"), "-oL", require(monitor[0]), *monitor[1:]]
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._reader = threading.Thread(target=self._read, name=f"{monitor[0]}:{netns}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            with self._cond:
                self._lines.append(line)
                self._cond.notify_all()

    def alive(self) -> bool:
        return self._proc.poll() is None

    def count(self) -> int:
        """How many lines came so far: where the next one will be."""
        with self._cond:
            return len(self._lines)

    def lines(self, start: int = 0) -> list[str]:
        with self._cond:
            return self._lines[start:]

    def wait_for(self, needle: str, start: int, timeout: float) -> bool:
        """Whether a line holding `needle` came, from line `start` on, within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(needle in line for line in self._lines[start:]):
                start = len(self._lines)  # every line is looked at once
                left = deadline - time.monotonic()
                if left <= 0 or not self.alive():
                    return False
                self._cond.wait(timeout=min(left, 0.01))
            return True

    def close(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:  # stuck (a busy emulated machine): it must not outlive the run
            self._proc.kill()
            self._proc.wait()


def _marker_socket() -> socket.socket:
    """In the namespace's thread: a datagram socket on a loopback port the kernel chose (unconnected, so the port
    unreachable the marker draws is not raised at the next send). IPv4 in every cluster, IPv6-only too: 127.0.0.1 is
    on every namespace's lo whatever families its links carry, and one family keeps _MARKER to one form."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def marker_missing(netns: str, waited: float, stopped: str, sent: int, reader: str) -> str:
    """Why a barrier failed, as it happened: the reader stopped (`stopped` says how), or the marker's event did not
    come in the time given, which a busy machine can cause as well as a kernel whose tracing does not answer."""
    if stopped:
        return (
            f"{reader} in {netns} {stopped} after {waited:.1f} s, before it "
            "reported its marker packet, so the rules that acted cannot be read"
        )
    return (
        f"timed out after {waited:.1f} s waiting for {reader} in {netns} to report its marker packet "
        f"({sent} sent): the machine may be too busy to deliver the events in time, or this kernel's nftables "
        f"tracing does not answer ({platform.release()}); the rules that acted cannot be read"
    )


def send_markers(
    netns: str,
    count: Callable[[], int],
    arrived: Callable[[int, int, float], bool],
    stopped: Callable[[], str],
    reader: str,
    timeout: float,
) -> int:
    """A trace barrier: send a marker through the namespace's hooks and wait until its trace arrives (`arrived(port,
    first event to look at, seconds to wait)`), so that every event before it has. Its source port is one the
    kernel gives a socket of the namespace (a fixed one may be taken there), and is returned. The marker comes back
    in milliseconds; the time limit is generous, as a machine busy with other work (or `lab vm`'s emulation on a
    loaded machine, where it took over 2 s) can hold the events back for seconds."""
    sock = in_netns(netns, _marker_socket)
    try:
        port = sock.getsockname()[1]
        started = time.monotonic()
        start, sent = count(), 1
        sock.sendto(MARKER_DATA, ("127.0.0.1", MARKER_PORT))
        # Until the reader has subscribed, markers go unseen: resend every 50 ms.
        while not arrived(port, start, 0.05):
            waited = time.monotonic() - started
            if waited >= timeout or stopped():
                raise EvidenceError(marker_missing(netns, waited, stopped(), sent, reader))
            sock.sendto(MARKER_DATA, ("127.0.0.1", MARKER_PORT))
            sent += 1
        return port
    finally:
        sock.close()


class KernelTrace(MonitorLines):
    """`nft monitor trace` (ARGS) in one namespace, with a barrier so that a probe's events are all read: a marker
    datagram sent through the hooks, waited for until its trace arrives. The lab-trace table (trace_table.py) sets
    nftrace on every packet. nft reads the kernel's events with a 16 MiB socket buffer, so a burst of them (a
    routing loop's) does not overflow it."""

    def __init__(self, netns: str, *args: str, traffic_between: bool = False, nft: tuple[str, ...] = ("nft",)) -> None:
        add_trace_table(netns)
        super().__init__(netns, (*nft, *args, "monitor", "trace"))
        self.marker_port = 0
        self.traffic_between = traffic_between
        # The monitor is subscribed once its first marker comes back: starting it can take seconds on an emulated
        # (lab vm, TCG) and busy machine, later markers only the time a packet takes. Over 20 s was seen with two
        # guests and a load of 16 on 2 cores; the wait costs nothing when the monitor answers.
        try:
            self.barrier(timeout=60.0)
        except BaseException:
            self.close()  # no object is returned to close it later
            raise

    def barrier(self, timeout: float = 10.0) -> None:
        """Every event before now has arrived (send_markers); the marker's port in `marker_port`."""
        self.marker_port = send_markers(
            self.netns, self.count, self._marker_arrived, self._stopped, "nft monitor trace", timeout
        )

    def _marker_arrived(self, port: int, start: int, wait: float) -> bool:
        return self.wait_for(f"udp sport {port} udp dport {MARKER_PORT}", start, wait)

    def _stopped(self) -> str:
        status = self._proc.poll()
        return "" if status is None else f"exited with status {status}"

    def mark(self) -> int:
        """Where a probe's events start. When packets flow between probes (kept flows), the events of those sent
        before it may still be on their way: a barrier first lets them all arrive, so they fall before the mark."""
        if self.traffic_between:
            self.barrier()
        return self.count()

    def since(self, mark: int) -> list[TraceEvent]:
        """The events since `mark`, markers and the lab-trace table's own left out."""
        self.barrier()
        events = parse_trace(self.lines(mark))
        markers = {e.trace_id for e in events if is_marker(e.text)}
        return [e for e in events if e.trace_id not in markers and e.table != "lab-trace"]

    def restart(self) -> None:
        """Replaced rules are traced as they are: nothing read before carries over."""


class TraceEvidence(KernelTrace):
    """The rules met by the packets a probe wants (nftables keeps no counters on kube-proxy's rules)."""

    def hits(self, mark: object, wanted: Callable[[str], bool]) -> list[RuleHit]:
        return rule_hits(packet_events(self.since(mark), wanted))  # type: ignore[arg-type]
