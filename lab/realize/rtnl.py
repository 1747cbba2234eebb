"""Batched rtnetlink requests: many link, address and route changes in one write to one namespace's socket.

A cluster of real size is mostly pods, and each pod is the same handful of requests (a veth pair, an address,
two links up, a default route). Asked one at a time through pyroute2 each costs about a millisecond of Python
around a few microseconds of kernel work; written here as raw messages and sent together, the kernel takes
them in order and answers each with an acknowledgement, which `commit` reads back and checks.

Interfaces get the index the builder chooses (rtnetlink takes `ifi_index` on creation, and a veth's peer its
own), so no request has to ask the kernel which index a new interface got. Message layouts are the kernel's
uapi ones: include/uapi/linux/{netlink,rtnetlink,if_link,if_addr}.h.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from dataclasses import dataclass, field

from lab.realize.enter import NamespaceError
from lab.realize.families import address as ip_address
from lab.realize.families import network

# include/uapi/linux/netlink.h
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
NLA_F_NESTED = 0x8000
# include/uapi/linux/rtnetlink.h
RTM_NEWLINK, RTM_SETLINK, RTM_NEWADDR, RTM_NEWROUTE = 16, 19, 20, 24
RT_TABLE_MAIN, RTPROT_STATIC, RTN_UNICAST = 254, 4, 1
RTA_DST, RTA_OIF, RTA_GATEWAY = 1, 4, 5
RTNH_F_ONLINK = 4
# include/uapi/linux/if_link.h
IFLA_IFNAME, IFLA_MASTER, IFLA_PROTINFO, IFLA_LINKINFO, IFLA_NET_NS_FD = 3, 10, 12, 18, 28
IFLA_INFO_KIND, IFLA_INFO_DATA, VETH_INFO_PEER = 1, 2, 1
IFLA_BRPORT_MODE = 4  # the bridge port's hairpin flag
IFF_UP = 0x1
# include/uapi/linux/if_addr.h
IFA_ADDRESS, IFA_LOCAL = 1, 2
IFA_F_NODAD = 0x02  # an IPv6 address usable at once, not tentative while duplicate address detection runs
AF_BRIDGE = 7

_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port
_IFINFO = struct.Struct("=BxHiII")  # ifinfomsg: family, type, index, flags, change
_IFADDR = struct.Struct("=BBBBI")  # ifaddrmsg: family, prefixlen, flags, scope, index
_RTMSG = struct.Struct("=BBBBBBBBI")  # rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags
# A batch is written in pieces: every acknowledgement is charged about a kilobyte against the socket's receive
# buffer (~200 KiB by default), and one not taken in is lost (ENOBUFS).
SEND_LIMIT = 64


def attribute(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _name(text: str) -> bytes:
    return text.encode() + b"\0"


def _family(version: int) -> int:
    return socket.AF_INET if version == 4 else socket.AF_INET6


@dataclass
class Batch:
    """Requests for one namespace's NETLINK_ROUTE socket, sent by `commit` in the order they were added."""

    sock: socket.socket
    namespace: str  # for error messages
    _messages: list[tuple[bytes, str]] = field(default_factory=list)

    def _add(self, kind: int, flags: int, body: bytes, what: str) -> None:
        sequence = len(self._messages) + 1
        header = _HEADER.pack(_HEADER.size + len(body), kind, NLM_F_REQUEST | NLM_F_ACK | flags, sequence, 0)
        self._messages.append((header + body, what))

    def veth(self, name: str, index: int, peer: str, peer_index: int, peer_netns_fd: int) -> None:
        """A veth pair: `name` (index `index`) here, `peer` (index `peer_index`) straight in the other namespace."""
        peer_info = _IFINFO.pack(socket.AF_UNSPEC, 0, peer_index, 0, 0)
        peer_info += attribute(IFLA_IFNAME, _name(peer)) + attribute(IFLA_NET_NS_FD, struct.pack("=I", peer_netns_fd))
        data = attribute(IFLA_INFO_DATA | NLA_F_NESTED, attribute(VETH_INFO_PEER | NLA_F_NESTED, peer_info))
        linkinfo = attribute(IFLA_LINKINFO | NLA_F_NESTED, attribute(IFLA_INFO_KIND, _name("veth")) + data)
        body = _IFINFO.pack(socket.AF_UNSPEC, 0, index, 0, 0) + attribute(IFLA_IFNAME, _name(name)) + linkinfo
        self._add(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, body, f"veth {name} (peer {peer})")

    def up(self, index: int, master: int = 0) -> None:
        """Link `index` up (and, with `master`, a port of that bridge)."""
        body = _IFINFO.pack(socket.AF_UNSPEC, 0, index, IFF_UP, IFF_UP)
        if master:
            body += attribute(IFLA_MASTER, struct.pack("=I", master))
        self._add(RTM_NEWLINK, 0, body, f"link {index} up" + (f" in bridge {master}" if master else ""))

    def hairpin(self, index: int) -> None:
        """The bridge port `index` sends a frame back out of the port it came in by (`bridge link set hairpin on`:
        RTM_SETLINK of family AF_BRIDGE, which the bridge's own handler takes)."""
        body = _IFINFO.pack(AF_BRIDGE, 0, index, 0, 0)
        body += attribute(IFLA_PROTINFO | NLA_F_NESTED, attribute(IFLA_BRPORT_MODE, b"\1"))
        self._add(RTM_SETLINK, 0, body, f"hairpin on bridge port {index}")

    def address(self, index: int, address: str, prefixlen: int) -> None:
        """An IPv4 or IPv6 address (its family from the text); an IPv6 one without DAD (IFA_F_NODAD)."""
        ip = ip_address(address)
        flags = IFA_F_NODAD if ip.version == 6 else 0
        body = _IFADDR.pack(_family(ip.version), prefixlen, flags, 0, index)
        body += attribute(IFA_LOCAL, ip.packed) + attribute(IFA_ADDRESS, ip.packed)
        self._add(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, body, f"address {address}/{prefixlen} on link {index}")

    def route(self, dst: str, gateway: str = "", oif: int = 0, scope: int = 0, onlink: bool = False) -> None:
        """A unicast route of the main table, as `ip route add` writes it (protocol static), in the family of `dst`
        (the gateway's must be the same)."""
        net = network(dst)
        via = ip_address(gateway) if gateway else None
        if via is not None and via.version != net.version:
            raise ValueError(f"route {dst} via {gateway}: the gateway is not of the destination's address family")
        body = _RTMSG.pack(
            _family(net.version),
            net.prefixlen,
            0,
            0,
            RT_TABLE_MAIN,
            RTPROT_STATIC,
            scope,
            RTN_UNICAST,
            RTNH_F_ONLINK if onlink else 0,
        )
        if net.prefixlen:
            body += attribute(RTA_DST, net.network_address.packed)
        if via is not None:
            body += attribute(RTA_GATEWAY, via.packed)
        if oif:
            body += attribute(RTA_OIF, struct.pack("=I", oif))
        what = f"route {dst}" + (f" via {gateway}" if gateway else "")
        self._add(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, body, what)

    def commit(self) -> None:
        """Send every request, read every acknowledgement; the first refusal is raised naming its request."""
        messages, self._messages = self._messages, []
        start = 0
        while start < len(messages):
            end = min(start + SEND_LIMIT, len(messages))
            self.sock.send(b"".join(message for message, _ in messages[start:end]))
            self._acknowledged(messages, start, end)
            start = end

    def _acknowledged(self, messages: list[tuple[bytes, str]], start: int, end: int) -> None:
        waiting = set(range(start + 1, end + 1))
        refused: list[tuple[int, int]] = []
        while waiting:
            data = self.sock.recv(1 << 16)
            offset = 0
            while offset + _HEADER.size <= len(data):
                length, kind, _, sequence, _ = _HEADER.unpack_from(data, offset)
                if kind == NLMSG_ERROR and sequence in waiting:
                    waiting.discard(sequence)
                    (code,) = struct.unpack_from("=i", data, offset + _HEADER.size)
                    if code:
                        refused.append((sequence, -code))
                offset += max(length + (-length % 4), _HEADER.size)
        if refused:
            sequence, code = min(refused)
            what = messages[sequence - 1][1]
            name = errno.errorcode.get(code, str(code))
            raise NamespaceError(f"{self.namespace}: {what} refused by the kernel: {os.strerror(code)} ({name})")
