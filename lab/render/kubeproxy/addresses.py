"""Addresses as kube-proxy's IPv4 proxiers read them (shared by the iptables, ipvs and nftables renderers)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from ipaddress import IPv4Address, IPv4Network, ip_address, ip_network

from lab.render.kubeproxy.service import Endpoint, ServicePort


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


def ipv4_endpoints(port: ServicePort) -> tuple[Endpoint, ...]:
    """kube-proxy's endpoints map: IPv4 only, one per "IP:port" (a local copy wins), sorted by that string."""
    endpoints: dict[str, Endpoint] = {}
    for given in port.endpoints:
        ip = parse_ipv4(given.ip)
        if ip is None:
            continue
        ep = replace(given, ip=str(ip))
        if ep.address not in endpoints or ep.is_local:
            endpoints[ep.address] = ep
    return tuple(sorted(endpoints.values(), key=lambda ep: ep.address))
