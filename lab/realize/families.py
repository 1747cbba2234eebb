"""Address families in realize: what an address's family changes in what is built.

An address string says its own family (ipaddress parses either); nothing here is told a family beside it. IPv4 is
built as it always was; IPv6 differs in these ways:
  - a namespace is born with IPv6 off (router solicitations and MLD reports would only add noise to captures);
    one that holds an IPv6 address has it on, with duplicate address detection off (`accept_dad=0`, and every
    address added with IFA_F_NODAD), so an address is usable the moment it is added, not a second or two later
    once DAD has run, and with neither router advertisements taken nor solicitations sent (every route is the
    lab's own);
  - forwarding is `net.ipv6.conf.all.forwarding` (there is no ip_forward), and br_netfilter's switch for it
    `net.bridge.bridge-nf-call-ip6tables`;
  - a host route is a /128 and the default route `::/0`.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from pathlib import Path

# Written and read where every stage can reach them (describe names a probe's destination so too).
from lab.describe.families import endpoint as endpoint
from lab.describe.families import host_port as host_port

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Written in a new namespace, before any interface of its own exists: `default` is what every interface made
# later starts with, `all` what the namespace-wide checks read.
_IPV6_ON = {"disable_ipv6": "0", "accept_dad": "0", "accept_ra": "0", "router_solicitations": "0"}


def address(text: str) -> IPAddress:
    return ipaddress.ip_address(text)


def network(text: str) -> IPNetwork:
    """A CIDR of either family (no host bits set, as `ip route add` wants it)."""
    return ipaddress.ip_network(text)


def host_prefixlen(text: str) -> int:
    """32 for an IPv4 address, 128 for an IPv6 one: a route or address for that single host."""
    return address(text).max_prefixlen


def default_route(gateway: str) -> str:
    """The default route's destination in the gateway's family."""
    return "0.0.0.0/0" if address(gateway).version == 4 else "::/0"


def versions(addresses: Iterable[str]) -> frozenset[int]:
    """The IP versions (4, 6) among these addresses or CIDRs."""
    return frozenset(ipaddress.ip_interface(a).version for a in addresses)


def namespace_sysctls(ipv6: bool) -> None:
    """In a new namespace's own thread, before its interfaces are made: IPv6 off, or on without DAD, RAs or
    router solicitations (see the module's docstring)."""
    values = _IPV6_ON if ipv6 else {"disable_ipv6": "1"}
    for key in ("all", "default"):
        for name, value in values.items():
            Path(f"/proc/sys/net/ipv6/conf/{key}/{name}").write_text(value)


def forwarding(ip_versions: Iterable[int]) -> dict[str, str]:
    """A router's forwarding switch, per family it carries."""
    return {_FORWARDING[v]: "1" for v in sorted(set(ip_versions))}


def bridge_filtering(ip_versions: Iterable[int], on: bool) -> dict[str, str]:
    """br_netfilter's switch per family: a bridge's frames of that family go through its iptables or
    ip6tables, or not."""
    return {_BRIDGE_NF[v]: "1" if on else "0" for v in sorted(set(ip_versions))}


def multipath_hash_l4(ip_versions: Iterable[int]) -> dict[str, str]:
    """Multipath routes hashed on the L4 ports too (each family has its own policy)."""
    return {f"net.ipv{v}.fib_multipath_hash_policy": "1" for v in sorted(set(ip_versions))}


_FORWARDING = {4: "net.ipv4.ip_forward", 6: "net.ipv6.conf.all.forwarding"}
_BRIDGE_NF = {4: "net.bridge.bridge-nf-call-iptables", 6: "net.bridge.bridge-nf-call-ip6tables"}


def socket_family(host: str) -> int:
    """The socket family that reaches `host`: AF_INET6 for an IPv6 address, AF_INET otherwise."""
    return socket.AF_INET6 if address(host).version == 6 else socket.AF_INET
