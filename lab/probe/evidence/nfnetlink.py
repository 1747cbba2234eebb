"""nf_tables' netlink messages as the kernel lays them out (include/uapi/linux/netlink.h, netfilter/nfnetlink.h,
netfilter/nf_tables.h): what the trace reader (nltrace.py) and the lab-trace table (trace_table.py) share."""

from __future__ import annotations

import struct

NETLINK_NETFILTER = 12
NFNL_SUBSYS_NFTABLES = 10
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP, NLM_F_CREATE, NLM_F_APPEND = 0x1, 0x4, 0x300, 0x400, 0x800

HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port
NFGEN = struct.Struct("=BBH")  # nfgenmsg: family, version, resource id


def request(kind: int, flags: int, sequence: int, family: int, attrs: bytes, resource: int = 0) -> bytes:
    """One message: its header, the nfgenmsg (family, version 0, `resource` in network order), the attributes."""
    body = NFGEN.pack(family, 0, resource) + attrs
    return HEADER.pack(HEADER.size + len(body), kind, NLM_F_REQUEST | flags, sequence, 0) + body


def messages(data: bytes) -> list[tuple[int, int, bytes]]:
    """A netlink datagram's messages: (type, sequence number, body after the header)."""
    found = []
    offset = 0
    while offset + HEADER.size <= len(data):
        length, kind, _, sequence, _ = HEADER.unpack_from(data, offset)
        if length < HEADER.size or offset + length > len(data):
            break
        found.append((kind, sequence, data[offset + HEADER.size : offset + length]))
        offset += (length + 3) & ~3
    return found


def status(kind: int, body: bytes) -> int:
    """The error number an NLMSG_ERROR or NLMSG_DONE message carries (0: done, or acknowledged); 0 for others."""
    return -struct.unpack_from("=i", body)[0] if kind in (NLMSG_DONE, NLMSG_ERROR) and len(body) >= 4 else 0
