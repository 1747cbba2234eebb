"""What a probe observed: its outcome, who answered and what they saw, its path and the rules and counters it
moved, and why it went as it did. The session (lab.probe.session) makes one per probe; judge and report read it."""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.probe.diagnosis import Diagnosis
from lab.probe.evidence.base import RuleHit


@dataclass(frozen=True)
class Observation:
    outcome: str
    backend: str | None = None
    node: str | None = None
    source_ip: str | None = None
    source: str | None = None  # the name of source_ip, if the topology has one
    error: str = ""
    path: tuple[str, ...] = ()
    rules: tuple[tuple[str, RuleHit], ...] = ()  # (node, rule) whose counters moved
    explanation: str = ""
    seconds: float = 0.0
    pcaps: tuple[str, ...] = field(default=())
    entry: str | None = None  # the node the connection entered the cluster through (first node it was seen on)
    entered_at: float | None = None  # when that node's capture first saw it (seconds, the captures' clock)
    # Several connections: the sources they saw named from each one's entry node ("entry", "entry/tunl0"),
    # which stays the same across runs where the entries a router picks do not.
    source_by_entry: str | None = None
    # A flow from a fixed source port, or kept: its conntrack entries after the attempt, "node: entry" as
    # conntrack -L prints them.
    conntrack: tuple[str, ...] = ()
    # A kept flow checked: what its exchanges met since the previous check, step by step (lab/probe/flows.py).
    flow: tuple[str, ...] = ()
    hops: tuple[Hop, ...] = ()  # `path` as data: where each frame was seen, with its addresses there
    # The translation chain: each decision that changed or chose the packets, in path order (lab/probe/diagnosis.py).
    diagnosis: Diagnosis = Diagnosis()
    # Several connections (judge/attempts.py): each one's hops, in the order they were sent (`hops` is one of them).
    connections: tuple[tuple[Hop, ...], ...] = ()
    # The kernel's SNMP counters that moved during the probe, on each node and the client (lab/probe/evidence/snmp.py).
    counters: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
    # Actors whose rules could not be read for this probe, with why ("node1: timed out …"): `rules` lacks theirs.
    unread: tuple[str, ...] = ()
    # Every ARP answer the client got for the address it sent to, in the order they came (lab/probe/arp.py).
    arp: tuple[ArpAnswer, ...] = ()
    # Endpoints the load balancing that picked this connection's endpoint chose among (lab/probe/choices.py; 1: no
    # choice seen), read for a probe that sends until it has reached each of them.
    spread: int = 1
    # Such a probe's summary: one connection per endpoint it reached, in a fixed order (lab/judge/attempts.py).
    members: tuple[Observation, ...] = ()


@dataclass(frozen=True)
class Hop:
    """A frame of the probe where a capture saw it: the actor, its interface, the direction, and the packet's
    addresses there (after every NAT before that point), as `src:port > dst:port proto [flags]`."""

    actor: str
    ifname: str
    outgoing: bool
    packet: str


@dataclass(frozen=True)
class ArpAnswer:
    """An ARP reply the client received for the address it sent to: the MAC it gave, and the node a capture saw
    send it (the reply leaving that node's interface), None when no capture saw it leave."""

    address: str
    mac: str
    node: str | None
