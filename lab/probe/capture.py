"""Packet captures on node interfaces (AF_PACKET sockets made inside each namespace).

One socket per namespace, bound to no interface, sees every frame of every interface there with the interface's
name; the frames of the interfaces asked for are kept. (A socket per interface cost a thread to make and, closed,
an RCU grace period each: seconds for a node pool of a thousand pods.) One reader thread serves every namespace of
a run; a probe takes the frames seen between two marks, so the sequence of (interface, direction, packet) is the
packet's path.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import socket
import stat
import struct
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from lab.install.loop import SocketLoop
from lab.realize.enter import NamespaceError, in_netns
from lab.realize.families import endpoint

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
IPPROTO_ICMPV6 = 58
PACKET_OUTGOING = 4
ARPHRD_ETHER = 1
VXLAN_PORT = 4789
SO_TIMESTAMPNS = 35
# Packet sockets closed at once: each close waits for an RCU grace period, and waiters share one.
CLOSERS = 64
_TCP_FLAGS = [(0x02, "S"), (0x10, "."), (0x01, "F"), (0x04, "R"), (0x08, "P")]
# IPv6 extension headers walked to the transport header (RFC 8200 section 4): their length in 8-octet units past
# the first 8, except AH's (RFC 4302: in 4-octet units past the first 8) and the fragment header's (8 octets).
_HOP_BY_HOP, _ROUTING, _FRAGMENT, _AH, _DESTINATION = 0, 43, 44, 51, 60
_EXTENSIONS = {_HOP_BY_HOP, _ROUTING, _FRAGMENT, _AH, _DESTINATION}


@dataclass(frozen=True)
class Packet:
    """The IP packet an Ethernet frame carries: its version, transport protocol (ICMP 1, TCP 6, UDP 17, ICMPv6
    58...), where in the frame the transport header starts, the packet's length from its IP header on, and its
    addresses."""

    version: int
    protocol: int
    offset: int
    length: int
    src: str
    dst: str

    @classmethod
    def of(cls, data: bytes) -> Packet | None:
        """None for a frame without an IP packet (ARP and the like) or one too short to hold its header."""
        if len(data) < 14:
            return None
        ethertype = struct.unpack_from("!H", data, 12)[0]
        if ethertype == ETH_P_IP and len(data) >= 34:
            length = struct.unpack_from("!H", data, 16)[0]
            src, dst = socket.inet_ntoa(data[26:30]), socket.inet_ntoa(data[30:34])
            return cls(4, data[23], 14 + (data[14] & 0x0F) * 4, length, src, dst)
        if ethertype == ETH_P_IPV6 and len(data) >= 54:
            length = 40 + struct.unpack_from("!H", data, 18)[0]
            src, dst = (socket.inet_ntop(socket.AF_INET6, data[at : at + 16]) for at in (22, 38))
            protocol, offset = data[20], 54
            while protocol in _EXTENSIONS and len(data) >= offset + 8:
                units = data[offset + 1]
                size = 8 if protocol == _FRAGMENT else (units + 2) * 4 if protocol == _AH else (units + 1) * 8
                protocol, offset = data[offset], offset + size
            return cls(6, protocol, offset, length, src, dst)
        return None


@dataclass(frozen=True)
class Frame:
    actor: str
    ifname: str
    outgoing: bool
    at: float
    data: bytes

    @property
    def where(self) -> str:
        return f"{self.actor}/{self.ifname} {'out' if self.outgoing else 'in'}"

    @cached_property
    def packet(self) -> Packet | None:
        """The IPv4 or IPv6 packet inside; None for other frames (ARP, and so on)."""
        return Packet.of(self.data)

    @property
    def opens_or_ends(self) -> bool:
        """SYN, SYN-ACK, RST, any UDP, ICMP, and ICMPv6 error or echo: the frames that tell where a connection
        attempt went (not ICMPv6's neighbour discovery and multicast listener reports, IPv6's ARP and IGMP)."""
        packet = self.packet
        if packet is None:
            return False
        proto, l4 = packet.protocol, packet.offset
        if proto == 17 and len(self.data) >= l4 + 4 and struct.unpack_from("!H", self.data, l4 + 2)[0] == VXLAN_PORT:
            return False  # an encapsulation: the packet inside is seen on the VXLAN device
        if proto == IPPROTO_ICMPV6:
            return len(self.data) > l4 and self.data[l4] in _ICMPV6_TOLD
        if proto != 6:
            return proto in (1, 17)
        return len(self.data) >= l4 + 14 and bool(self.data[l4 + 13] & 0x06)

    @property
    def addresses(self) -> tuple[str, str] | None:
        """(source, destination) of an IPv4 or IPv6 frame; None for others (ARP and the like)."""
        packet = self.packet
        return None if packet is None else (packet.src, packet.dst)

    @property
    def sockets(self) -> tuple[str, str] | None:
        """("src:port", "dst:port") of a TCP or UDP frame ("[src]:port" for IPv6); None for others."""
        packet = self.packet
        if packet is None or packet.protocol not in (6, 17) or len(self.data) < packet.offset + 4:
            return None
        sport, dport = struct.unpack_from("!HH", self.data, packet.offset)
        return endpoint(packet.src, sport), endpoint(packet.dst, dport)

    def summary(self) -> str | None:
        """`src > dst proto flags`, or None for frames that are not IP (ARP and the like)."""
        packet = self.packet
        if packet is None:
            return None
        src, dst, proto, l4 = packet.src, packet.dst, packet.protocol, packet.offset
        if self.sockets is not None:
            text = " > ".join(self.sockets)
            if proto == 6 and len(self.data) >= l4 + 14:
                flags = self.data[l4 + 13]
                return f"{text} tcp [{''.join(c for bit, c in _TCP_FLAGS if flags & bit)}]"
            return f"{text} udp"
        if proto in (1, IPPROTO_ICMPV6) and len(self.data) >= l4 + 2:
            name = "icmp" if proto == 1 else "icmp6"
            return f"{src} > {dst} {name} type {self.data[l4]} code {self.data[l4 + 1]}"
        return f"{src} > {dst} proto {proto}"


# ICMPv6 messages that answer a probe: errors (types below 128, RFC 4443) and echo request and reply.
_ICMPV6_TOLD = {*range(128), 128, 129}


@dataclass(frozen=True)
class _Watched:
    """A namespace's capture: the actor it is, and the interfaces whose frames are kept."""

    actor: str
    interfaces: frozenset[str]


