"""Networks of an imported cluster: the smallest that hold what the objects name, and --anonymize's new addresses.

Anonymized addresses keep their place, in each family: an address inside the cluster's pod network, Service
network or the nodes' network keeps its offset in the new one of the same size (IPv4: 10.244.0.0/16, 10.96.0.0/12,
192.168.56.0/24 or the like; IPv6: fd00:10:244::/56, fd00:10:96::/112, fd00:56::/64, unique local addresses as a
kind cluster has them), so podCIDRs stay inside the pod network and every pod inside its node's podCIDR. Where the
usual place of one would overlap another's (a /8 pod network holds 10.96.0.0), the next place that does not is
taken. Any other address (an external IP, a load balancer's) takes the next one of the documentation ranges
(203.0.113.0/24; 2001:db8:1::/112), and any other network (a loadBalancerSourceRange) the next free one of its size
in 198.18.0.0/15 or 2001:db8:8000::/33; networks broader than those (0.0.0.0/0, ::/0) say nothing of a cluster and
stay. A value holding one address of each family ("10.244.1.5,fd00:10:244:1::5") has each part moved.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

IPv4Network = ipaddress.IPv4Network
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


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


@dataclass(frozen=True)
class _Places:
    """Where one family's addresses go: the usual places of the cluster's three networks, then fallbacks for
    each (tried in turn where a place overlaps one taken before); other addresses and other networks."""

    cluster: tuple[str, ...]
    service: tuple[str, ...]
    underlay: tuple[str, ...]
    hosts: str
    pool: str

    @property
    def broadest(self) -> int:
        """A network of fewer bits than the pool's says nothing of the cluster: it stays."""
        return ipaddress.ip_network(self.pool).prefixlen


PLACES = {
    "IPv4": _Places(
        ("10.244.0.0", "10.0.0.0", "100.64.0.0"),
        ("10.96.0.0", "172.16.0.0", "100.96.0.0"),
        ("192.168.56.0", "172.31.0.0", "192.168.0.0"),
        "203.0.113.0/24",
        "198.18.0.0/15",
    ),
    "IPv6": _Places(
        ("fd00:10:244::", "fd00:244::", "fd44::"),
        ("fd00:10:96::", "fd00:96::", "fd96::"),
        ("fd00:56::", "fd00:5600::", "fd56::"),
        "2001:db8:1::/112",
        "2001:db8:8000::/33",
    ),
}


_KINDS = ("pod network", "Service network", "nodes' network")


def _said(kind: str, old: str, new: Network | None) -> str:
    if new is None:
        return f"the {kind} {old} is inside a network before it: moved with it"
    if str(new) == old:
        return f"the {kind} {old} stays: it is where --anonymize puts one"
    return f"the {kind} {old} moved to {new}, each address in it at its offset"


def _moved(ip: Address, old: Network, new: Network) -> Address:
    """`ip` of network `old`, at the same offset in `new`."""
    return new.network_address + (int(ip) - int(old.network_address))


