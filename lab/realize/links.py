"""Namespaces and links by netlink: each namespace gets its own sockets, opened inside it: pyroute2's for the
few namespaces of nodes, the fabric and external hosts, raw batched requests (lab.realize.rtnl) for the many
alike ones of pods.

Every interface is created directly in the namespace it belongs to (a veth's peer goes straight
into the peer namespace), so nothing ever appears in the host's namespace, even for an instant.
"""

from __future__ import annotations

import socket
from contextlib import ExitStack
from functools import partial
from typing import Any

from pyroute2 import IPRoute
from pyroute2.ethtool import Ethtool

from lab.realize.enter import create_netns, create_netns_all, in_netns
from lab.realize.families import address as ip_address
from lab.realize.families import host_prefixlen, namespace_sysctls
from lab.realize.kernel_names import netns_part
from lab.realize.rtnl import IFA_F_NODAD, Batch
from lab.realize.runs import record
from lab.realize.terminate import deferred

NETLINK_ROUTE = 0
NUD_PERMANENT = 0x80


class Requests:
    """A pyroute2 IPRoute whose every request runs with SIGTERM deferred to its end (terminate.deferred)."""

    def __init__(self, ipr: IPRoute) -> None:
        self._ipr = ipr

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401  # whatever pyroute2's method takes and returns
        method = getattr(self._ipr, name)

        def request(*args: object, **kwargs: object) -> Any:  # noqa: ANN401
            with deferred():
                return method(*args, **kwargs)

        return request


