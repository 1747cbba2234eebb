"""Addresses as kube-proxy's proxiers read them, each proxier its own family (shared by the iptables, ipvs and
nftables renderers): kube-proxy runs one proxier per family, and each ignores the other family's addresses."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from typing import Literal

from lab.describe.digits import is_ascii_number
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


Family = Literal["IPv4", "IPv6"]
Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network


def parse_ip(text: str, family: Family = "IPv4") -> Address | None:
    """An address of the proxier's family (IPv4 read the sloppy Go way, parse_ipv4); None for any other text."""
    if family == "IPv4":
        return parse_ipv4(text)
    try:
        address = ip_address(text.strip())
    except ValueError:
        return None
    return address if isinstance(address, IPv6Address) else None


def parse_cidr(text: str, family: Family = "IPv4") -> Network | None:
    """A CIDR of the proxier's family, as ParseCIDRSloppy after TrimSpace; the result is the network."""
    if family == "IPv4":
        return parse_ipv4_cidr(text)
    try:
        network = ip_network(text.strip(), strict=False)
    except ValueError:
        return None
    return network if isinstance(network, IPv6Network) else None


def host_port(address: str, port: int) -> str:
    """ADDRESS:PORT as ipvsadm and kube-proxy write it: an IPv6 address in brackets."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def parse_ipv4_cidr(text: str) -> IPv4Network | None:
    """Like ParseCIDRSloppy after TrimSpace, IPv4 only; the result is the network ("1.2.3.4/24" -> 1.2.3.0/24)."""
    address, _, prefix = text.strip().partition("/")
    ip = parse_ipv4(address)
    if ip is None or not is_ascii_number(prefix):
        return None
    return ip_network(f"{ip}/{int(prefix)}", strict=False)  # type: ignore[return-value]


def family_strings(ips: Iterable[str], family: Family = "IPv4") -> tuple[str, ...]:
    """The ones of the family, canonical, in the order given."""
    return tuple(str(ip) for ip in (parse_ip(text, family) for text in ips) if ip is not None)


def family_endpoints(port: ServicePort, release: Release, family: Family = "IPv4") -> tuple[Endpoint, ...]:
    """kube-proxy's endpoints map of the family's proxier (a slice per family: the other family's endpoints are
    the other proxier's), ready only where EndpointSliceCache drops the others (Release.knows_unready_endpoints),
    one per "IP:port" (which copy of a repeated one stays: Release.ready_duplicate_wins), sorted by that string."""
    endpoints: dict[str, Endpoint] = {}
    for given in port.endpoints:
        ip = parse_ip(given.ip, family)
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
