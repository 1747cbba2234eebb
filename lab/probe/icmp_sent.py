"""The ICMP and ICMPv6 each node sent, as its counters count it and the captures saw it go: kept probe by probe
(and between probes) so that a later REJECT left unanswered can be put down to what spent the host's ICMP
budget; and what one error costs of that budget, per family."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from lab.describe.topology import NodeSpec
from lab.probe.capture import IPPROTO_ICMPV6, Frame
from lab.probe.evidence.snmp import Counters
from lab.probe.why import Budget, SentIcmp
from lab.realize.enter import in_netns
from lab.realize.families import address

# The counters of the ICMP a host's budget is spent by, with the IP protocol and ICMP type each counts: IPv4's
# redirects and destination unreachables, and ICMPv6's (RFC 4443 type 1; NDP's redirect, RFC 4861 type 137).
SPENDING = (
    ("IcmpOutRedirects", 1, 5),
    ("IcmpOutDestUnreachs", 1, 3),
    ("Icmp6OutRedirects", IPPROTO_ICMPV6, 137),
    ("Icmp6OutDestUnreachs", IPPROTO_ICMPV6, 1),
)
_REDIRECTS = {"IcmpOutRedirects", "Icmp6OutRedirects"}
IPV6_RATELIMIT = (
    "net.ipv6.icmp.ratelimit; a kernel without torvalds/linux 0201eedb69b2 (2026) divides it by up to 16 for a host"
    " reached through a wider route prefix: by 4 through a /64"
)


def icmp_sent(
    when: str,
    nodes: Sequence[NodeSpec],
    frames: list[Frame],
    deltas: dict[str, Counters],
    at: float | None,
    underlays: Sequence[str],
) -> list[SentIcmp]:
    """The redirects and errors each node's counters say it sent, and to whom the captures saw them go."""
    sent = []
    for node in nodes:
        for counter, protocol, icmp_type in SPENDING:
            if count := deltas[node.name].get(counter, 0):
                to = tuple(
                    f.addresses[1]
                    for f in frames
                    if f.actor == node.name and f.outgoing and f.addresses and icmp_of(f) == (protocol, icmp_type)
                )
                seen = bool(to) or counter not in _REDIRECTS
                to = to if seen else forwarded_back(node, frames, underlays, 4 if protocol == 1 else 6)
                sent.append(SentIcmp(when, node.name, counter, count, to, at, seen))
    return sent


def forwarded_back(node: NodeSpec, frames: list[Frame], underlays: Sequence[str], version: int) -> tuple[str, ...]:
    """Whom a redirect no capture saw leave was made for: the kernel makes one for the sender of a packet it
    forwards back out of the interface it came in by, when that sender is on the interface's own subnet
    (net/ipv4/route.c __mkroute_input, torvalds/linux v6.1: fib_validate_source says so; for IPv6, ip6_forward
    and ndisc_send_redirect in net/ipv6: when the sender is a neighbour there), here the underlay of that IP
    version on eth0."""
    networks = [n for n in map(ipaddress.ip_network, filter(None, underlays)) if n.version == version]
    mine = [f for f in frames if f.actor == node.name and f.ifname == "eth0" and f.addresses]
    if not networks or not any(f.outgoing for f in mine):
        return ()
    senders = {f.addresses[0] for f in mine if not f.outgoing and f.addresses}
    own = {node.ip, node.secondary_ip}
    return tuple(sorted(s for s in senders if s not in own and address(s) in networks[0]))


def icmp_of(frame: Frame) -> tuple[int, int] | None:
    """(IP protocol, type) of an ICMP or ICMPv6 frame; None for any other."""
    packet = frame.packet
    if packet is None or packet.protocol not in (1, IPPROTO_ICMPV6) or len(frame.data) <= packet.offset:
        return None
    return packet.protocol, frame.data[packet.offset]


def _sysctl(netns: str, path: str) -> int:
    def read() -> str:
        with open(path) as f:  # the calling thread's namespace's
            return f.read()

    return int(in_netns(netns, read))


def icmp_budget(netns: str, version: int) -> Budget:
    """What one ICMP error to a host of IP `version` costs of the namespace's budget for that host:
    net.ipv4.icmp_ratelimit ms, or net.ipv6.icmp.ratelimit ms. Before torvalds/linux 0201eedb69b2 ("ipv6: icmp:
    remove obsolete code in icmpv6_xrlim_allow()", 2026, in 6.18.y stable) ICMPv6's cost was shifted right by
    (128 - prefix length) / 32 of the route to the host, and its default was 1000 ms, not 100: which of the two a
    kernel does, the lab does not read, so the text says both."""
    if version == 4:
        return Budget(_sysctl(netns, "/proc/sys/net/ipv4/icmp_ratelimit"))
    return Budget(_sysctl(netns, "/proc/sys/net/ipv6/icmp/ratelimit"), IPV6_RATELIMIT, 6)
