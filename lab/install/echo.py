"""Echo servers: every backend answers with who it is and the peer address it saw.

A TCP backend answers a new connection at once, as an HTTP/1.1 response whose body is that JSON line (so curl or a
browser in a live lab shows it; the lab's own client sends nothing and reads the body); it then ends its side
(FIN) and reads whatever the client sent until the client closes, so that closing never meets unread data (which
would answer with a RST). A UDP backend answers each datagram with the JSON line. A held connection answers each
line the client sends with a JSON line.

A backend listens on the families its Listener names: one socket each, an IPv6 one taking IPv6 only (IPV6_V6ONLY),
so that an IPv4 packet never reaches it as a mapped ::ffff: address; what it reports is the peer as its own
family's socket saw it.

All listeners of a run live in this process: each socket is made inside its namespace
(see lab.realize.enter) and one selector thread serves them all, so starting a backend
costs a socket, not a process.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from lab.install.loop import SocketLoop
from lab.realize.enter import in_netns_each
from lab.realize.families import endpoint

IP_PKTINFO = 8  # linux/in.h; Python's socket module does not export it
IPV6_TRANSPARENT = 75  # linux/in6.h; nor this one
_FAMILIES = {"IPv4": socket.AF_INET, "IPv6": socket.AF_INET6}  # Kubernetes' names for them (ipFamilies)


@dataclass(frozen=True)
class Arrival:
    """One connection or datagram a backend received."""

    backend: str
    node: str
    protocol: str
    local: str
    peer_ip: str
    peer_port: int
    at: float


@dataclass(frozen=True)
class Listener:
    backend: str
    node: str
    netns: str
    port: int
    protocol: str  # TCP | UDP
    # Answer from addresses the namespace does not own (a sink that accepts every destination).
    transparent: bool = False
    # TCP: keep each connection open after the first answer and answer every line the client sends on it, until
    # the client closes (a connection that lasts, for probes that act on it while it is established).
    hold: bool = False
    families: tuple[str, ...] = ("IPv4",)  # "IPv4", "IPv6": a socket for each
    # Stand-in pods (lab/realize/standins.py): one listener answers for every pod address of the stand-in
    # namespace, each arrival named by the address it came to: address -> (backend, node).
    owners: Mapping[str, tuple[str, str]] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class _Ending:
    """A connection answered and ended on our side, read until the client closes it."""


@dataclass(frozen=True)
class _Held:
    """An accepted connection kept open, with the listener that accepted it."""

    listener: Listener
    peer: tuple[str, int]


class EchoServers(SocketLoop):
    def __init__(self) -> None:
        super().__init__("echo")
        self.arrivals: list[Arrival] = []

    def listen(self, listener: Listener) -> None:
        self.listen_all([listener])

    def listen_all(self, listeners: Sequence[Listener]) -> None:
        """Every listener's sockets, made in its namespace by one thread moving from one namespace to the next (a
        thread each cost seconds at ten thousand pods); each is served as soon as it is made, so one that fails
        leaves those made before it to close()."""
        in_netns_each(
            [
                (listener.netns, partial(self._listening_here, listener, _FAMILIES[family]))
                for listener in listeners
                for family in listener.families
            ]
        )

    def _listening_here(self, listener: Listener, family: int) -> None:
        self.register(_listening(listener, family), listener)

    def arrivals_since(self, mark: int) -> list[Arrival]:
        with self._lock:
            return self.arrivals[mark:]

    def mark(self) -> int:
        with self._lock:
            return len(self.arrivals)

    def _record(self, listener: Listener, local: tuple[str, int], peer: tuple[str, int]) -> bytes:
        backend, node = listener.owners.get(local[0], (listener.backend, listener.node))
        arrival = Arrival(backend, node, listener.protocol, endpoint(*local[:2]), peer[0], peer[1], time.time())
        with self._lock:
            self.arrivals.append(arrival)
        reply = {
            "backend": arrival.backend,
            "node": arrival.node,
            "peer": endpoint(peer[0], peer[1]),
            "local": arrival.local,
        }
        return json.dumps(reply).encode() + b"\n"

    def _answer_datagram(self, listener: Listener, sock: socket.socket) -> None:
        _, ancillary, _, peer = sock.recvmsg(2048, 64)
        if sock.family == socket.AF_INET6:
            # struct in6_pktinfo: the destination address, then the interface (0 on the answer: any)
            info = next((d for level, kind, d in ancillary if (level, kind) == _PKTINFO6), None)
            local = (socket.inet_ntop(socket.AF_INET6, info[:16]) if info else "::", sock.getsockname()[1])
            control = [(*_PKTINFO6, info[:16] + bytes(4))] if info else []
        else:
            info = next((d for level, kind, d in ancillary if level == socket.IPPROTO_IP and kind == IP_PKTINFO), None)
            local = (socket.inet_ntoa(info[8:12]) if info else "0.0.0.0", sock.getsockname()[1])
            control = [(socket.IPPROTO_IP, IP_PKTINFO, struct.pack("I4s4s", 0, info[8:12], b"\0" * 4))] if info else []
        reply = self._record(listener, local, peer)
        sock.sendmsg([reply], control, 0, peer)

    def handle(self, sock: socket.socket, data: Listener | _Held | _Ending) -> None:
        try:
            if isinstance(data, _Held):
                self._answer_held(sock, data)
            elif isinstance(data, _Ending):
                self._drain(sock)
            elif data.protocol == "TCP":
                conn, peer = sock.accept()
                if data.hold:
                    conn.sendall(self._record(data, conn.getsockname(), peer))
                    self.register(conn, _Held(data, peer))
                    return
                conn.settimeout(1)
                conn.sendall(http_response(self._record(data, conn.getsockname(), peer)))
                conn.shutdown(socket.SHUT_WR)
                self.register(conn, _Ending())
            else:
                self._answer_datagram(data, sock)
        except OSError:
            # A client that gave up (reset, unreachable reply path) must not stop the other backends.
            return

    def _drain(self, conn: socket.socket) -> bytes:
        """What the client sent; b"" once it has closed (or is gone), and the connection is closed too."""
        try:
            data = conn.recv(4096)
        except OSError:
            data = b""
        if not data:
            self.unregister(conn)
            conn.close()
        return data

    def _answer_held(self, conn: socket.socket, held: _Held) -> None:
        """A line on a held connection is answered like a new connection; its end (or a reset) closes it."""
        data = self._drain(conn)
        for _ in range(data.count(b"\n")):
            conn.sendall(self._record(held.listener, conn.getsockname(), held.peer))


_PKTINFO6 = (socket.IPPROTO_IPV6, socket.IPV6_PKTINFO)


def _listening(listener: Listener, family: int) -> socket.socket:
    """The listener's socket of one family, bound to the wildcard address of that family."""
    kind = socket.SOCK_STREAM if listener.protocol == "TCP" else socket.SOCK_DGRAM
    sock = socket.socket(family, kind)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    if listener.transparent:
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, IPV6_TRANSPARENT, 1)
        else:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TRANSPARENT, 1)
    sock.bind(("0.0.0.0" if family == socket.AF_INET else "::", listener.port))
    # UDP: the datagram's own destination comes with it, as a wildcard socket cannot tell it otherwise, and the
    # answer must leave from it so conntrack can reverse the client's NAT.
    if kind == socket.SOCK_STREAM:
        sock.listen(64)
    elif family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
    else:
        sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    return sock


def http_response(body: bytes) -> bytes:
    """An HTTP/1.1 answer carrying `body` (the JSON line)."""
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body
