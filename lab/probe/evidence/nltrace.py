"""The kernel's nftables trace read straight from its netlink group, rules named by handle.

`nft monitor trace` loads the namespace's whole ruleset into its cache before it subscribes (to print each rule
met as text): 40-100 ms of work per node at a thousand endpoints, on every node of a cluster before its first
probe. iptables-nft's evidence (xtrace.py) needs from the trace only which packet each event belongs to, the
table, chain and handle of each rule met and each policy applied; the rules' text comes from xtables-monitor. So
this reader subscribes a NETLINK_NETFILTER socket of the namespace to NFNLGRP_NFTRACE itself and keeps each
event as a TraceRecord: opening it costs a socket.

The message layout is the kernel's uapi one (include/uapi/linux/netfilter/nf_tables.h, nfnetlink.h); the
kernel sends the packet's headers (network, transport) with the first event of each base chain the packet
traverses (nft_trace_notify, net/netfilter/nf_tables_trace.c).
"""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass

from lab.probe.evidence.base import EvidenceError
from lab.probe.evidence.nfnetlink import (
    NETLINK_NETFILTER,
    NFGEN,
    NFNL_SUBSYS_NFTABLES,
    NLM_F_DUMP,
    NLMSG_DONE,
    messages,
    request,
    status,
)
from lab.probe.evidence.nftrace import MARKER_DATA, MARKER_PORT, send_markers
from lab.probe.evidence.trace_table import add_trace_table
from lab.realize.enter import in_netns
from lab.realize.rtnl import attribute

SOL_NETLINK, NETLINK_ADD_MEMBERSHIP = 270, 1
SO_RCVBUFFORCE = 33
NFNLGRP_NFTRACE = 9
NFT_MSG_NEWRULE, NFT_MSG_GETRULE, NFT_MSG_TRACE = 6, 7, 17
TRACE_MESSAGE = NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_TRACE
RULE_MESSAGE = NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWRULE
# enum nft_rule_attributes
NFTA_RULE_TABLE, NFTA_RULE_CHAIN, NFTA_RULE_HANDLE = 1, 2, 3
# enum nft_trace_attributes
NFTA_TRACE_TABLE, NFTA_TRACE_CHAIN, NFTA_TRACE_RULE_HANDLE, NFTA_TRACE_TYPE, NFTA_TRACE_VERDICT = 1, 2, 3, 4, 5
NFTA_TRACE_ID, NFTA_TRACE_NETWORK_HEADER, NFTA_TRACE_TRANSPORT_HEADER = 6, 8, 9
NFTA_TRACE_NFPROTO, NFTA_TRACE_POLICY = 15, 16
NFTA_VERDICT_CODE = 1
# enum nft_trace_types
NFT_TRACETYPE_POLICY, NFT_TRACETYPE_RETURN, NFT_TRACETYPE_RULE = 1, 2, 3
# The table's family (nfgenmsg), named as nft names it.
FAMILIES = {1: "inet", 2: "ip", 3: "arp", 5: "netdev", 7: "bridge", 10: "ip6"}
NFPROTO_IPV4 = 2
NFPROTO = {"ip": NFPROTO_IPV4, "ip6": 10}  # a table's family, by nft's name, as netlink numbers it
POLICIES = {0: "DROP", 1: "ACCEPT"}  # NF_DROP, NF_ACCEPT: a base chain's only policies
# nft reads its events with this buffer; a burst (a routing loop's 64 hops) fits in it.
RECEIVE_BUFFER = 16 << 20

_ATTR = struct.Struct("=HH")
_LOOPBACK = socket.inet_aton("127.0.0.1")  # the marker is IPv4 in clusters of every family (nftrace._marker_socket)
_UDP, _ICMP = 17, 1
_QUOTED_LENGTH = 20 + 8 + len(MARKER_DATA)  # the marker's IP datagram, as the port unreachable quotes it


@dataclass(frozen=True)
class TracePacket:
    """The headers the kernel sent with an event: the network header (up to 40 bytes) and, when the packet's
    transport protocol was found, its first 20 bytes."""

    nfproto: int
    network: bytes
    transport: bytes

    def _loopback_ipv4(self, protocol: int) -> bool:
        net = self.network
        return (
            self.nfproto == NFPROTO_IPV4
            and len(net) >= 20
            and net[0] >> 4 == 4
            and net[9] == protocol
            and net[12:16] == _LOOPBACK
            and net[16:20] == _LOOPBACK
        )

    def udp_ports(self) -> tuple[int, int] | None:
        """(source, destination) of an IPv4 UDP datagram."""
        if self.nfproto != NFPROTO_IPV4 or len(self.network) < 20 or self.network[9] != _UDP:
            return None
        if len(self.transport) < 4:
            return None
        source, destination = struct.unpack_from("!HH", self.transport)
        return source, destination

    def is_marker(self) -> bool:
        """The tracer's own packets: a marker (UDP from loopback to loopback's discard port) and the port
        unreachable it draws, known by the datagram it quotes (an IPv4 header of the marker's length, UDP). A
        probe's own loopback traffic (a node's connection to 127.0.0.1:NODEPORT, and the errors answering it) is
        traced like any other."""
        if self._loopback_ipv4(_UDP):
            return len(self.transport) >= 4 and struct.unpack_from("!H", self.transport, 2)[0] == MARKER_PORT
        if not self._loopback_ipv4(_ICMP) or len(self.transport) < 20 or self.transport[:2] != b"\x03\x03":
            return False
        quoted = self.transport[8:20]  # what nft prints as @th,64,96: the quoted header's first 12 bytes
        return (
            quoted[:2] == b"\x45\x00"
            and struct.unpack_from("!H", quoted, 2)[0] == _QUOTED_LENGTH
            and (quoted[9] == _UDP)
        )


