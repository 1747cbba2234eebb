"""Flows that last: a probe's connection kept open after it, exchanging on its own every few milliseconds.

TCP keeps the established connection and sends one request every `every` ms on it (the echo servers hold
connections when a scenario keeps one); UDP keeps one socket, so one source port and one 5-tuple to conntrack,
and sends a datagram every `every` ms, as a statsd or DNS client does. Steps run while flows go on, so
kube-proxy's sync and conntrack cleanup meet live traffic as they do on a real node. While any probe runs, every
kept flow waits (after its exchange in flight), so that the frames and rule counters that probe reads are its
own; a probe that checks a flow makes one more exchange on it itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from lab.describe.topology import NodeSpec
from lab.install.conntrack import Entry, family_args, parse_entries
from lab.install.tools import run_command
from lab.probe.client import ClientResult, exchange, open_socket
from lab.realize.build import Realized
from lab.realize.families import address

_ENDS = ("reset", "closed", "refused")  # a TCP connection that met one of these is over


@dataclass(frozen=True)
class Exchange:
    """One request (TCP) or datagram (UDP) on a kept flow and what became of it; or a note (`note` set) of what
    happened to the cluster at that point."""

    at: float  # time.monotonic()
    outcome: str = ""
    backend: str | None = None
    note: str = ""


class KeptFlow:
    """A flow opened by one probe and kept: its first exchange, then one every `every_ms` on a thread of its
    own once `resume()` is called; `paused()` holds it; `exchange()` makes one while it is paused."""

    def __init__(
        self, netns: str, dst_ip: str, dst_port: int, protocol: str, timeout: float, port: int = 0, every_ms: int = 0
    ) -> None:
        self.protocol = protocol
        self.sock, self.first = open_socket(netns, dst_ip, dst_port, protocol, timeout, port)
        self.every = every_ms / 1000
        self.history: list[Exchange] = [self._record(self.first)]
        self._checked = 1  # history before this index was reported by an earlier check
        self._holds = 1  # the opening probe holds it until it has read its evidence
        self._busy = False
        self._closed = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The client's source port: the flow's, to conntrack."""
        return int(self.sock.getsockname()[1])

    @property
    def ended(self) -> ClientResult | None:
        """For TCP: what ended the connection (a reset, a close, a refusal), if it ended."""
        last = next((e for e in reversed(self.history) if e.outcome), None)
        if self.protocol == "TCP" and last is not None and last.outcome in _ENDS:
            return ClientResult(last.outcome, error=f"the kept connection had ended earlier ({last.outcome})")
        return None

    @property
    def retransmitting(self) -> bool:
        """Whether the exchange before the latest went unanswered too."""
        outcomes = [e.outcome for e in self.history if e.outcome]
        return len(outcomes) >= 2 and outcomes[-2] == "dropped"

    def exchange(self) -> ClientResult:
        """One more exchange now, recorded in the history (call it while the flow is paused)."""
        if ended := self.ended:
            return ended
        result = exchange(self.sock, self.protocol)
        self.history.append(self._record(result))
        return result

    def note(self, text: str) -> None:
        with self._cond:
            self.history.append(Exchange(time.monotonic(), note=text))

    def since_check(self) -> list[Exchange]:
        """The history since the previous check (or the opening probe), which this call reports."""
        with self._cond:
            new, self._checked = self.history[self._checked :], len(self.history)
        return new

    def resume(self) -> None:
        with self._cond:
            self._holds -= 1
            self._cond.notify_all()
        if self._thread is None and self.every:
            self._thread = threading.Thread(target=self._run, name="kept-flow", daemon=True)
            self._thread.start()

    @contextmanager
    def paused(self) -> Iterator[None]:
        with self._cond:
            self._holds += 1
            while self._busy:
                self._cond.wait()
        try:
            yield
        finally:
            self.resume()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.sock.close()

    def _run(self) -> None:
        while True:
            with self._cond:
                while (self._holds or self.ended) and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                self._busy = True
            try:
                result = exchange(self.sock, self.protocol)
            except OSError as exc:  # an error no outcome names: the flow stops, saying so
                result = ClientResult("closed", error=f"the kept flow stopped: {exc}")
            except Exception as exc:  # noqa: BLE001  # anything else too: a thread that died busy hung paused()
                result = ClientResult("closed", error=f"the kept flow stopped: {type(exc).__name__}: {exc}")
            with self._cond:
                self.history.append(self._record(result))
                self._busy = False
                self._cond.notify_all()
                self._cond.wait_for(lambda: self._closed, timeout=self.every)

    @staticmethod
    def _record(result: ClientResult) -> Exchange:
        return Exchange(time.monotonic(), result.outcome, (result.reply or {}).get("backend"))


def flow_entries(
    realized: Realized, nodes: Sequence[NodeSpec], protocol: str, port: int, dst_ip: str
) -> list[tuple[str, Entry]]:
    """The conntrack entries of a flow (its client's source port, to `dst_ip`) on every node, from the table of
    the destination's family (`conntrack -f ipv6` for an IPv6 one): a dual-stack node keeps both, and a flow of
    the other family from the same port is another flow."""
    family = family_args("ipv4" if address(dst_ip).version == 4 else "ipv6")
    found = []
    for node in nodes:
        listing = run_command(
            realized.ns_of(node.name),
            ("conntrack", "-L", *family, "-p", protocol.lower(), "--orig-port-src", str(port)),
        )
        found += [(node.name, entry) for entry in parse_entries(listing)]
    return found


def history_lines(events: list[Exchange], start: float) -> list[str]:
    """A flow's history as runs of the same outcome and backend between notes, with the time of each run's
    first exchange since `start`: `+0.0 s 6× delivered by statsd-0`, `+1.2 s (before probe x: ...)`."""
    lines: list[str] = []
    run: list[Exchange] = []

    def flush() -> None:
        if run:
            what = run[0].outcome + (f" by {run[0].backend}" if run[0].backend else "")
            lines.append(f"+{run[0].at - start:.1f} s {len(run)}× {what}")
            run.clear()

    for event in events:
        if event.note:
            flush()
            lines.append(f"+{event.at - start:.1f} s ({event.note})")
        elif run and (event.outcome, event.backend) != (run[0].outcome, run[0].backend):
            flush()
            run.append(event)
        else:
            run.append(event)
    flush()
    return lines
