"""Networks of an imported cluster: the smallest that hold what the objects name, and --anonymize's new addresses.

Anonymized addresses keep their place: an address inside the cluster's pod network, Service network or the
nodes' network keeps its offset in the new one of the same size (10.244.0.0/16, 10.96.0.0/12, 192.168.56.0/24 or
the like), so podCIDRs stay inside the pod network and every pod inside its node's podCIDR; any other address
(an external IP, a load balancer's) takes the next one of TEST-NET-3 (203.0.113.0/24), and any other network
(a loadBalancerSourceRange) the next free one of its size in 198.18.0.0/15.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

IPv4Network = ipaddress.IPv4Network


def covering(values: Iterable[str], longest: int) -> IPv4Network | ipaddress.IPv6Network | None:
    """The smallest network holding every address or network given (all of one family), at most `longest` bits
    long."""
    nets = [ipaddress.ip_network(v, strict=False) for v in values]
    if not nets:
        return None
    for prefix in range(longest, -1, -1):
        candidate = ipaddress.ip_network((nets[0].network_address, prefix), strict=False)
        if all(n.subnet_of(candidate) for n in nets):  # type: ignore[arg-type]  # one family throughout
            return candidate
    raise AssertionError("the family's /0 holds every network of it")


def _like(base: str, prefix: int) -> IPv4Network:
    """The network of `prefix` bits that holds `base` (10.244.0.0 made a /12 is 10.240.0.0/12)."""
    return ipaddress.IPv4Network(f"{base}/{prefix}", strict=False)


class Anonymizer:
    """Every IPv4 address and network of a scenario, replaced consistently."""

    def __init__(self, cluster_cidr: str, service_cidr: str, underlay: str) -> None:
        self.moves: list[tuple[IPv4Network, IPv4Network]] = []
        for old, base in ((cluster_cidr, "10.244.0.0"), (service_cidr, "10.96.0.0"), (underlay, "192.168.56.0")):
            net = ipaddress.IPv4Network(old)
            self.moves.append((net, _like(base, net.prefixlen)))
        self.others: dict[str, str] = {}
        self.next_address = iter(ipaddress.IPv4Network("203.0.113.0/24").hosts())

    def address(self, text: str) -> str:
        ip = ipaddress.IPv4Address(text)
        for old, new in self.moves:
            if ip in old:
                return str(new.network_address + (int(ip) - int(old.network_address)))
        for old, new in self.moves[3:]:  # networks met before (source ranges): their addresses stay inside
            if ip in old:
                return str(new.network_address + (int(ip) - int(old.network_address)))
        if text not in self.others:
            self.others[text] = str(next(self.next_address))
        return self.others[text]

    def network(self, text: str) -> str:
        net = ipaddress.IPv4Network(text, strict=False)
        for old, new in self.moves:
            if net.subnet_of(old):
                start = new.network_address + (int(net.network_address) - int(old.network_address))
                return str(IPv4Network((start, net.prefixlen)))
            if old.subnet_of(net):  # a network around one of the cluster's (nodePortAddresses: the VPC)
                return str(new.supernet(new_prefix=net.prefixlen))
        if net.prefixlen < 15:  # 0.0.0.0/0 and the like say nothing of the cluster
            return text
        if text not in self.others:
            pool = ipaddress.IPv4Network("198.18.0.0/15")
            block = next(
                b for b in pool.subnets(new_prefix=net.prefixlen) if not any(b.overlaps(u) for _, u in self.moves[3:])
            )
            self.moves.append((net, block))
            self.others[text] = str(block)
        return self.others[text]

    def walk(self, value: Any) -> Any:
        """`value` with every string that is an IPv4 address or network replaced."""
        if isinstance(value, dict):
            return {k: self.walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.walk(v) for v in value]
        if isinstance(value, str):
            try:
                return self.network(value) if "/" in value else self.address(value)
            except ValueError:
                return value
        return value