@dataclass(frozen=True)
class TraceRecord:
    """One trace event: which packet (the kernel's trace id, its headers when this event carries them), where
    (the table's family, table, chain), what: a rule met (its handle), a policy applied, a return."""

    trace_id: int
    family: str
    table: str
    chain: str
    kind: int  # NFT_TRACETYPE_*
    handle: int = -1  # the rule's, for a rule event
    policy: str = ""  # ACCEPT or DROP, for a policy event
    packet: TracePacket | None = None


def _attributes(data: bytes, start: int, end: int) -> dict[int, bytes]:
    found = {}
    while start + 4 <= end:
        length, kind = _ATTR.unpack_from(data, start)
        if length < 4:
            break
        found[kind & 0x3FFF] = data[start + 4 : start + length]  # without NLA_F_NESTED / NLA_F_NET_BYTEORDER
        start += (length + 3) & ~3
    return found


def _record(family: int, attrs: dict[int, bytes]) -> TraceRecord:
    kind = struct.unpack("!I", attrs.get(NFTA_TRACE_TYPE, b"\0\0\0\0"))[0]
    handle = struct.unpack("!Q", attrs[NFTA_TRACE_RULE_HANDLE])[0] if NFTA_TRACE_RULE_HANDLE in attrs else -1
    policy = ""
    if kind == NFT_TRACETYPE_POLICY:
        if NFTA_TRACE_POLICY in attrs:
            code = struct.unpack("!I", attrs[NFTA_TRACE_POLICY])[0]
        else:  # kernels before NFTA_TRACE_POLICY sent the policy as the verdict
            verdict = _attributes(attrs.get(NFTA_TRACE_VERDICT, b""), 0, len(attrs.get(NFTA_TRACE_VERDICT, b"")))
            code = struct.unpack("!i", verdict.get(NFTA_VERDICT_CODE, b"\0\0\0\1"))[0]
        policy = POLICIES.get(code, str(code))
    packet = None
    if NFTA_TRACE_NETWORK_HEADER in attrs:
        nfproto = struct.unpack("!I", attrs.get(NFTA_TRACE_NFPROTO, b"\0\0\0\0"))[0]
        packet = TracePacket(nfproto, attrs[NFTA_TRACE_NETWORK_HEADER], attrs.get(NFTA_TRACE_TRANSPORT_HEADER, b""))
    return TraceRecord(
        trace_id=struct.unpack("!I", attrs.get(NFTA_TRACE_ID, b"\0\0\0\0"))[0],
        family=FAMILIES.get(family, str(family)),
        table=attrs.get(NFTA_TRACE_TABLE, b"").rstrip(b"\0").decode(errors="replace"),
        chain=attrs.get(NFTA_TRACE_CHAIN, b"").rstrip(b"\0").decode(errors="replace"),
        kind=kind,
        handle=handle,
        policy=policy,
        packet=packet,
    )


def parse_messages(data: bytes) -> list[TraceRecord]:
    """The trace events of one netlink datagram (anything else in it is skipped)."""
    return [
        _record(NFGEN.unpack_from(body)[0], _attributes(body, NFGEN.size, len(body)))
        for kind, _, body in messages(data)
        if kind == TRACE_MESSAGE
    ]


