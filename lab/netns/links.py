"""Namespaces and links by netlink: each namespace gets its own pyroute2 socket, opened inside it.

Every interface is created directly in the namespace it belongs to (a veth's peer goes straight
into the peer namespace), so nothing ever appears in the host's namespace, even for an instant.
"""

from __future__ import annotations

from contextlib import ExitStack

from pyroute2 import IPRoute, netns

from lab.netns.enter import write_sysctls


class NetBuilder:
    def __init__(self, prefix: str, stack: ExitStack) -> None:
        self.prefix = prefix
        self.stack = stack
        self.ipr: dict[str, IPRoute] = {}
        self.names: dict[str, str] = {}

    def ns(self, actor: str) -> str:
        return self.names[actor]

    def open(self, actor: str) -> IPRoute:
        name = f"{self.prefix}-{actor}"
        netns.create(name)
        self.names[actor] = name
        # No IPv6: router solicitations and MLD would only add noise to every capture.
        write_sysctls(name, {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"})
        ipr = self.stack.enter_context(IPRoute(netns=name))
        self.ipr[actor] = ipr
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        return ipr

    def index(self, actor: str, ifname: str) -> int:
        return self.ipr[actor].link_lookup(ifname=ifname)[0]

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

    def bridge(self, actor: str, ifname: str, address: str, prefixlen: int, **extra: object) -> int:
        # No multicast snooping: the bridge would join 224.0.0.106 and send IGMP reports into every capture.
        self.ipr[actor].link("add", ifname=ifname, kind="bridge", br_mcast_snooping=0)
        return self.up(actor, ifname, address, prefixlen, **extra)