class Captures(SocketLoop):
    def __init__(self) -> None:
        super().__init__("capture")
        self.frames: list[Frame] = []
        # Which sockets have frames waiting, asked of them all at once: a probe drains those, not a hundred nodes'.
        self._waiting = select.poll()
        self._by_fd: dict[int, tuple[socket.socket, _Watched]] = {}

    def add(self, actor: str, netns: str, interfaces: set[str] | frozenset[str], ethertype: int = ETH_P_ALL) -> None:
        """Capture these interfaces of the actor's namespace: every frame, or (`ethertype` other than ETH_P_ALL)
        the frames of that type it receives, which the kernel alone picks out (a socket of one type is not shown
        the frames its host sends)."""

        def make() -> socket.socket:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ethertype))
            # Kernel timestamps: frames from different interfaces are read in any order, then sorted.
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            return sock

        sock, watched = in_netns(netns, make), _Watched(actor, frozenset(interfaces))
        self.register(sock, watched)
        self._by_fd[sock.fileno()] = sock, watched
        self._waiting.register(sock, select.POLLIN)

    def mark(self) -> int:
        with self._lock:
            return len(self.frames)

    def close_sockets(self, sockets: list[socket.socket]) -> None:
        """Side by side: a packet socket's close waits for an RCU grace period (packet_release calls
        synchronize_net, net/packet/af_packet.c), some 12 ms here. One after another, a hundred nodes' took 1.2 s;
        closed together, their waits share grace periods (44 ms)."""
        with ThreadPoolExecutor(max_workers=min(CLOSERS, len(sockets) or 1), thread_name_prefix="capture") as pool:
            for _ in pool.map(socket.socket.close, sockets):
                pass

    def forget(self) -> None:
        """Drop every frame so far (a live lab between probes: what users send meanwhile is not kept). No mark
        taken before stays valid."""
        with self._lock:
            self._drain_waiting()
            self.frames.clear()

    def since(self, mark: int) -> list[Frame]:
        # Whatever still waits in a socket queue belongs to the probe that just ended: drain it here.
        with self._lock:
            self._drain_waiting()
            return sorted(self.frames[mark:], key=lambda f: f.at)

    def _drain_waiting(self) -> None:
        for fd, _ in self._waiting.poll(0):
            self._drain(*self._by_fd[fd])

    def handle(self, sock: socket.socket, watched: _Watched) -> None:
        with self._lock:
            self._drain(sock, watched)

    def _drain(self, sock: socket.socket, watched: _Watched) -> None:
        while True:
            try:
                data, ancillary, _, addr = sock.recvmsg(65535, 64)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if addr[0] not in watched.interfaces:
                continue
            if addr[3] != ARPHRD_ETHER:
                # A link without a MAC header (an ipip tunnel): give the frame an empty one.
                data = bytes(12) + struct.pack("!H", addr[1]) + data
            self.frames.append(Frame(watched.actor, addr[0], addr[2] == PACKET_OUTGOING, _stamp(ancillary), data))


