"""Addresses as kube-proxy's IPv4 proxiers read them (shared by the iptables, ipvs and nftables renderers)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from ipaddress import IPv4Address, IPv4Network, ip_address, ip_network

from lab.render.kubeproxy.service import Endpoint, ServicePort
from lab.render.kubeproxy.versions import Release


def parse_ipv4(text: str) -> IPv4Address | None:
    """Like Go's netutils.ParseIPSloppy, IPv4 only: octets may have leading zeros ("172.30.0.041")."""
    text = text.strip()
    if ":" in text:
        return None
    try:
        address = ip_address(".".join(str(int(octet)) for octet in text.split(".")))
    except ValueError:
        return None
    return address if isinstance(address, IPv4Address) else None


def parse_ipv4_cidr(text: str) -> IPv4Network | None:
    """Like ParseCIDRSloppy after TrimSpace, IPv4 only; the result is the network ("1.2.3.4/24" -> 1.2.3.0/24)."""
    address, _, prefix = text.strip().partition("/")
    ip = parse_ipv4(address)
    if ip is None or not prefix.isdigit():
        return None
    return ip_network(f"{ip}/{int(prefix)}", strict=False)  # type: ignore[return-value]


def ipv4_strings(ips: Iterable[str]) -> tuple[str, ...]:
    """The IPv4 ones, canonical, in the order given."""
    return tuple(str(ip) for ip in map(parse_ipv4, ips) if ip is not None)


def ipv4_endpoints(port: ServicePort, release: Release) -> tuple[Endpoint, ...]:
    """kube-proxy's endpoints map: IPv4 only, ready only where EndpointSliceCache drops the others
    (Release.knows_unready_endpoints), one per "IP:port" (which copy of a repeated one stays:
    Release.ready_duplicate_wins), sorted by that string."""
    endpoints: dict[str, Endpoint] = {}
    for given in port.endpoints:
        ip = parse_ipv4(given.ip)
        if ip is None or not (given.ready or release.knows_unready_endpoints):
            continue
        ep = replace(given, ip=str(ip))
        kept = endpoints.get(ep.address)
        if kept is None or _replaces(ep, kept, release):
            endpoints[ep.address] = ep
    return tuple(sorted(endpoints.values(), key=lambda ep: ep.address))


def _replaces(later: Endpoint, kept: Endpoint, release: Release) -> bool:
    """Whether a later copy of an "IP:port" replaces the one met first: a ready one over one that is not (1.36),
    else a copy on this node."""
    if release.ready_duplicate_wins and later.ready != kept.ready:
        return later.ready
    return later.is_local
