"""Crafted packets: what a socket cannot send, built with scapy and sent from inside an actor's namespace.

`craft: outOfWindow` reproduces kubernetes#74839: on a TCP connection to a Service that is established and
stays open, the backend's side sends a segment 1 GiB ahead of the client's receive window. Where the node's
conntrack takes it for INVALID, it is not reverse-NATed: without kube-proxy's INVALID drop it reaches the
client from the pod's own address, the client's kernel knows no such connection and answers with a RST, and
that RST resets the backend's end, so the next request on the connection fails ("connection reset by peer").
kube-proxy's drop rule, or nf_conntrack_tcp_be_liberal=1 (conntrack then keeps such segments valid), keeps the
connection alive.

`craft: lateRetransmission` is the case #74839 meets in practice: a segment of data the client acknowledged
long ago (a gigabyte behind what it expects next, so behind any window it advertised), as a retransmission that
the network delayed arrives. Up to Linux 5.19 conntrack marks it INVALID ("SEQ is under the lower bound
(already ACKed data retransmitted)") and it goes as outOfWindow does; from torvalds/linux 6e250dcbff1d
("netfilter: conntrack: ignore overly delayed tcp packets", July 2022, in 6.0 and later) tcp_in_window
(net/netfilter/nf_conntrack_proto_tcp.c) returns NFCT_TCP_IGNORE for it: the packet is accepted as part of
the connection without changing its state, so it is reverse-NATed, no INVALID rule sees it, and the client's
TCP answers the duplicate with an ACK.

`craft: backendReset` is a RST from the backend's side, in the connection's window (the sequence number the
backend sends next), as a backend that crashes or whose socket is closed with unread data sends: conntrack
takes it as valid, moves the entry to CLOSE, and reverse-NATs it, so the client's next request fails with
"connection reset by peer" in every mode.

`sourceAddress:` sends a probe's SYN or datagram from an address its actor does not own, so that one host can
stand for many (loadBalancerSourceRanges, a client range); no socket waits for the answer, which goes to that
address: the captures tell whether a backend answered it.

Every craft is built in the family of the addresses it is sent between: an IPv4 header, or an IPv6 one (no
extension headers), sent through a raw socket of that family (an AF_INET6 socket of IPPROTO_RAW takes the whole
packet, header included, as IP_HDRINCL does for IPv4: net/ipv6/af_inet6.c inet6_create). Conntrack judges an
IPv6 segment's window as it does an IPv4 one's (nf_conntrack_proto_tcp.c is shared by both families).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lab.install.echo import Arrival
from lab.probe.capture import Frame
from lab.probe.client import ClientResult
from lab.realize.enter import in_netns
from lab.realize.families import address, endpoint, socket_family

OUT_OF_WINDOW = 1 << 30  # bytes beyond what the client expects next: outside any window it advertises


@dataclass(frozen=True)
class Craft:
    """A crafted segment from the backend's side: where its sequence number lies from the one the backend sends
    next, its TCP flags, and its data."""

    what: str  # how `why` names it
    offset: int
    flags: str
    data: bytes

    def is_it(self, seg: Segment, seq: int) -> bool:
        """Whether a captured segment is this craft sent at sequence number `seq`."""
        return seg.seq == seq and (seg.payload > 0 if self.data else bool(seg.flags & 0x04))


CRAFTS = {
    "outOfWindow": Craft("out-of-window segment", OUT_OF_WINDOW, "PA", b"a segment beyond the window\n"),
    # Behind any window the client advertised (at most 1 GiB with window scaling, RFC 7323).
    "lateRetransmission": Craft("late retransmission", -OUT_OF_WINDOW, "PA", b"a late retransmission\n"),
    # A socket that resets an established connection sends RST|ACK at the sequence number it sends next.
    "backendReset": Craft("RST from the backend", 0, "RA", b""),
}


@dataclass(frozen=True)
class Segment:
    """The TCP fields of a captured IPv4 or IPv6 frame."""

    src: str
    dst: str
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    payload: int  # bytes of data

    @classmethod
    def of(cls, frame: Frame) -> Segment | None:
        data, packet = frame.data, frame.packet
        if packet is None or packet.protocol != 6:
            return None
        l4 = packet.offset
        if len(data) < l4 + 20:
            return None
        sport, dport, seq, ack, offset, flags = struct.unpack_from("!HHIIBB", data, l4)
        # The packet's length less its IP headers (IPv6's extension headers too) and the TCP header.
        payload = packet.length - (l4 - 14) - (offset >> 4) * 4
        return cls(packet.src, packet.dst, sport, dport, seq, ack, flags, payload)


def next_from(frames: list[Frame], src: str, sport: int, dst: str, dport: int) -> tuple[int, int] | None:
    """(the sequence number the sender uses next, the acknowledgement it sends) from the last segment of
    src:sport → dst:dport captured."""
    for frame in reversed(frames):
        seg = Segment.of(frame)
        if seg and (seg.src, seg.sport, seg.dst, seg.dport) == (src, sport, dst, dport):
            return (seg.seq + seg.payload + (1 if seg.flags & 0x03 else 0)) % (1 << 32), seg.ack
    return None


def _ip_header(src: str, dst: str) -> Any:  # a scapy layer: scapy is imported only when a probe crafts
    """An IPv4 or IPv6 header from src to dst, in their family (the checksums of what follows it are computed
    over the pseudo-header of that family when the packet is built)."""
    from scapy.layers.inet import IP
    from scapy.layers.inet6 import IPv6

    # describe refuses a sourceAddress of another family than the probe's destination.
    return IP(src=src, dst=dst) if address(dst).version == 4 else IPv6(src=src, dst=dst)


def crafted_segment(craft: Craft, src: str, sport: int, dst: str, dport: int, seq: int, ack: int) -> bytes:
    """The IPv4 or IPv6 packet of `craft` from src:sport to dst:dport, where `seq` is the sequence number the
    sender uses next and `ack` the acknowledgement it sends."""
    from scapy.layers.inet import TCP

    tcp = TCP(sport=sport, dport=dport, flags=craft.flags, seq=(seq + craft.offset) % (1 << 32), ack=ack, window=502)
    return bytes(_ip_header(src, dst) / tcp / craft.data)


def send_raw(netns: str, packet: bytes, dst: str) -> None:
    """`packet`, a whole IPv4 or IPv6 packet, through a raw socket of `dst`'s family made in `netns` (the kernel
    routes it by `dst` and fills nothing in)."""

    def send() -> None:
        with socket.socket(socket_family(dst), socket.SOCK_RAW, socket.IPPROTO_RAW) as sock:
            sock.sendto(packet, (dst, 0))

    in_netns(netns, send)


def spoofed_packet(src: str, dst: str, dport: int, protocol: str, sport: int) -> bytes:
    """A TCP SYN or a UDP datagram ("probe\\n") from src:sport to dst:dport, in their family."""
    from scapy.layers.inet import TCP, UDP
    from scapy.packet import Raw

    l4 = TCP(sport=sport, dport=dport, flags="S", seq=1) if protocol == "TCP" else UDP(sport=sport, dport=dport)
    return bytes(_ip_header(src, dst) / l4 / (Raw(b"probe\n") if protocol == "UDP" else b""))


def send_from(netns: str, src: str, dst: str, dport: int, protocol: str, sport: int) -> None:
    """One TCP SYN or UDP datagram from `src`, an address the sender need not own (a spoofed source), sent
    through a raw socket made in `netns`: the kernel routes it by its destination and checks nothing else."""
    send_raw(netns, spoofed_packet(src, dst, dport, protocol, sport), dst)


# An ICMP or ICMPv6 error by (IP protocol, type): the type of "destination unreachable" in each, and its code
# "port unreachable" (RFC 792, RFC 4443 section 3.1), which tells a closed port from a path that led nowhere.
_UNREACHABLE = {1: 3, 58: 1}
_PORT_UNREACHABLE = {1: 3, 58: 4}


def unreachable_code(frame: Frame) -> tuple[int, int] | None:
    """(IP protocol, code) of an ICMP or ICMPv6 destination unreachable; None for any other frame."""
    packet = frame.packet
    if packet is None or packet.protocol not in _UNREACHABLE or len(frame.data) < packet.offset + 2:
        return None
    icmp_type, code = frame.data[packet.offset], frame.data[packet.offset + 1]
    return (packet.protocol, code) if icmp_type == _UNREACHABLE[packet.protocol] else None


def spoofed_answer(
    frames: list[Frame], arrivals: list[Arrival], pod_ports: Mapping[str, str], protocol: str, source: str
) -> ClientResult | None:
    """What answered a spoofed-source probe from `source`, from the frames and backend arrivals since it was sent
    (only it runs meanwhile): a backend (its UDP arrival, or its SYN-ACK leaving the pod, with the source the SYN
    reached it from), a RST or ICMP error addressed to `source` (what befalls the backend's own answer on its
    way to an address nobody owns is not the probe's), or nothing yet (None)."""
    if protocol == "UDP" and arrivals:
        first = arrivals[0]
        peer = endpoint(first.peer_ip, first.peer_port)
        return ClientResult("delivered", reply={"backend": first.backend, "node": first.node, "peer": peer})
    pods = {port: pod for pod, port in pod_ports.items()}
    for frame in frames:
        seg = Segment.of(frame)
        if seg and frame.ifname in pods and not frame.outgoing and seg.flags & 0x12 == 0x12:
            sent = (Segment.of(f) for f in frames if f.ifname == frame.ifname and f.outgoing)
            syn = next((s for s in sent if s is not None and s.flags & 0x12 == 0x02), None)
            peer = endpoint(syn.src, syn.sport) if syn else ""
            return ClientResult("delivered", reply={"backend": pods[frame.ifname], "node": frame.actor, "peer": peer})
    for frame in frames:
        if frame.addresses is None or frame.addresses[1] != source:
            continue
        summary, seg, unreachable = frame.summary() or "", Segment.of(frame), unreachable_code(frame)
        port_closed = unreachable is not None and _PORT_UNREACHABLE[unreachable[0]] == unreachable[1]
        if (seg and seg.flags & 0x04) or port_closed:
            return ClientResult("refused", error=f"answered with {summary} ({frame.where})")
        if unreachable is not None:
            return ClientResult("unreachable", error=f"answered with {summary} ({frame.where})")
    return None
