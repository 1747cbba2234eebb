"""Path MTU, from the captures: where a probe's packet too big for a link died, and whether the ICMP
"fragmentation needed" (IPv4) or ICMPv6 "Packet Too Big" (IPv6) about it came back to the client, translated.

A router that cannot forward a packet with DF set through a link of smaller MTU drops it and answers with ICMP
type 3 code 4 carrying that MTU and the packet's first bytes (RFC 1191). When the packet was NATed on its way
(a Service's DNAT), the error is about the translated packet: conntrack finds the connection from the quoted
header, takes the error as RELATED and translates both the outer destination and the quoted header back, so
the client's kernel matches it to its socket and lowers its path MTU (TCP retransmits in smaller segments; a
UDP socket reports EMSGSIZE). A frame bigger than a bridge port's or a veth's MTU is dropped without any ICMP:
that is the blackhole.

IPv6 has no DF bit because no router fragments (RFC 8200 section 5): a router that cannot forward a packet
through a link of smaller MTU drops it and answers with ICMPv6 type 2, Packet Too Big, carrying the link's MTU and
as much of the packet as fits in 1280 bytes (RFC 4443 section 3.2); only the sender fragments, for the path MTU
it learned. Conntrack takes it as RELATED and NAT translates it back as it does IPv4's (nf_conntrack_proto_icmpv6.c,
nf_nat_icmpv6_reply_translation), and Linux never rate-limits it (net.ipv6.icmp.ratemask, 0-1,3-127 by default,
leaves type 2 out: net/ipv6/icmp.c icmpv6_mask_allow).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from lab.probe.capture import Frame
from lab.realize.families import address, endpoint

ICMP_UNREACHABLE, FRAG_NEEDED = 3, 4
ICMPV6_PACKET_TOO_BIG = 2
# How each family names its error (the IP protocol's number: ICMP 1, ICMPv6 58).
_NAMED = {1: "ICMP fragmentation needed", 58: "ICMPv6 Packet Too Big"}
# How the quoted header comes back as the client sent it: conntrack's NAT translates the error back (iptables,
# nftables); IPVS checks the route's MTU before it translates the packet (torvalds/linux
# net/netfilter/ipvs/ip_vs_xmit.c, ensure_mtu_is_adequate, called from ip_vs_nat_xmit before its mangling), so
# its ICMP quotes the packet untranslated.
_UNDONE_BY_CONNTRACK = "the packet had been DNATed to {}: conntrack took the error as RELATED and translated it back"
_UNDONE_BY_IPVS = (
    "IPVS, which sends the connection to {}, checks the MTU before translating the packet: its error quotes it as"
    " the client sent it"
)
# A TCP sender's segments the kernel carries as one (segmentation offload: a veth passes them on whole, and a
# router forwards them whole when each segment fits the next link: net/ipv6/ip6_output.c ip6_pkt_too_big, IPv4's
# ip_exceeds_mtu) are one frame to a capture.
_BUNDLED = (
    "more than the MTU {}: a capture sees the segments a kernel's segmentation offload carries together as one frame"
)
# An IPv4 and a TCP header with options and no data (an ACK, not a resent request); IPv6's header is 20 bytes more.
_BARE_HEADERS = {4: 60, 6: 80}


@dataclass(frozen=True)
class TooBig:
    """An ICMP fragmentation-needed error or an ICMPv6 Packet Too Big as a capture saw it: its sender and
    addressee, the MTU it names, the quoted packet's `src:port > dst:port` ("[src]:port" for IPv6), and how the
    family names it."""

    sender: str
    to: str
    mtu: int
    quoted: str
    named: str = _NAMED[1]

    @classmethod
    def of(cls, frame: Frame) -> TooBig | None:
        data, packet = frame.data, frame.packet
        if packet is None or packet.protocol not in _NAMED:
            return None
        icmp = packet.offset
        inner = icmp + 8
        if packet.protocol == 1:
            if len(data) < inner + 24 or (data[icmp], data[icmp + 1]) != (ICMP_UNREACHABLE, FRAG_NEEDED):
                return None
            mtu = struct.unpack_from("!H", data, icmp + 6)[0]
            src, dst = (socket.inet_ntoa(data[inner + at : inner + at + 4]) for at in (12, 16))
            l4, proto = inner + (data[inner] & 0x0F) * 4, data[inner + 9]
        else:
            # The quoted packet's fixed header: next header at 6, addresses at 8 and 24 (extension headers, which
            # the lab's probes never carry, are not walked).
            if len(data) < inner + 40 or data[icmp] != ICMPV6_PACKET_TOO_BIG:
                return None
            mtu = struct.unpack_from("!I", data, icmp + 4)[0]
            src, dst = (socket.inet_ntop(socket.AF_INET6, data[inner + at : inner + at + 16]) for at in (8, 24))
            l4, proto = inner + 40, data[inner + 6]
        ports = struct.unpack_from("!HH", data, l4) if len(data) >= l4 + 4 and proto in (6, 17) else None
        quoted = f"{endpoint(src, ports[0])} > {endpoint(dst, ports[1])}" if ports else f"{src} > {dst}"
        return cls(packet.src, packet.dst, mtu, quoted, _NAMED[packet.protocol])


def ip_length(frame: Frame) -> int:
    """The IP packet's total length (0 for a frame that is not IP)."""
    return frame.packet.length if frame.packet is not None else 0


