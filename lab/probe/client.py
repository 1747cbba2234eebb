"""Real TCP/UDP clients, started inside the source actor's namespace."""

from __future__ import annotations

import errno
import json
import socket
from dataclasses import dataclass

from lab.netns.enter import in_netns


@dataclass(frozen=True)
class ClientResult:
    outcome: str  # delivered | refused | dropped | unreachable | reset
    reply: dict[str, str] | None = None
    error: str = ""
    local: str = ""


_UNREACHABLE = {errno.EHOSTUNREACH, errno.ENETUNREACH}


def _read_reply(sock: socket.socket) -> dict[str, str]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return json.loads(data) if data else {}


def _attempt(sock: socket.socket, dst: tuple[str, int], protocol: str) -> ClientResult:
    local = ""
    try:
        sock.connect(dst)
        local = "{}:{}".format(*sock.getsockname())
        if protocol == "UDP":
            sock.send(b"probe\n")
        reply = _read_reply(sock)
    except TimeoutError:
        return ClientResult("dropped", error="no answer before the timeout", local=local)
    except ConnectionRefusedError:
        return ClientResult("refused", error="connection refused (TCP RST or ICMP port unreachable)", local=local)
    except ConnectionResetError:
        return ClientResult("reset", error="connection reset after it was established", local=local)
    except OSError as exc:
        if exc.errno in _UNREACHABLE:
            return ClientResult("unreachable", error=exc.strerror or str(exc), local=local)
        raise
    if not reply:
        return ClientResult("reset", error="connection closed without an answer", local=local)
    return ClientResult("delivered", reply=reply, local=local)


def send(
    netns: str, dst_ip: str, dst_port: int, protocol: str, timeout: float, bind: str | None = None
) -> ClientResult:
    """Open a real connection (or send one datagram) from netns, from address `bind` if given."""
    kind = socket.SOCK_STREAM if protocol.upper() == "TCP" else socket.SOCK_DGRAM

    def make() -> socket.socket:
        sock = socket.socket(socket.AF_INET, kind)
        if bind:
            sock.bind((bind, 0))
        return sock

    sock = in_netns(netns, make)
    with sock:
        sock.settimeout(timeout)
        return _attempt(sock, (dst_ip, dst_port), protocol.upper())