class _Family:
    """One family's moves: the cluster's networks to their new places, then the other networks met."""

    def __init__(self, places: _Places, networks: tuple[str, str, str] | None) -> None:
        self.places = places
        self.moves: list[tuple[Network, Network]] = []
        self.kept = 0  # the cluster's own moves come first: the others follow
        self.said: list[str] = []  # each of the cluster's networks and where it went, for the notes
        if networks is not None:
            for old, bases, kind in zip(
                networks, (places.cluster, places.service, places.underlay), _KINDS, strict=True
            ):
                self.said.append(_said(kind, old, self._place(ipaddress.ip_network(old), bases)))
        self.kept = len(self.moves)
        self.others: dict[str, str] = {}
        self.next_address: Iterator[Address] = ipaddress.ip_network(places.hosts).hosts()

    def _place(self, old: Network, bases: tuple[str, ...]) -> Network | None:
        """Give `old` its new place (None: inside a network placed before, it moves with it)."""
        if any(old.subnet_of(earlier) for earlier, _ in self.moves):  # type: ignore[arg-type]  # one family
            return None  # a VPC's pods among its nodes
        for base in bases:
            new = ipaddress.ip_network((ipaddress.ip_address(base), old.prefixlen), strict=False)
            if not any(new.overlaps(taken) for _, taken in self.moves):
                self.moves.append((old, new))
                return new
        raise ValueError(f"--anonymize finds no place for {old} apart from the cluster's other networks")

    def address(self, ip: Address, text: str) -> str:
        for old, new in self.moves:
            if ip in old:
                return str(_moved(ip, old, new))
        if text not in self.others:
            if (address := next(self.next_address, None)) is None:
                raise PoolExhausted(f"--anonymize has no address of {self.places.hosts} left for {text}")
            self.others[text] = str(address)
        return self.others[text]

    def network(self, net: Network, text: str) -> str:
        for old, new in self.moves[: self.kept]:
            if net.subnet_of(old):  # type: ignore[arg-type]  # one family
                return str(ipaddress.ip_network((_moved(net.network_address, old, new), net.prefixlen)))
            if old.subnet_of(net):  # type: ignore[arg-type]  # a network around one of the cluster's (the VPC)
                return str(new.supernet(new_prefix=net.prefixlen))
        if net.prefixlen < self.places.broadest:
            return text
        if text not in self.others:
            for old, new in self.moves[self.kept :]:
                if net.subnet_of(old):  # type: ignore[arg-type]  # inside a range met before
                    return str(ipaddress.ip_network((_moved(net.network_address, old, new), net.prefixlen)))
            pool = ipaddress.ip_network(self.places.pool)
            met = [taken for _, taken in self.moves[self.kept :]]
            free = (b for b in pool.subnets(new_prefix=net.prefixlen) if not any(b.overlaps(t) for t in met))
            if (block := next(free, None)) is None:
                raise PoolExhausted(f"--anonymize has no /{net.prefixlen} of {pool} left for {text}")
            self.moves.append((net, block))
            self.others[text] = str(block)
        return self.others[text]

    def summary(self) -> list[str]:
        """Where this family's addresses went: each of the cluster's networks, then the others met, counted."""
        hosts = sum("/" not in text for text in self.others)
        lines = list(self.said)
        if hosts:
            lines.append(f"{hosts} other address(es) (external, load balancer) moved to {self.places.hosts}")
        if others := len(self.others) - hosts:
            lines.append(f"{others} other network(s) (source ranges) moved to blocks of {self.places.pool}")
        return lines


class PoolExhausted(Exception):
    """More other addresses or networks than the documentation ranges hold: no ValueError, which `walk` takes
    for text that is no address."""


class Anonymizer:
    """Every IP address and network of a scenario, replaced consistently; `networks` gives each imported family's
    (pod network, Service network, nodes' network)."""

    def __init__(self, networks: Mapping[str, tuple[str, str, str]]) -> None:
        self.families = {family: _Family(places, networks.get(family)) for family, places in PLACES.items()}

    def summary(self) -> list[str]:
        """One line per network of the cluster's moved, and per kind of the other addresses: for the notes."""
        return [line for family in self.families.values() for line in family.summary()]

    def _of(self, value: Address | Network) -> _Family:
        return self.families["IPv4" if value.version == 4 else "IPv6"]

    def address(self, text: str) -> str:
        ip = ipaddress.ip_address(text)
        return self._of(ip).address(ip, text)

    def network(self, text: str) -> str:
        net = ipaddress.ip_network(text, strict=False)
        return self._of(net).network(net, text)

    def _one(self, text: str) -> str:
        return self.network(text) if "/" in text else self.address(text)

    def walk(self, value: Any) -> Any:
        """`value` with every string that is an IP address or network, or a comma-separated list of them,
        replaced."""
        if isinstance(value, dict):
            return {k: self.walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.walk(v) for v in value]
        if isinstance(value, str):
            try:
                return ",".join(self._one(part) for part in value.split(","))
            except ValueError:
                return value
        return value
