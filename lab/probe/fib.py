"""Why a namespace's kernel drops an arriving packet without any rule: its own input route lookup, asked after the
probe for the packet as it was last seen (`ip route get DST from SRC iif DEV`, inside that namespace).

The lookup is the one the kernel makes for every packet it receives, before forwarding or delivering it, and it
fails the way the packet's drop did: EINVAL for a martian (a source that is an address of the receiver's own,
loopback, broadcast...), EXDEV or EINVAL (the kernel reports it either way) when the reverse-path filter finds
the route back to the source leaving by another interface (rp_filter=1) or missing (rp_filter=2), ENETUNREACH
or EHOSTUNREACH when nothing routes the destination. The namespace's own rp_filter and route back to the source
tell a reverse-path failure from another martian. An IPv6 packet is looked up in IPv6's table (`ip -6 route get`),
which has no reverse-path filter.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from dataclasses import dataclass
from pathlib import Path

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from lab.realize.enter import in_netns
from lab.realize.terminate import deferred

NETLINK_ROUTE = 0
RTN_LOCAL = 2


@dataclass(frozen=True)
class WayBack:
    """What the receiving namespace holds about the packet's source."""

    interface: str  # the route back to the source leaves by it ("" when there is none)
    own: bool  # the source is an address of the namespace's own
    rp_filter: int  # the reverse-path filter on the arriving interface: max(all, interface), as the kernel takes it


def refusal_text(code: int, src: str, dst: str, iif: str, back: WayBack) -> str:
    """What a failed input route lookup means for the packet src > dst arriving on iif."""
    if code in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        return f"no route to {dst}"
    if back.own:
        return f"martian source: {src} is its own address"
    if ipaddress.ip_address(src).is_loopback:
        return f"martian source: {src} is a loopback address"
    strict_miss = back.rp_filter == 1 and back.interface != iif
    if code in (errno.EXDEV, errno.EINVAL) and (strict_miss or back.rp_filter == 2 and not back.interface):
        route = f"leaves by {back.interface}" if back.interface else "does not exist"
        return f"reverse-path filter (rp_filter={back.rp_filter} on {iif}): the route back to {src} {route}"
    if code == errno.EINVAL:
        return f"martian: {src} > {dst} cannot arrive on {iif}"
    return errno.errorcode.get(code, str(code))


def _way_back(ipr: IPRoute, netns: str, src: str, iif: str) -> WayBack:
    def rp_filter() -> int:  # /proc/sys/net is the reading thread's namespace's
        return max(int(Path(f"/proc/sys/net/ipv4/conf/{dev}/rp_filter").read_text()) for dev in ("all", iif))

    # IPv6's input has no reverse-path filter of its own (only a rule can ask for one: ip6tables' rpfilter match).
    rp = in_netns(netns, rp_filter) if ipaddress.ip_address(src).version == 4 else 0
    try:
        (route,) = ipr.route("get", dst=src, family=_family(src))
    except NetlinkError:
        return WayBack("", False, rp)
    (link,) = ipr.link("get", index=route.get_attr("RTA_OIF"))
    return WayBack(link.get_attr("IFLA_IFNAME"), route["type"] == RTN_LOCAL, rp)


def _family(address: str) -> int:
    return socket.AF_INET if ipaddress.ip_address(address).version == 4 else socket.AF_INET6


def input_refusal(netns: str, src: str, dst: str, iif: str) -> str:
    """Why the kernel in netns refuses a packet src > dst arriving on iif ("" when its route lookup takes it)."""
    sock = in_netns(netns, lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_ROUTE))
    with deferred(), IPRoute(fileno=sock.detach()) as ipr:  # SIGTERM after pyroute2's loop is done (terminate)
        (index,) = ipr.link_lookup(ifname=iif)
        try:
            ipr.route("get", dst=dst, src=src, iif=index, family=_family(dst))
        except NetlinkError as exc:
            said = refusal_text(exc.code, src, dst, iif, _way_back(ipr, netns, src, iif))
            return f"{said} (ip route get {dst} from {src} iif {iif}: {errno.errorcode.get(exc.code, exc.code)})"
    return ""