class NetBuilder:
    """Namespaces of one run and their links; `ipv6` turns IPv6 on in every namespace it makes (without DAD,
    lab.realize.families), which a topology holding an IPv6 address needs."""

    def __init__(self, prefix: str, stack: ExitStack, ipv6: bool = False) -> None:
        self.prefix = prefix
        self.stack = stack
        self.ipv6 = ipv6
        self.ipr: dict[str, Requests] = {}
        self.names: dict[str, str] = {}
        self._indexes: dict[tuple[str, str], int] = {}
        self._raw: dict[str, socket.socket] = {}

    def ns(self, actor: str) -> str:
        return self.names[actor]

    def open(self, actor: str) -> Requests:
        name = f"{self.prefix}-{netns_part(actor)}"
        record(self.prefix, name)  # first, so that a run killed at any moment leaves nothing `lab down` ignores
        # One thread makes the namespace and, from inside it, sets IPv6 up as the run needs it (off, or on without
        # DAD) and opens the netlink socket, so every request acts there.
        sock = create_netns(name, partial(_new_namespace_netlink, self.ipv6))
        assert sock is not None
        self.names[actor] = name
        with deferred():  # its constructor makes an event loop; one left half-made prints a traceback when collected
            made = IPRoute(fileno=sock.detach())
        self.stack.callback(Requests(made).close)
        ipr = Requests(made)
        self.ipr[actor] = ipr
        ipr.link("set", index=self.index(actor, "lo"), state="up")
        return ipr

    def join(self, actor: str) -> None:
        """Requests into an actor's namespace that another builder of the run made (`ns` names it already)."""
        sock = in_netns(self.ns(actor), _netlink)
        with deferred():
            made = IPRoute(fileno=sock.detach())
        self.stack.callback(Requests(made).close)
        self.ipr[actor] = Requests(made)

    def open_all(self, actors: list[str]) -> dict[str, Batch]:
        """Namespaces for many actors at once (recorded in one write, made on every core), each with an empty
        batch of requests on its own raw netlink socket; its `lo` is not up yet (the caller's batch says so)."""
        names = [f"{self.prefix}-{netns_part(actor)}" for actor in actors]
        record(self.prefix, *names)
        self.names.update(zip(actors, names, strict=True))
        socks = create_netns_all(names, partial(_new_namespace_netlink, self.ipv6))
        for sock in socks:
            self.stack.callback(sock.close)
        return {actor: Batch(sock, name) for actor, name, sock in zip(actors, names, socks, strict=True)}

    def batch(self, actor: str) -> Batch:
        """An empty batch for an actor opened one by one (`open`): a raw socket of its own beside pyroute2's."""
        if actor not in self._raw:
            self._raw[actor] = in_netns(self.ns(actor), _netlink)
            self.stack.callback(self._raw[actor].close)
        return Batch(self._raw[actor], self.ns(actor))

    def index(self, actor: str, ifname: str) -> int:
        # An interface keeps its index for life: ask the kernel once (a single-link get, not a dump).
        key = (actor, ifname)
        if key not in self._indexes:
            self._indexes[key] = self.ipr[actor].link("get", ifname=ifname)[0]["index"]
        return self._indexes[key]

    def up(self, actor: str, ifname: str, address: str | None = None, prefixlen: int = 0, **extra: object) -> int:
        """The link up, with `address` (of either family; a host's own /32 or /128 without `prefixlen`)."""
        idx = self.index(actor, ifname)
        if address:
            self.address(actor, idx, address, prefixlen or host_prefixlen(address))
        self.ipr[actor].link("set", index=idx, state="up", **extra)
        return idx

    def address(self, actor: str, index: int, address: str, prefixlen: int) -> None:
        """An address of either family on link `index`; an IPv6 one usable at once (IFA_F_NODAD)."""
        ip = ip_address(address)
        flags = {"flags": IFA_F_NODAD} if ip.version == 6 else {}
        self.ipr[actor].addr("add", index=index, address=address, prefixlen=prefixlen, **flags)

    def veth(self, actor: str, ifname: str, peer_actor: str, peer_ifname: str) -> None:
        self.ipr[actor].link(
            "add", ifname=ifname, kind="veth", peer={"ifname": peer_ifname, "net_ns_fd": self.ns(peer_actor)}
        )

    def vxlan(self, actor: str, ifname: str, vni: int, local: str, link: int, port: int, mac: str) -> None:
        """A VXLAN device without learning (its peers are static, see vtep), its tunnel's end `local` on link
        `link` in the underlay's family."""
        end = "vxlan_local" if ip_address(local).version == 4 else "vxlan_local6"
        self.ipr[actor].link(
            "add",
            ifname=ifname,
            kind="vxlan",
            vxlan_id=vni,
            **{end: local},
            vxlan_link=link,
            vxlan_port=port,
            vxlan_learning=0,
            address=mac,
        )

    def vtep(self, actor: str, dev: int, tunnel_ip: str, mac: str, underlay_ip: str) -> None:
        """A peer of VXLAN device `dev`, as Calico writes one: its tunnel address's neighbour entry (permanent,
        so neither ARP nor neighbour discovery crosses the tunnel) and the FDB entry sending its MAC to its
        underlay address. Either address may be of either family."""
        ipr = self.ipr[actor]
        family = socket.AF_INET if ip_address(tunnel_ip).version == 4 else socket.AF_INET6
        ipr.neigh("add", dst=tunnel_ip, lladdr=mac, ifindex=dev, state=NUD_PERMANENT, family=family)
        ipr.fdb("append", ifindex=dev, lladdr=mac, dst=underlay_ip)

    def frames_only(self, actor: str, ifname: str) -> None:
        """Turn off the interface's segmentation offloads: it then sends each packet of a GSO super-packet as a
        frame of its own, which the receiving end checks against its MTU (a GSO packet passes a veth or a
        bridge port whatever its size, so without this no MTU on the way would ever drop one)."""

        def turn_off() -> None:
            ethtool = Ethtool()
            try:
                features = ethtool.get_features(ifname)
                for name, feature in features.features.items():
                    if feature.enable and (name.endswith("-segmentation") or name == "tx-gso-list"):
                        feature.enable = False
                ethtool.set_features(ifname, features)
            finally:
                ethtool.close()

        with deferred():
            in_netns(self.ns(actor), turn_off)

    def bridge(self, actor: str, ifname: str, address: str, prefixlen: int) -> int:
        # No multicast snooping: the bridge would join 224.0.0.106 and send IGMP reports into every capture.
        self.ipr[actor].link("add", ifname=ifname, kind="bridge", br_mcast_snooping=0)
        return self.up(actor, ifname, address, prefixlen)


def _netlink() -> socket.socket:
    """A NETLINK_ROUTE socket of the calling thread's namespace."""
    return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, NETLINK_ROUTE)


def _new_namespace_netlink(ipv6: bool) -> socket.socket:
    """In a new namespace's own thread: IPv6 off or on (lab.realize.families), and a netlink socket there."""
    namespace_sysctls(ipv6)
    return _netlink()
