"""The nfacct objects a dump's `-m nfacct --nfacct-name X` rules count into, created in the node namespace.

kube-proxy 1.31+ creates them over netlink before it writes such rules (pkg/proxy/metrics); on the node they
exist, in a fresh namespace they do not, and iptables-restore refuses a rule naming a missing one. They are
created here as kube-proxy does (NFNL_MSG_ACCT_NEW), so the replayed rules are the node's, unchanged.
"""

from __future__ import annotations

import errno
import os
import socket
import struct

from lab.install.tools import InstallError
from lab.realize.enter import in_netns

NETLINK_NETFILTER = 12
NFNL_SUBSYS_ACCT = 7
NFNL_MSG_ACCT_NEW = 0
NFACCT_NAME = 1
NLM_F_REQUEST, NLM_F_ACK, NLM_F_CREATE = 0x1, 0x4, 0x400
NLMSG_ERROR = 2
_HEADER = struct.Struct("=IHHII")  # struct nlmsghdr


def _attribute(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def new_object_message(name: str, sequence: int) -> bytes:
    """NFNL_MSG_ACCT_NEW for one object: nlmsghdr, nfgenmsg (AF_UNSPEC, version 0, res_id 0), NFACCT_NAME."""
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, 0) + _attribute(NFACCT_NAME, name.encode() + b"\0")
    kind = (NFNL_SUBSYS_ACCT << 8) | NFNL_MSG_ACCT_NEW
    return _HEADER.pack(_HEADER.size + len(body), kind, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE, sequence, 0) + body


def _create(names: list[str]) -> None:
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER) as sock:
        sock.bind((0, 0))
        for sequence, name in enumerate(names, 1):
            sock.send(new_object_message(name, sequence))
            reply = sock.recv(4096)
            kind = _HEADER.unpack_from(reply)[1]
            code = -struct.unpack_from("=i", reply, _HEADER.size)[0] if kind == NLMSG_ERROR else 0
            if code not in (0, errno.EEXIST):
                raise InstallError(
                    f"the rules count packets with -m nfacct ({name}) and this kernel would not create that nfacct "
                    f"object: {os.strerror(code)} (nfnetlink_acct / xt_nfacct missing?)"
                )


def create_nfacct_objects(netns: str, names: list[str]) -> None:
    if names:
        in_netns(netns, lambda: _create(names))