def path_mtu(frames: list[Frame], local: str, target: str, names: dict[str, str], proxy_mode: str) -> str:
    """What the captures say of the client's packets (from `local`, "ip:port" or "[ip]:port", to `target`) and
    a link's MTU: the ICMP fragmentation needed (IPv4) or ICMPv6 Packet Too Big (IPv6) about them (which actor
    sent it first, the MTU it names, what reached the client and the packet it quotes), where the biggest packet
    before it was last seen, and what became of the smaller packets the client sent after it; or, with no such
    error, where its biggest packets were last seen. Who made the quoted header the client's again depends on
    `proxy_mode`: conntrack's NAT for iptables and nftables, IPVS itself for ipvs."""
    client = local.rsplit(":", 1)[0].strip("[]")  # an IPv6 client's address is written in brackets
    version = address(client).version
    sent = [f for f in frames if f.packet is not None and f.packet.src == client and f.packet.protocol not in _NAMED]
    errors = [(f, e) for f in frames if (e := TooBig.of(f)) is not None]
    if not errors:
        if not sent:
            return "no packet of the client's was captured"
        size = max(ip_length(f) for f in sent)
        last = [f for f in sent if ip_length(f) == size][-1]
        named = _NAMED[1 if version == 4 else 58]
        return f"the client's {size}-byte packets were last seen {last.where}; no {named} came back"
    first, made = errors[0]
    before = [f for f in sent if f.at <= first.at]
    said = ""
    if before:
        size = max(ip_length(f) for f in before)
        biggest = [f for f in before if ip_length(f) == size][-1]
        said = f"the client's {size}-byte packet was last seen {biggest.where}; "
    sender = made.sender + (f" ({names[made.sender]})" if made.sender in names else "")
    said += f"{first.actor} answered with {made.named} (MTU {made.mtu}), from {sender}"
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
    # What became of the data the client sent once it knew the path's MTU: its packets that fit it, else (the
    # captures saw only bundles) the bigger ones.
    data = [f for f in sent if f.at > at.at and ip_length(f) > _BARE_HEADERS[version]]
    after = [f for f in data if ip_length(f) <= made.mtu] or data
    if after:
        size = max(ip_length(f) for f in after)
        last = [f for f in after if ip_length(f) == size][-1]
        said += f"; then its {size}-byte packets were last seen {last.where}"
        if size > made.mtu:
            said += f" ({_BUNDLED.format(made.mtu)})"
    return said