def _stamp(ancillary: list[tuple[int, int, bytes]]) -> float:
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanos = struct.unpack("qq", data[:16])
            return seconds + nanos / 1e9
    return time.time()


class CaptureError(NamespaceError):
    """A capture could not be written where --pcap said: reported like any failure of the run's surroundings."""


_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_O_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def pcap_dir(text: str) -> Path:
    """--pcap DIR, checked before anything is built: made when missing, refused when it is a symlink, no directory
    or not writable. Its real path comes back: write_pcaps opens each part of it without following symlinks."""
    path = Path(text).absolute()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        pass  # something other than a directory is there: named below
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot make directory {text}: {exc.strerror}") from None
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        raise argparse.ArgumentTypeError(f"{text} is a symlink: give the directory it points to")
    if not stat.S_ISDIR(info.st_mode):
        raise argparse.ArgumentTypeError(f"{text} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=path):  # access() says yes to root even where writing fails
            pass
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot write in {text}: {exc.strerror}") from None
    return Path(os.path.realpath(path))


def _open_directory(directory: Path) -> int:
    """An fd of `directory`, each part opened (made when missing) from / down, never through a symlink."""
    parts = directory.absolute().parts[1:]
    if ".." in parts:
        raise CaptureError(f"{directory}: a capture directory may not climb with ..")
    fd = os.open("/", _O_DIR)
    try:
        for part in parts:
            try:
                below = os.open(part, _O_DIR, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o755, dir_fd=fd)
                below = os.open(part, _O_DIR, dir_fd=fd)
            os.close(fd)
            fd = below
    except OSError as exc:
        os.close(fd)
        raise CaptureError(
            f"cannot open the capture directory {directory} (a symlink on the way?): {exc.strerror}"
        ) from None
    return fd


def _create(dir_fd: int, name: str) -> int:
    """A new file `name` (one of an earlier run with the same --pcap DIR is replaced; a symlink is never followed)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)  # a symlink itself, not what it points to
    return os.open(name, _O_NEW, 0o644, dir_fd=dir_fd)


def write_file(directory: Path, name: str, data: bytes) -> Path:
    """DIR/name, the directory opened from / down and the file created, never through a symlink."""
    dir_fd = _open_directory(directory)
    try:
        try:
            fd = _create(dir_fd, name)
        except OSError as exc:
            raise CaptureError(f"cannot write {directory / name}: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    finally:
        os.close(dir_fd)
    return directory / name


def write_pcaps(frames: list[Frame], directory: Path) -> list[Path]:
    """One pcap per interface (each a plain Ethernet capture Wireshark opens directly)."""
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    by_if: dict[str, list[Frame]] = {}
    for frame in frames:
        by_if.setdefault(f"{frame.actor}-{frame.ifname}", []).append(frame)
    dir_fd = _open_directory(directory)
    paths = []
    try:
        for name, group in by_if.items():
            packets = []
            for frame in group:
                pkt = Ether(frame.data)
                pkt.time = frame.at
                packets.append(pkt)
            path = directory / f"{name}.pcap"
            try:
                handle = os.fdopen(_create(dir_fd, path.name), "wb")
            except OSError as exc:
                raise CaptureError(f"cannot write {path}: {exc.strerror}") from None
            with handle:
                wrpcap(handle, packets)
            paths.append(path)
    finally:
        os.close(dir_fd)
    return paths
