"""A layer 2 load balancer's speaker: the node that announces a VIP answers ARP requests for it from userspace.

MetalLB's speaker (layer 2 mode) opens a packet socket on the node's interfaces and answers every ARP request for a
VIP it announces, sent to the broadcast address or to its own MAC, with the interface's own MAC (metallb/metallb
internal/layer2/arp.go at 5d8c6b71661fbc460f4ba9859833d4f352832eca, processRequest); kube-vip's ARP mode does the
same. The VIP is no address of the node (in iptables and nftables mode kube-proxy's PREROUTING DNAT catches it), so
the node's kernel does not answer: only the speaker. Here each announcing node gets one AF_PACKET socket, made
inside its namespace on its eth0, served by one thread for the whole run and closed with the lab. In ipvs mode the
kernel of every node that binds the VIP on kube-ipvs0 answers as well unless strictARP is set: that is left to the
kernel, as on a real node.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from ipaddress import IPv4Address

from lab.install.loop import SocketLoop
from lab.realize.enter import in_netns

ETH_P_ARP = 0x0806  # linux/if_ether.h
PACKET_OUTGOING = 4  # linux/if_packet.h: a frame this host sent, which a packet socket sees too
_ETHERNET = struct.Struct("!6s6sH")
_ARP = struct.Struct("!HHBBH6s4s6s4s")  # htype, ptype, hlen, plen, oper, sha, spa, tha, tpa
_REQUEST, _REPLY = 1, 2
_BROADCAST = b"\xff" * 6


@dataclass(frozen=True)
class Announced:
    """The VIPs one node's speaker answers for, on its `device`."""

    node: str
    netns: str
    vips: tuple[str, ...]
    device: str = "eth0"


@dataclass(frozen=True)
class ArpMessage:
    """An Ethernet frame's ARP message for IPv4 (RFC 826): the MAC it was sent to, its operation, the sender's
    MAC and address and the address asked for (as bytes: four for an address, six for a MAC)."""

    destination: bytes
    operation: int  # 1 request, 2 reply
    sender_mac: bytes
    sender_ip: bytes
    target_ip: bytes

    @property
    def is_reply(self) -> bool:
        return self.operation == _REPLY


def parse_arp(frame: bytes) -> ArpMessage | None:
    """The ARP message an Ethernet frame carries (IPv4 over Ethernet), else None: another frame, or one cut short."""
    if len(frame) < _ETHERNET.size + _ARP.size:
        return None
    destination, _, ethertype = _ETHERNET.unpack_from(frame)
    htype, ptype, hlen, plen, oper, sha, spa, _, tpa = _ARP.unpack_from(frame, _ETHERNET.size)
    if (ethertype, htype, ptype, hlen, plen) != (ETH_P_ARP, 1, 0x0800, 6, 4):
        return None
    return ArpMessage(destination, oper, sha, spa, tpa)


def arp_reply(frame: bytes, vips: frozenset[bytes], mac: bytes) -> bytes | None:
    """The speaker's answer to one received frame: an ARP reply from `mac` when it is a request for one of `vips`
    (each as its four bytes) sent to the broadcast address or to `mac`, else None."""
    asked = parse_arp(frame)
    if asked is None or asked.operation != _REQUEST or asked.target_ip not in vips:
        return None
    if asked.destination not in (_BROADCAST, mac):
        return None
    head = _ETHERNET.pack(asked.sender_mac, mac, ETH_P_ARP)
    return head + _ARP.pack(1, 0x0800, 6, 4, _REPLY, mac, asked.target_ip, asked.sender_mac, asked.sender_ip)


def packet_socket(device: str) -> socket.socket:
    """A raw packet socket receiving the device's ARP frames (made inside the node's namespace)."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ARP))
    sock.bind((device, ETH_P_ARP))
    return sock


class Speakers(SocketLoop):
    """Every announcing node's speaker, in one thread."""

    def __init__(self) -> None:
        super().__init__("speaker")

    def announce(self, announced: Announced) -> None:
        sock = in_netns(announced.netns, lambda: packet_socket(announced.device))
        mac = sock.getsockname()[4]
        self.register(sock, (frozenset(IPv4Address(v).packed for v in announced.vips), mac))

    def handle(self, sock: socket.socket, data: tuple[frozenset[bytes], bytes]) -> None:
        vips, mac = data
        try:
            frame, address = sock.recvfrom(65535)
            reply = arp_reply(frame, vips, mac) if address[2] != PACKET_OUTGOING else None
            if reply:
                sock.send(reply)
        except OSError:
            return
