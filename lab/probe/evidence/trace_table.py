"""The lab-trace table, made over netlink: `inet lab-trace`, hooked at prerouting and output before conntrack
(priority -350), sets nftrace on every packet, so that the kernel reports each rule a packet meets in every table
of the namespace. What nft makes of

    table inet lab-trace {
        chain prerouting { type filter hook prerouting priority -350; meta nftrace set 1; }
        chain output { type filter hook output priority -350; meta nftrace set 1; }
    }

sent as one transaction by the lab itself: at a hundred nodes, an `nft -f` per node cost 8 ms of CPU each at the
probe session's start. The transaction adds the table, deletes it and adds it again, so that every tracer of a
namespace may send it and the table is the one above, whatever an earlier tracer left.

The layout is the kernel's uapi one (include/uapi/linux/netfilter/nf_tables.h, nfnetlink.h); the expressions are
the ones `nft --debug=netlink` shows for `meta nftrace set 1`: `[ immediate reg 1 0x00000001 ]`, `[ meta set
nftrace with reg 1 ]`.
"""

from __future__ import annotations

import errno
import os
import socket
import struct

from lab.probe.evidence.base import EvidenceError
from lab.probe.evidence.nfnetlink import (
    NETLINK_NETFILTER,
    NFNL_SUBSYS_NFTABLES,
    NLM_F_ACK,
    NLM_F_APPEND,
    NLM_F_CREATE,
    NLMSG_ERROR,
    messages,
    request,
    status,
)
from lab.realize.enter import in_netns
from lab.realize.rtnl import attribute

TABLE = "lab-trace"
PRIORITY = -350  # before conntrack (-200) and every table kube-proxy or iptables-nft makes
CHAINS = (("prerouting", 0), ("output", 3))  # chain, hook: NF_INET_PRE_ROUTING, NF_INET_LOCAL_OUT

NFNL_MSG_BATCH_BEGIN, NFNL_MSG_BATCH_END = 0x10, 0x11
NFT_MSG_NEWTABLE, NFT_MSG_DELTABLE, NFT_MSG_NEWCHAIN, NFT_MSG_NEWRULE = 0, 2, 3, 6
NLA_F_NESTED = 0x8000
NFPROTO_INET = 1
NFTA_TABLE_NAME = 1
NFTA_CHAIN_TABLE, NFTA_CHAIN_NAME, NFTA_CHAIN_HOOK, NFTA_CHAIN_TYPE = 1, 3, 4, 7
NFTA_HOOK_HOOKNUM, NFTA_HOOK_PRIORITY = 1, 2
NFTA_RULE_TABLE, NFTA_RULE_CHAIN, NFTA_RULE_EXPRESSIONS = 1, 2, 4
NFTA_LIST_ELEM = 1
NFTA_EXPR_NAME, NFTA_EXPR_DATA = 1, 2
NFTA_IMMEDIATE_DREG, NFTA_IMMEDIATE_DATA = 1, 2
NFTA_DATA_VALUE = 1
NFTA_META_KEY, NFTA_META_SREG = 2, 3
NFT_META_NFTRACE = 12  # enum nft_meta_keys
NFT_REG_1 = 1


def _name(text: str) -> bytes:
    return text.encode() + b"\0"


def _u32(kind: int, value: int) -> bytes:
    """A big-endian 32-bit attribute (nf_tables' numbers are in network order), negative ones as two's complement."""
    return attribute(kind, struct.pack("!I", value & 0xFFFFFFFF))


def _nested(kind: int, *attrs: bytes) -> bytes:
    return attribute(kind | NLA_F_NESTED, b"".join(attrs))


def _expression(name: str, *data: bytes) -> bytes:
    return _nested(NFTA_LIST_ELEM, attribute(NFTA_EXPR_NAME, _name(name)), _nested(NFTA_EXPR_DATA, *data))


def _messages() -> list[tuple[int, int, bytes]]:
    """The transaction's messages: (nf_tables message, flags, attributes)."""
    table = attribute(NFTA_TABLE_NAME, _name(TABLE))
    messages = [
        (NFT_MSG_NEWTABLE, NLM_F_CREATE, table),
        (NFT_MSG_DELTABLE, 0, table),
        (NFT_MSG_NEWTABLE, NLM_F_CREATE, table),
    ]
    nftrace = _nested(
        NFTA_RULE_EXPRESSIONS,
        _expression(
            "immediate",
            _u32(NFTA_IMMEDIATE_DREG, NFT_REG_1),
            _nested(NFTA_IMMEDIATE_DATA, attribute(NFTA_DATA_VALUE, b"\x01")),
        ),
        _expression("meta", _u32(NFTA_META_KEY, NFT_META_NFTRACE), _u32(NFTA_META_SREG, NFT_REG_1)),
    )
    for chain, hook in CHAINS:
        hooked = _nested(NFTA_CHAIN_HOOK, _u32(NFTA_HOOK_HOOKNUM, hook), _u32(NFTA_HOOK_PRIORITY, PRIORITY))
        messages.append(
            (
                NFT_MSG_NEWCHAIN,
                NLM_F_CREATE,
                attribute(NFTA_CHAIN_TABLE, _name(TABLE))
                + attribute(NFTA_CHAIN_NAME, _name(chain))
                + hooked
                + attribute(NFTA_CHAIN_TYPE, _name("filter")),
            )
        )
        rule = attribute(NFTA_RULE_TABLE, _name(TABLE)) + attribute(NFTA_RULE_CHAIN, _name(chain)) + nftrace
        messages.append((NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, rule))
    return messages


def transaction() -> tuple[bytes, int]:
    """The batch to send (begin, the messages each asking for an acknowledgement, end), and how many
    acknowledgements to wait for."""
    batch = socket.AF_UNSPEC, b"", socket.htons(NFNL_SUBSYS_NFTABLES)
    table = _messages()
    parts = [request(NFNL_MSG_BATCH_BEGIN, 0, 1, *batch)]
    for sequence, (kind, flags, attrs) in enumerate(table, start=2):
        parts.append(request(NFNL_SUBSYS_NFTABLES << 8 | kind, flags | NLM_F_ACK, sequence, NFPROTO_INET, attrs))
    parts.append(request(NFNL_MSG_BATCH_END, 0, len(table) + 2, *batch))
    return b"".join(parts), len(table)


def _acknowledged(data: bytes) -> list[int]:
    """The error numbers of a datagram's acknowledgements (0: done)."""
    return [status(kind, body) for kind, _, body in messages(data) if kind == NLMSG_ERROR]


def add_trace_table(netns: str) -> None:
    """Make the lab-trace table in the namespace (or make it again, as it is above); an error saying what the
    kernel refused."""

    def send() -> list[int]:
        batch, expected = transaction()
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER) as sock:
            sock.bind((0, 0))
            sock.send(batch)
            codes: list[int] = []
            while len(codes) < expected and not any(codes):
                codes += _acknowledged(sock.recv(1 << 16))
            return codes

    if refused := [code for code in in_netns(netns, send) if code]:
        what = "nf_tables is not in this kernel" if refused[0] == errno.EOPNOTSUPP else os.strerror(refused[0])
        raise EvidenceError(f"{netns}: the kernel refused the {TABLE} table ({what}): no packet can be traced")
