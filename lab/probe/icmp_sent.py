"""The ICMP each node sent, as its counters count it and the captures saw it go: kept probe by probe (and between
probes) so that a later REJECT left unanswered can be put down to what spent the host's ICMP budget."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from lab.describe.topology import NodeSpec
from lab.probe.capture import Frame
from lab.probe.evidence.snmp import Counters
from lab.probe.why import SentIcmp
from lab.realize.enter import in_netns

# The counters of the ICMP a host's budget is spent by, with the ICMP type each counts.
SPENDING = (("IcmpOutRedirects", 5), ("IcmpOutDestUnreachs", 3))


def icmp_sent(
    when: str,
    nodes: Sequence[NodeSpec],
    frames: list[Frame],
    deltas: dict[str, Counters],
    at: float | None,
    underlay: str,
) -> list[SentIcmp]:
    """The redirects and errors each node's counters say it sent, and to whom the captures saw them go."""
    sent = []
    for node in nodes:
        for counter, icmp_type in SPENDING:
            if count := deltas[node.name].get(counter, 0):
                to = tuple(
                    f.addresses[1]
                    for f in frames
                    if f.actor == node.name and f.outgoing and f.addresses and icmp_type_of(f) == icmp_type
                )
                seen = bool(to) or counter != "IcmpOutRedirects"
                to = to if seen else forwarded_back(node, frames, underlay)
                sent.append(SentIcmp(when, node.name, counter, count, to, at, seen))
    return sent


def forwarded_back(node: NodeSpec, frames: list[Frame], underlay: str) -> tuple[str, ...]:
    """Whom a redirect no capture saw leave was made for: the kernel makes one for the sender of a packet it
    forwards back out of the interface it came in by, when that sender is on the interface's own subnet
    (net/ipv4/route.c __mkroute_input, torvalds/linux v6.1: fib_validate_source says so), here the underlay on
    eth0."""
    network = ipaddress.IPv4Network(underlay)
    mine = [f for f in frames if f.actor == node.name and f.ifname == "eth0" and f.addresses]
    if not any(f.outgoing for f in mine):
        return ()
    senders = {f.addresses[0] for f in mine if not f.outgoing and f.addresses}
    # An IPv6 sender (neighbour discovery from a link-local address, in a cluster with IPv6) is in no IPv4 network.
    return tuple(sorted(s for s in senders if s != node.ip and ipaddress.ip_address(s) in network))


def icmp_type_of(frame: Frame) -> int | None:
    packet = frame.packet  # ICMP of IPv4 only: the budget counted is net.ipv4's
    if packet is None or packet.protocol != 1:
        return None
    return frame.data[packet.offset] if len(frame.data) > packet.offset else None


def icmp_ratelimit(netns: str) -> int:
    """The namespace's net.ipv4.icmp_ratelimit, in ms: what one ICMP error costs of a host's budget."""

    def read() -> str:
        with open("/proc/sys/net/ipv4/icmp_ratelimit") as f:  # the calling thread's namespace's
            return f.read()

    return int(in_netns(netns, read))
