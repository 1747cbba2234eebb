"""Namespaces and links by netlink: each namespace gets its own pyroute2 socket, opened inside it.

Every interface is created directly in the namespace it belongs to (a veth's peer goes straight
into the peer namespace), so nothing ever appears in the host's namespace, even for an instant.
"""

from __future__ import annotations

import socket
from contextlib import ExitStack
from pathlib import Path

from pyroute2 import IPRoute

from lab.realize.enter import create_netns
from lab.realize.runs import record

NETLINK_ROUTE = 0


class NetBuilder:
    def __init__(self, prefix: str, stack: ExitStack) -> None:
        self.prefix = prefix
        self.stack = stack
        self.ipr: dict[str, IPRoute] = {}
        self.names: dict[str, str] = {}
        self._indexes: dict[tuple[str, str], int] = {}

    def ns(self, actor: str) -> str:
        return self.names[actor]

    def open(self, actor: str) -> IPRoute:
        name = f"{self.prefix}-{actor}"
        record(self.prefix, name)  # first, so that a run killed at any moment leaves nothing `lab down` ignores
        # One thread makes the namespace and, from inside it, turns IPv6 off (router solicitations and MLD would
        # only add noise to every capture) and opens the netlink socket, so every request acts there.
        sock = create_netns(name, _no_ipv6_netlink)
        assert sock is not None
        self.names[actor] = name
        ipr = self.stack.enter_context(IPRoute(fileno=sock.detach()))
        self.ipr[actor] = ipr
        ipr.link("set", index=self.index(actor, "lo"), state="up")
        return ipr

    def index(self, actor: str, ifname: str) -> int:
        # An interface keeps its index for life: ask the kernel once (a single-link get, not a dump).
        key = (actor, ifname)
        if key not in self._indexes:
            self._indexes[key] = self.ipr[actor].link("get", ifname=ifname)[0]["index"]
        return self._indexes[key]

    def up(self, actor: str, ifname: str, address: str | None = None, prefixlen: int = 32, **extra: object) -> int:
        ipr = self.ipr[actor]
        idx = self.index(actor, ifname)
        if address:
            ipr.addr("add", index=idx, address=address, prefixlen=prefixlen)
        ipr.link("set", index=idx, state="up", **extra)
        return idx

    def veth(self, actor: str, ifname: str, peer_actor: str, peer_ifname: str) -> None:
        self.ipr[actor].link(
            "add", ifname=ifname, kind="veth", peer={"ifname": peer_ifname, "net_ns_fd": self.ns(peer_actor)}
        )

    def bridge(self, actor: str, ifname: str, address: str, prefixlen: int) -> int:
        # No multicast snooping: the bridge would join 224.0.0.106 and send IGMP reports into every capture.
        self.ipr[actor].link("add", ifname=ifname, kind="bridge", br_mcast_snooping=0)
        return self.up(actor, ifname, address, prefixlen)


def _no_ipv6_netlink() -> socket.socket:
    """In a new namespace's own thread: IPv6 off, and a netlink socket of that namespace."""
    for key in ("all", "default"):
        Path(f"/proc/sys/net/ipv6/conf/{key}/disable_ipv6").write_text("1")
    return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_ROUTE)
