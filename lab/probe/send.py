"""A probe sent, of whichever kind it is: a connection or datagram from a socket, one more exchange on a kept
flow, a flow opened and kept, a segment crafted on an established connection, or a packet from an address the
sender does not own. What was sent and what the client got back; what the frames and rules say of it is
lab.probe.observe's."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

from lab.describe.topology import ProbeSpec, Topology
from lab.install.conntrack import Entry
from lab.install.echo import EchoServers
from lab.probe.capture import Captures, Frame
from lab.probe.client import ClientResult, send
from lab.probe.craft import CRAFTS, Craft, crafted_segment, next_from, send_from, send_raw, spoofed_answer
from lab.probe.flows import KeptFlow, flow_entries, history_lines
from lab.realize.build import Realized
from lab.realize.families import endpoint

# A crafted segment's neighbours in time: the backend's answer reaching the captures before its sequence numbers
# are read, and the crafted segment's fate (its way to the client, the client's answer) before it is judged.
ANSWER_CAPTURED = 0.05
CRAFTED_SETTLED = 0.2
# A spoofed packet's answer is looked for this often until the probe's timeout.
SPOOFED_POLL = 0.02
# The source port of a spoofed packet without one: Linux's default ephemeral range (net.ipv4.ip_local_port_range).
EPHEMERAL_PORTS = (32768, 60999)


@dataclass(frozen=True)
class Crafted:
    """A segment crafted on the probe's connection (lab/probe/craft.py): its sequence number, the client's
    address, and the frames the captures saw from its sending until the request after it; or why none was sent."""

    craft: Craft
    seq: int = 0
    client: str = ""
    frames: tuple[Frame, ...] = ()
    unsent: str = ""


@dataclass(frozen=True)
class Sent:
    """What a probe sent and what its client got back."""

    result: ClientResult
    port: int = 0  # the client's source port when the probe fixes it or keeps the flow (0: the kernel's choice)
    kept: KeptFlow | None = None  # the flow the probe opened and keeps, for the probes after it
    history: tuple[str, ...] = ()  # a kept flow checked: what its exchanges met since the previous check
    retransmitting: bool = False  # a kept flow checked: its exchange before this one went unanswered too
    crafted: Crafted | None = None
    # A crafted segment's connection: its conntrack entries, read before it was closed.
    entries: tuple[tuple[str, Entry], ...] = ()


class Sender:
    """Sends probes from the built lab's namespaces; the captures and backends show a crafted segment's
    neighbours and a spoofed packet's answer, which no socket of the sender hears."""

    def __init__(self, realized: Realized, timeout: float, captures: Captures, echo: EchoServers) -> None:
        self.realized, self.timeout, self.captures, self.echo = realized, timeout, captures, echo

    def send(
        self,
        probe: ProbeSpec,
        running: Topology,
        flows: Mapping[str, KeptFlow],
        frames_mark: int,
        arrivals_mark: int,
    ) -> Sent:
        """The probe sent to the cluster running `running`; `flows` are the kept ones by the probe that keeps
        each, the marks where the captures and backends stood before it."""
        source = self.realized.ns_of(probe.source)
        if probe.craft:
            return self._crafted(probe, running, frames_mark)
        if probe.source_address:
            return Sent(self._spoofed(probe, source, frames_mark, arrivals_mark), probe.source_port)
        if probe.flow:
            kept = flows[probe.flow]
            result = kept.exchange()
            history = history_lines(kept.since_check(), kept.history[0].at)
            return Sent(result, kept.port, history=tuple(history), retransmitting=kept.retransmitting)
        port = probe.source_port
        if probe.keep_every:
            kept = KeptFlow(source, probe.dst_ip, probe.dst_port, probe.protocol, self.timeout, port, probe.keep_every)
            return Sent(kept.first, kept.port, kept=kept)
        return Sent(
            send(source, probe.dst_ip, probe.dst_port, probe.protocol, self.timeout, port=port, size=probe.size),
            port,
        )

    def _crafted(self, probe: ProbeSpec, running: Topology, frames_mark: int) -> Sent:
        """Open a connection that stays established, have the backend's side send the probe's crafted segment
        (lab/probe/craft.py), then send one more request on the connection: its result, the crafted segment and
        the frames after it, and the connection's conntrack entries then (before it is closed)."""
        craft = CRAFTS[probe.craft]
        held = KeptFlow(self.realized.ns_of(probe.source), probe.dst_ip, probe.dst_port, "TCP", self.timeout)
        try:
            first = held.first
            if first.outcome != "delivered" or not first.reply:
                unsent = "the connection was never established: nothing to craft on"
                return Sent(first, probe.source_port, crafted=Crafted(craft, unsent=unsent))
            (b_ip, b_port), (c_ip, c_port) = (_address(first.reply[k]) for k in ("local", "peer"))
            time.sleep(ANSWER_CAPTURED)
            following = next_from(self.captures.since(frames_mark), b_ip, b_port, c_ip, c_port)
            if following is None:
                unsent = "the backend's answer was not captured: its sequence numbers are unknown"
                return Sent(first, probe.source_port, crafted=Crafted(craft, unsent=unsent))
            mark = self.captures.mark()
            packet = crafted_segment(craft, b_ip, b_port, c_ip, c_port, *following)
            send_raw(self.realized.ns_of(first.reply["backend"]), packet, c_ip)
            time.sleep(CRAFTED_SETTLED)
            seq = (following[0] + craft.offset) % (1 << 32)
            crafted = Crafted(craft, seq, c_ip, tuple(self.captures.since(mark)))
            result = held.exchange()
            entries = flow_entries(self.realized, running.nodes, "TCP", held.port, probe.dst_ip)
            return Sent(result, probe.source_port, crafted=crafted, entries=tuple(entries))
        finally:
            held.close()

    def _spoofed(self, probe: ProbeSpec, netns: str, frames_mark: int, arrivals_mark: int) -> ClientResult:
        """A SYN or datagram from probe.source_address, which the sender does not own: no socket hears the
        answer, so what the captures and the backends saw (until the probe's timeout) says what happened."""
        sport = probe.source_port or random.randint(*EPHEMERAL_PORTS)
        send_from(netns, probe.source_address, probe.dst_ip, probe.dst_port, probe.protocol, sport)
        deadline = time.monotonic() + self.timeout
        while True:
            # Frames first: a backend records its arrival before it answers, so whatever the frames show of the
            # answer's fate, the arrival is already there.
            frames = self.captures.since(frames_mark)
            arrivals = self.echo.arrivals_since(arrivals_mark)
            seen = spoofed_answer(frames, arrivals, self.realized.pod_ports, probe.protocol, probe.source_address)
            if seen is not None or time.monotonic() > deadline:
                break
            time.sleep(SPOOFED_POLL)
        sent = endpoint(probe.source_address, sport)
        return seen or ClientResult("dropped", error=f"nothing answered {sent} before the timeout", local=sent)


def _address(text: str) -> tuple[str, int]:
    """("ip", port) of "ip:port" or "[ip]:port" (an IPv6 socket address, as the echo servers write it)."""
    ip, _, port = text.rpartition(":")
    return ip.strip("[]"), int(port)
