"""Path MTU, from the captures: where a probe's packet too big for a link died, and whether the ICMP
"fragmentation needed" about it came back to the client, translated.

A router that cannot forward a packet with DF set through a link of smaller MTU drops it and answers with ICMP
type 3 code 4 carrying that MTU and the packet's first bytes (RFC 1191). When the packet was NATed on its way
(a Service's DNAT), the error is about the translated packet: conntrack finds the connection from the quoted
header, takes the error as RELATED and translates both the outer destination and the quoted header back, so
the client's kernel matches it to its socket and lowers its path MTU (TCP retransmits in smaller segments; a
UDP socket reports EMSGSIZE). A frame bigger than a bridge port's or a veth's MTU is dropped without any ICMP:
that is the blackhole.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from lab.probe.capture import Frame

ICMP_UNREACHABLE, FRAG_NEEDED = 3, 4
# How the quoted header comes back as the client sent it: conntrack's NAT translates the error back (iptables,
# nftables); IPVS checks the route's MTU before it translates the packet (torvalds/linux
# net/netfilter/ipvs/ip_vs_xmit.c, ensure_mtu_is_adequate, called from ip_vs_nat_xmit before its mangling), so
# its ICMP quotes the packet untranslated.
_UNDONE_BY_CONNTRACK = "the packet had been DNATed to {}: conntrack took the error as RELATED and translated it back"
_UNDONE_BY_IPVS = (
    "IPVS, which sends the connection to {}, checks the MTU before translating the packet: its error quotes it as"
    " the client sent it"
)
_BARE_HEADERS = 60  # an IPv4 and a TCP header with options and no data: an ACK, not a resent request


@dataclass(frozen=True)
class FragNeeded:
    """An ICMP fragmentation-needed error as a capture saw it: its sender and addressee, the MTU it names and
    the quoted packet's `src:port > dst:port`."""

    sender: str
    to: str
    mtu: int
    quoted: str

    @classmethod
    def of(cls, frame: Frame) -> FragNeeded | None:
        data, packet = frame.data, frame.packet
        if packet is None or packet.protocol != 1:  # IPv4's; IPv6's Packet Too Big is ICMPv6's type 2
            return None
        icmp = packet.offset
        inner = icmp + 8
        if len(data) < inner + 24 or (data[icmp], data[icmp + 1]) != (ICMP_UNREACHABLE, FRAG_NEEDED):
            return None
        mtu = struct.unpack_from("!H", data, icmp + 6)[0]
        src, dst = (socket.inet_ntoa(data[inner + at : inner + at + 4]) for at in (12, 16))
        l4 = inner + (data[inner] & 0x0F) * 4
        ports = struct.unpack_from("!HH", data, l4) if len(data) >= l4 + 4 and data[inner + 9] in (6, 17) else None
        quoted = f"{src}:{ports[0]} > {dst}:{ports[1]}" if ports else f"{src} > {dst}"
        return cls(packet.src, packet.dst, mtu, quoted)


def ip_length(frame: Frame) -> int:
    """The IP packet's total length (0 for a frame that is not IP)."""
    return frame.packet.length if frame.packet is not None else 0


def path_mtu(frames: list[Frame], local: str, target: str, names: dict[str, str], proxy_mode: str) -> str:
    """What the captures say of the client's packets (from `local`, "ip:port", to `target`) and a link's MTU:
    the ICMP fragmentation needed about them (which actor sent it first, the MTU it names, what reached the
    client and the packet it quotes), where the biggest packet before it was last seen, and what became of the
    smaller packets the client sent after it; or, with no ICMP, where its biggest packets were last seen. Who
    made the quoted header the client's again depends on `proxy_mode`: conntrack's NAT for iptables and
    nftables, IPVS itself for ipvs."""
    client = local.rsplit(":", 1)[0].strip("[]")  # an IPv6 client's address is written in brackets
    sent = [f for f in frames if f.packet is not None and f.packet.src == client and f.packet.protocol != 1]
    errors = [(f, e) for f in frames if (e := FragNeeded.of(f)) is not None]
    if not errors:
        if not sent:
            return "no packet of the client's was captured"
        size = max(ip_length(f) for f in sent)
        last = [f for f in sent if ip_length(f) == size][-1]
        return f"the client's {size}-byte packets were last seen {last.where}; no ICMP fragmentation needed came back"
    first, made = errors[0]
    before = [f for f in sent if f.at <= first.at]
    said = ""
    if before:
        size = max(ip_length(f) for f in before)
        biggest = [f for f in before if ip_length(f) == size][-1]
        said = f"the client's {size}-byte packet was last seen {biggest.where}; "
    sender = made.sender + (f" ({names[made.sender]})" if made.sender in names else "")
    said += f"{first.actor} answered with ICMP fragmentation needed (MTU {made.mtu}), from {sender}"
    # The captures watch the nodes: an error last seen leaving one of them for the client went out to it.
    at, got = errors[-1]
    if got.to != client or not at.outgoing:
        return f"{said}; it was last seen {at.where}: it did not go out to the client"
    natted = next(
        (f.sockets[1] for f in frames if f.sockets and f.sockets[0] == local and f.sockets[1] != target), None
    )
    said += f"; it went out to the client ({at.where}) quoting {got.quoted}"
    if not got.quoted.endswith(f"> {target}"):
        said += f", not {target} which the client called: its kernel matches it to no socket"
    else:
        said += ", the address the client called"
        if natted:
            said += f" ({(_UNDONE_BY_IPVS if proxy_mode == 'ipvs' else _UNDONE_BY_CONNTRACK).format(natted)})"
    # What became of the smaller packets the client sent once it knew the path's MTU.
    after = [f for f in sent if f.at > at.at and _BARE_HEADERS < ip_length(f) <= made.mtu]
    if after:
        smaller = max(ip_length(f) for f in after)
        last = [f for f in after if ip_length(f) == smaller][-1]
        said += f"; then its {smaller}-byte packets were last seen {last.where}"
    return said
