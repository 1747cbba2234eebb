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
import socket
import stat
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from lab.install.loop import SocketLoop
from lab.realize.enter import NamespaceError, in_netns

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
PACKET_OUTGOING = 4
ARPHRD_ETHER = 1
VXLAN_PORT = 4789
SO_TIMESTAMPNS = 35
_TCP_FLAGS = [(0x02, "S"), (0x10, "."), (0x01, "F"), (0x04, "R"), (0x08, "P")]


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

    @property
    def opens_or_ends(self) -> bool:
        """SYN, SYN-ACK, RST, any UDP or ICMP: the frames that tell where a connection attempt went."""
        if len(self.data) < 34 or struct.unpack_from("!H", self.data, 12)[0] != ETH_P_IP:
            return False
        proto = self.data[23]
        l4 = 14 + (self.data[14] & 0x0F) * 4
        if proto == 17 and len(self.data) >= l4 + 4 and struct.unpack_from("!H", self.data, l4 + 2)[0] == VXLAN_PORT:
            return False  # an encapsulation: the packet inside is seen on the VXLAN device
        if proto != 6:
            return proto in (1, 17)
        return len(self.data) >= l4 + 14 and bool(self.data[l4 + 13] & 0x06)

    @property
    def addresses(self) -> tuple[str, str] | None:
        """(source, destination) of an IPv4 frame; None for others (ARP and the like)."""
        if len(self.data) < 34 or struct.unpack_from("!H", self.data, 12)[0] != ETH_P_IP:
            return None
        return socket.inet_ntoa(self.data[26:30]), socket.inet_ntoa(self.data[30:34])

    @property
    def sockets(self) -> tuple[str, str] | None:
        """("src:port", "dst:port") of a TCP or UDP frame; None for others."""
        if self.addresses is None or self.data[23] not in (6, 17):
            return None
        l4 = 14 + (self.data[14] & 0x0F) * 4
        if len(self.data) < l4 + 4:
            return None
        (src, dst), (sport, dport) = self.addresses, struct.unpack_from("!HH", self.data, l4)
        return f"{src}:{sport}", f"{dst}:{dport}"

    def summary(self) -> str | None:
        """`src > dst proto flags`, or None for frames that are not IPv4 (ARP and the like)."""
        if self.addresses is None:
            return None
        src, dst = self.addresses
        proto = self.data[23]
        l4 = 14 + (self.data[14] & 0x0F) * 4
        if self.sockets is not None:
            text = " > ".join(self.sockets)
            if proto == 6 and len(self.data) >= l4 + 14:
                flags = self.data[l4 + 13]
                return f"{text} tcp [{''.join(c for bit, c in _TCP_FLAGS if flags & bit)}]"
            return f"{text} udp"
        if proto == 1 and len(self.data) >= l4 + 2:
            return f"{src} > {dst} icmp type {self.data[l4]} code {self.data[l4 + 1]}"
        return f"{src} > {dst} proto {proto}"


@dataclass(frozen=True)
class _Watched:
    """A namespace's capture: the actor it is, and the interfaces whose frames are kept."""

    actor: str
    interfaces: frozenset[str]


class Captures(SocketLoop):
    def __init__(self) -> None:
        super().__init__("capture")
        self.frames: list[Frame] = []

    def add(self, actor: str, netns: str, interfaces: set[str] | frozenset[str]) -> None:
        """Capture these interfaces of the actor's namespace."""

        def make() -> socket.socket:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            # Kernel timestamps: frames from different interfaces are read in any order, then sorted.
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            return sock

        self.register(in_netns(netns, make), _Watched(actor, frozenset(interfaces)))

    def mark(self) -> int:
        with self._lock:
            return len(self.frames)

    def forget(self) -> None:
        """Drop every frame so far (a live lab between probes: what users send meanwhile is not kept). No mark
        taken before stays valid."""
        with self._lock:
            for sock, watched in self._sockets.items():
                self._drain(sock, watched)
            self.frames.clear()

    def since(self, mark: int) -> list[Frame]:
        # Whatever still waits in a socket queue belongs to the probe that just ended: drain it here.
        with self._lock:
            for sock, watched in self._sockets.items():
                self._drain(sock, watched)
            return sorted(self.frames[mark:], key=lambda f: f.at)

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
