"""A small IPv6 network built with realize's own functions (lab.realize.links, lab.realize.rtnl), under a run prefix
and taken down by the run's teardown (lab.realize.runs), for tests of the family-aware mechanisms before a
scenario can describe IPv6:

    a ──┐
        br0 (hub, fd00:24:1::1/64) ── hub forwards ── c (fd00:24:2::2/64, over a veth: fd00:24:2::1 on hub's end)
    b ──┘

a is built with pyroute2 requests, b with a raw batch as a pod is (its veth made by hub's batch, straight into b),
c over a plain veth; every address is IPv6 only, a and b route everything via hub.

vxlan_lab: n1 and n2 on hub's bridge (the IPv6 underlay), each with a VXLAN device as realize makes Calico's
(static neighbour and FDB entries, no learning), holding an overlay address of fd00:24:9::/64.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass

from lab.paths import NETNS_DIR
from lab.realize.enter import write_sysctls
from lab.realize.families import bridge_filtering, default_route, forwarding
from lab.realize.links import NetBuilder
from lab.realize.runs import new_prefix, release, remove_namespaces

HUB_LAN, HUB_LINK = "fd00:24:1::1", "fd00:24:2::1"
A, B, C = "fd00:24:1::2", "fd00:24:1::3", "fd00:24:2::2"
B_PORT, B_ETH0 = 1000, 16  # the indexes the batch gives b's veth (as realize does a pod's)


@dataclass(frozen=True)
class Ipv6Lab:
    prefix: str
    namespaces: dict[str, str]  # actor → namespace


@contextmanager
def _built(build: Callable[[NetBuilder], None]) -> Iterator[Ipv6Lab]:
    """What `build` makes under a new run prefix, with IPv6 on; removed by the run's teardown however it ends."""
    prefix = new_prefix()
    names: dict[str, str] = {}
    try:
        with ExitStack() as stack:
            net = NetBuilder(prefix, stack, ipv6=True)
            names = net.names
            build(net)
        yield Ipv6Lab(prefix, dict(names))
    finally:
        remove_namespaces(list(names.values()))
        release(prefix)


def _hub(net: NetBuilder) -> int:
    net.open("hub")
    net.ipr["hub"].link("add", ifname="br0", kind="bridge", br_mcast_snooping=0)
    bridge = net.up("hub", "br0", HUB_LAN, 64)
    write_sysctls(net.ns("hub"), forwarding({6}) | bridge_filtering({6}, on=True))
    return bridge


def _build_ipv6_lab(net: NetBuilder) -> None:
    bridge = _hub(net)
    for actor, address in (("a", A), ("c", C)):
        net.open(actor)
        port = f"to-{actor}"
        net.veth(actor, "eth0", "hub", port)
        net.up("hub", port, HUB_LINK, 64) if actor == "c" else net.up("hub", port, master=bridge)
        net.up(actor, "eth0", address, 64)
        gateway = HUB_LAN if actor == "a" else HUB_LINK
        net.ipr[actor].route("add", dst=default_route(gateway), gateway=gateway)
    (batch,) = net.open_all(["b"]).values()
    on_hub = net.batch("hub")
    fd = os.open(NETNS_DIR / net.ns("b"), os.O_RDONLY | os.O_CLOEXEC)
    try:
        on_hub.veth("to-b", B_PORT, "eth0", B_ETH0, fd)
        on_hub.up(B_PORT, master=bridge)
        on_hub.commit()
    finally:
        os.close(fd)
    batch.up(1)
    batch.address(B_ETH0, B, 64)
    batch.up(B_ETH0)
    batch.route(default_route(HUB_LAN), gateway=HUB_LAN)
    batch.commit()


def ipv6_lab() -> AbstractContextManager[Ipv6Lab]:
    return _built(_build_ipv6_lab)


UNDERLAY = {"n1": "fd00:24:1::11", "n2": "fd00:24:1::12"}
OVERLAY = {"n1": "fd00:24:9::1", "n2": "fd00:24:9::2"}
VNI, VXLAN_PORT = 4096, 4789


def _vtep_mac(actor: str) -> str:
    return f"66:ee:00:00:00:0{actor[-1]}"


def _build_vxlan_lab(net: NetBuilder) -> None:
    bridge = _hub(net)
    for actor in UNDERLAY:
        net.open(actor)
        net.veth(actor, "eth0", "hub", f"to-{actor}")
        net.up("hub", f"to-{actor}", master=bridge)
        eth0 = net.up(actor, "eth0", UNDERLAY[actor], 64)
        net.vxlan(actor, "vxlan0", VNI, UNDERLAY[actor], eth0, VXLAN_PORT, _vtep_mac(actor))
        net.up(actor, "vxlan0", OVERLAY[actor], 64)
    for actor in UNDERLAY:
        for other in UNDERLAY.keys() - {actor}:
            dev = net.index(actor, "vxlan0")
            net.vtep(actor, dev, OVERLAY[other], _vtep_mac(other), UNDERLAY[other])


def vxlan_lab() -> AbstractContextManager[Ipv6Lab]:
    return _built(_build_vxlan_lab)
