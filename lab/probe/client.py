"""Real TCP/UDP clients, started inside the source actor's namespace.

The outcome is what the kernel reported to the client's socket:
  delivered    the backend's answer
  refused      ECONNREFUSED: the SYN was answered with a RST, or an ICMP port unreachable came back
  reset        ECONNRESET: a RST after the connection was established
  unreachable  any other ICMP error (net or host unreachable, prohibited, time exceeded...), or no route
               in the source's own namespace (ENETUNREACH/EHOSTUNREACH with no ICMP behind it)
  closed       the connection was accepted and closed without an answer (no lab backend does that)
  accepted     the TCP handshake completed but nothing answered before the timeout: a socket that never reads
               took the connection (the session decides it, from `connected` and the backends' arrivals)
  dropped      nothing came back before the timeout
Every socket has IP_RECVERR (IPV6_RECVERR for an IPv6 destination) on: the kernel then queues each ICMP or
ICMPv6 error with its type, code and sender on the socket's error queue, which names it; for UDP it is also what
makes the kernel report errors other than port unreachable at all.
"""

from __future__ import annotations

import errno
import json
import socket
import struct
from dataclasses import dataclass, replace

from lab.realize.enter import in_netns
from lab.realize.families import endpoint, socket_family

SOL_IP, IP_RECVERR = 0, 11  # linux/in.h; Python's socket module does not export IP_RECVERR
SOL_IPV6, IPV6_RECVERR = 41, 25  # linux/in6.h; nor IPV6_RECVERR
SO_EE_ORIGIN_ICMP, SO_EE_ORIGIN_ICMP6 = 2, 3  # linux/errqueue.h
_RECVERR = {socket.AF_INET: (SOL_IP, IP_RECVERR), socket.AF_INET6: (SOL_IPV6, IPV6_RECVERR)}
_EXTENDED_ERR = struct.Struct("=IBBBBII")  # struct sock_extended_err, then the sender (SO_EE_OFFENDER)
_UNREACHABLE = {errno.EHOSTUNREACH, errno.ENETUNREACH}
_ICMP_NAMES = {
    (3, 0): "net unreachable",
    (3, 1): "host unreachable",
    (3, 2): "protocol unreachable",
    (3, 3): "port unreachable",
    (3, 4): "fragmentation needed",
    (3, 6): "destination network unknown",
    (3, 7): "destination host unknown",
    (3, 9): "network administratively prohibited",
    (3, 10): "host administratively prohibited",
    (3, 13): "communication administratively prohibited",
    (11, 0): "time exceeded (TTL) in transit",
    (11, 1): "fragment reassembly time exceeded",
    (12, 0): "parameter problem",
}
# RFC 4443 and the codes of RFC 4443 section 3.1 Linux sends (net/ipv6/icmp.c, net/ipv6/route.c)
_ICMP6_NAMES = {
    (1, 0): "no route to destination",
    (1, 1): "communication administratively prohibited",
    (1, 2): "beyond scope of source address",
    (1, 3): "address unreachable",
    (1, 4): "port unreachable",
    (1, 5): "source address failed ingress/egress policy",
    (1, 6): "reject route to destination",
    (2, 0): "packet too big",
    (3, 0): "hop limit exceeded in transit",
    (3, 1): "fragment reassembly time exceeded",
    (4, 0): "parameter problem: erroneous header field",
    (4, 1): "parameter problem: unrecognized next header",
    (4, 2): "parameter problem: unrecognized IPv6 option",
}


@dataclass(frozen=True)
class IcmpError:
    """An ICMP (or, with version 6, ICMPv6) error the kernel queued on the client's socket, and the address that
    sent it."""

    type: int
    code: int
    sender: str
    version: int = 4

    @property
    def protocol(self) -> str:
        return "ICMP" if self.version == 4 else "ICMPv6"

    @property
    def name(self) -> str:
        return (_ICMP_NAMES if self.version == 4 else _ICMP6_NAMES).get((self.type, self.code), "error")

    def __str__(self) -> str:
        return f"{self.protocol} {self.name} (type {self.type} code {self.code}) from {self.sender}"


@dataclass(frozen=True)
class ClientResult:
    outcome: str  # delivered | refused | reset | unreachable | closed | dropped
    reply: dict[str, str] | None = None
    error: str = ""
    local: str = ""
    icmp: IcmpError | None = None
    connected: bool = False  # TCP: the handshake completed


def parse_extended_error(data: bytes) -> IcmpError | None:
    """An IP_RECVERR or IPV6_RECVERR control message: the ICMP or ICMPv6 error and its sender; None for an error
    the local stack made."""
    _, origin, icmp_type, code, *_ = _EXTENDED_ERR.unpack_from(data)
    offender = data[_EXTENDED_ERR.size :]
    if origin == SO_EE_ORIGIN_ICMP:  # a struct sockaddr_in: family, port, address
        return IcmpError(icmp_type, code, socket.inet_ntoa(offender[4:8]))
    if origin == SO_EE_ORIGIN_ICMP6:  # a struct sockaddr_in6: family, port, flow info, address
        return IcmpError(icmp_type, code, socket.inet_ntop(socket.AF_INET6, offender[8:24]), 6)
    return None