def _request_socket() -> socket.socket:
    """In the namespace's thread: a socket to ask the namespace's nftables."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.bind((0, 0))
    return sock


class ChainLister:
    """Each chain's rule handles in the chain's order, asked of the kernel as `nft -a list chain` asks (a dump of
    the chain's rules) without a process: a probe's first pass through a node lists the chains its hits need
    ordered by, on each node it crosses."""

    def __init__(self, netns: str) -> None:
        self.netns = netns
        self._sock = in_netns(netns, _request_socket)
        self._sequence = 0

    def handles(self, family: int, table: str, chain: str) -> list[int]:
        """The chain's handles, in order; none when there is no such chain."""
        self._sequence += 1
        attrs = attribute(NFTA_RULE_TABLE, table.encode() + b"\0") + attribute(NFTA_RULE_CHAIN, chain.encode() + b"\0")
        self._sock.send(request(NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_GETRULE, NLM_F_DUMP, self._sequence, family, attrs))
        handles = []
        while True:
            for kind, sequence, message in messages(self._sock.recv(1 << 16)):
                if sequence != self._sequence:
                    continue  # an answer to an earlier request cut short
                error = status(kind, message)
                if kind == NLMSG_DONE and not error:
                    return handles
                if error:
                    if error == errno.ENOENT:
                        return []
                    raise EvidenceError(
                        f"{self.netns}: listing {table} {chain} failed: {os.strerror(error)}: the rules' order "
                        "cannot be read"
                    )
                if kind == RULE_MESSAGE:
                    found = _attributes(message, NFGEN.size, len(message))
                    if NFTA_RULE_HANDLE in found:
                        handles.append(struct.unpack("!Q", found[NFTA_RULE_HANDLE])[0])

    def close(self) -> None:
        self._sock.close()


def _subscribed_socket() -> socket.socket:
    """In the namespace's thread: a socket on the namespace's nftables trace group, with nft's buffer."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER)
        sock.bind((0, 0))
        sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, NFNLGRP_NFTRACE)
    except BaseException:
        sock.close()
        raise
    return sock


class NetlinkTrace:
    """The nftables trace of one namespace (the lab-trace table, trace_table.py, sets nftrace on every packet), kept
    in order by a reader thread, with a barrier so that a probe's events are all read: a marker datagram sent
    through the hooks, waited for until its trace arrives."""

    def __init__(self, netns: str, traffic_between: bool = False) -> None:
        self.netns = netns
        self.traffic_between = traffic_between
        self.marker_port = 0
        self._records: list[TraceRecord] = []
        self._lost: list[int] = []  # where events were lost (the buffer overflowed): the record count then
        self._failed = ""  # why the reader stopped
        self._cond = threading.Condition()
        add_trace_table(netns)
        self._sock = in_netns(netns, _subscribed_socket)
        self._wake_read, self._wake_write = os.pipe()
        self._reader = threading.Thread(target=self._read, name=f"nftrace:{netns}", daemon=True)
        self._reader.start()
        try:
            self.barrier(timeout=60.0)
        except BaseException:
            self.close()  # no object is returned to close it later
            raise

    def _read(self) -> None:
        poller = select.poll()  # not select(): a cluster's backends take file descriptors past its limit of 1024
        poller.register(self._sock, select.POLLIN)
        poller.register(self._wake_read, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._wake_read in ready:
                return
            try:
                data = self._sock.recv(1 << 16)
            except OSError as exc:
                with self._cond:
                    if exc.errno == errno.ENOBUFS:  # the kernel dropped events: who reads past here must know
                        self._lost.append(len(self._records))
                        continue
                    self._failed = f"stopped: reading the kernel's events failed ({exc.strerror})"
                    self._cond.notify_all()
                return
            records = parse_messages(data)
            with self._cond:
                self._records.extend(records)
                self._cond.notify_all()

    def count(self) -> int:
        with self._cond:
            return len(self._records)

    def _marker_arrived(self, port: int, start: int, wait: float) -> bool:
        """Whether the marker from `port` was traced, from record `start` on, within `wait` seconds."""
        deadline = time.monotonic() + wait
        with self._cond:
            while not any(
                r.packet is not None and r.packet.udp_ports() == (port, MARKER_PORT) for r in self._records[start:]
            ):
                start = len(self._records)
                left = deadline - time.monotonic()
                if left <= 0 or self._failed:
                    return False
                self._cond.wait(timeout=left)
            return True

    def barrier(self, timeout: float = 10.0) -> None:
        """Every event before now has arrived (see nftrace.send_markers); the marker's port in `marker_port`."""
        self.marker_port = send_markers(
            self.netns, self.count, self._marker_arrived, lambda: self._failed, "the trace reader", timeout
        )

    def mark(self) -> int:
        """Where a probe's events start (after a barrier when packets flow between probes: see KernelTrace)."""
        if self.traffic_between:
            self.barrier()
        return self.count()

    def records(self, mark: int) -> list[TraceRecord]:
        """The events since `mark`; an error if some were lost since."""
        with self._cond:
            if lost := [at for at in self._lost if at >= mark]:
                raise EvidenceError(
                    f"{self.netns}: the kernel dropped trace events ({len(lost)} times its {RECEIVE_BUFFER >> 20} "
                    "MiB buffer overflowed): the rules that acted cannot be read"
                )
            return self._records[mark:]

    def close(self) -> None:
        os.write(self._wake_write, b"x")
        self._reader.join()
        self._sock.close()
        os.close(self._wake_read)
        os.close(self._wake_write)