def classify(err: int, icmp: IcmpError | None, protocol: str) -> tuple[str, str] | None:
    """(outcome, what the client saw) for a failed connection or datagram; None for an error that is no answer."""
    if err == errno.ECONNRESET:
        return "reset", "connection reset (RST) after it was established"
    if err == errno.ECONNREFUSED:
        if icmp is not None:
            return "refused", str(icmp)
        return "refused", "the SYN was answered with a RST" if protocol == "TCP" else "connection refused"
    if icmp is not None:
        return "unreachable", str(icmp)
    if err in _UNREACHABLE:
        return "unreachable", f"{errno.errorcode[err]} from the source's own stack (no route there; no ICMP came back)"
    if err == errno.EPERM:
        return "dropped", "the source's own rules dropped it (EPERM when sending)"
    return None


def _queued_icmp(sock: socket.socket) -> IcmpError | None:
    timeout = sock.gettimeout()
    sock.setblocking(False)  # the error queue is read as it is, never waited on
    try:
        _, ancillary, _, _ = sock.recvmsg(512, 512, socket.MSG_ERRQUEUE)
    except BlockingIOError:
        return None
    finally:
        sock.settimeout(timeout)  # a kept socket goes on as it was
    for level, kind, data in ancillary:
        if (level, kind) in _RECVERR.values():
            return parse_extended_error(data)
    return None


def read_reply(sock: socket.socket) -> dict[str, str]:
    """A backend's JSON line: alone (UDP, a held connection) or as the body of its HTTP answer (a new TCP one).
    On a held connection the answer to an earlier line that came after its exchange timed out arrives with this
    one: the last line is this exchange's answer."""
    data = b""
    while not _body(data).endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    lines = _body(data).strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def _body(data: bytes) -> bytes:
    if not data.startswith(b"HTTP/"):
        return data
    _, sep, body = data.partition(b"\r\n\r\n")
    return body if sep else b""


def payload(size: int) -> bytes:
    """`size` bytes a backend answers once: one line."""
    return b"x" * (size - 1) + b"\n"


def _attempt(sock: socket.socket, dst: tuple[str, int], protocol: str, size: int = 0) -> ClientResult:
    """Connect and exchange; with `size`, the request is `size` bytes: the datagram (UDP) or one request on the
    established connection (TCP, whose backends hold their connections then and answer each line)."""
    try:
        sock.connect(dst)
    except TimeoutError:
        return ClientResult("dropped", error="no answer before the timeout")
    except OSError as exc:
        return _failed(sock, exc, protocol, "")
    # A TCP backend answers the new connection by itself; a UDP one answers a datagram.
    result = exchange(sock, protocol, (payload(size) if size else b"probe\n") if protocol == "UDP" else b"")
    if size and protocol == "TCP" and result.outcome == "delivered":
        result = exchange(sock, protocol, payload(size))
    return replace(result, connected=protocol == "TCP")


def exchange(sock: socket.socket, protocol: str, line: bytes = b"again\n") -> ClientResult:
    """Send `line` (nothing if empty) on a connected socket and read the answer, or what came instead."""
    local = endpoint(*sock.getsockname()[:2])
    try:
        if line:
            sock.send(line)
        reply = read_reply(sock)
    except TimeoutError:
        return ClientResult("dropped", error="no answer before the timeout", local=local)
    except OSError as exc:
        return _failed(sock, exc, protocol, local)
    if not reply:
        return ClientResult("closed", error="the connection was closed (FIN) without an answer", local=local)
    return ClientResult("delivered", reply=reply, local=local)


def _failed(sock: socket.socket, exc: OSError, protocol: str, local: str) -> ClientResult:
    icmp = _queued_icmp(sock)
    seen = classify(exc.errno or 0, icmp, protocol)
    if seen is None:
        raise exc
    return ClientResult(seen[0], error=seen[1], local=local, icmp=icmp)


def open_socket(
    netns: str, dst_ip: str, dst_port: int, protocol: str, timeout: float, port: int = 0
) -> tuple[socket.socket, ClientResult]:
    """A connection (TCP) or connected socket (UDP) from netns that stays open after the first answer (the
    caller closes it), and that answer, or what came instead."""
    kind = socket.SOCK_STREAM if protocol == "TCP" else socket.SOCK_DGRAM
    sock = in_netns(netns, lambda: _socket(socket_family(dst_ip), kind, None, port))
    sock.settimeout(timeout)
    return sock, _attempt(sock, (dst_ip, dst_port), protocol)


def _socket(family: int, kind: int, bind: str | None, port: int) -> socket.socket:
    """A socket of the destination's family, with its ICMP errors queued (IP_RECVERR or IPV6_RECVERR)."""
    sock = socket.socket(family, kind)
    sock.setsockopt(*_RECVERR[family], 1)
    if port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if bind or port:
        sock.bind((bind or ("0.0.0.0" if family == socket.AF_INET else "::"), port))
    return sock


def send(
    netns: str,
    dst_ip: str,
    dst_port: int,
    protocol: str,
    timeout: float,
    bind: str | None = None,
    port: int = 0,
    size: int = 0,
) -> ClientResult:
    """Open a real connection (or send one datagram) from netns, from address `bind` and source `port` if given
    (a fixed port continues the flow an earlier probe from it started), with `size` bytes of request if given."""
    kind = socket.SOCK_STREAM if protocol.upper() == "TCP" else socket.SOCK_DGRAM
    sock = in_netns(netns, lambda: _socket(socket_family(dst_ip), kind, bind, port))
    with sock:
        sock.settimeout(timeout)
        return _attempt(sock, (dst_ip, dst_port), protocol.upper(), size)
