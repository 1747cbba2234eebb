"""What NewProxier fixes for every sync on one node, the same in every mode: the node's own addresses of the proxier's
family,
the node IP it was given, the --nodeport-addresses CIDRs, and the masquerade mark."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from ipaddress import IPv4Network, IPv6Network, ip_network

from lab.render.kubeproxy.addresses import Address, Family, Network, parse_cidr, parse_ip
from lab.render.kubeproxy.service import ProxyConfig
from lab.render.kubeproxy.view import unique

# What kube-proxy's start (cmd/kube-proxy/app/server.go) makes of nodePortAddresses' keywords, IPv4 side: `primary`
# the node IP it was given (kubernetes#123105), `localhost` the loopback network and `all` every address
# (kubernetes#138427, 1.37: its types.go says "'localhost' to the node's loopback addresses, and 'all' to all
# addresses"; that these are 127.0.0.0/8 and 0.0.0.0/0 is read in a review of v1.37.0's server.go, not in the
# source itself: INFERRED, docs/kubeproxy-versions.md). describe refuses a keyword the release does not take.
# IPv6's loopback and whole space stand for the same words in the IPv6 proxier (INFERRED like the IPv4 ones).
_KEYWORD_CIDRS: dict[Family, dict[str, Network]] = {
    "IPv4": {"localhost": IPv4Network("127.0.0.0/8"), "all": IPv4Network("0.0.0.0/0")},
    "IPv6": {"localhost": IPv6Network("::1/128"), "all": IPv6Network("::/0")},
}


@dataclass(frozen=True)
class NodeBase:
    config: ProxyConfig
    mark: str
    addresses: tuple[Address, ...]  # the node's addresses of the family, in the order given, without repeats
    node_port_cidrs: tuple[Network, ...]  # the CIDRs of --nodeport-addresses of the family

    @classmethod
    def build(cls, config: ProxyConfig, node_ips: Sequence[str]) -> NodeBase:
        own = unique(ip for ip in (parse_ip(text, config.family) for text in node_ips) if ip is not None)
        cidrs = tuple(_cidrs(config.node_port_addresses, own[0] if own else None, config.family))
        # The mark text exactly as NewProxier formats it from --iptables-masquerade-bit (Go "%#08x").
        mark = config.masquerade_mark or "0x" + format(1 << config.masquerade_bit, "08x")
        return cls(config, mark, tuple(own), cidrs)

    @property
    def primary_ip(self) -> Address | None:
        """The node IP kube-proxy was given (--node-ip): the first address."""
        return self.addresses[0] if self.addresses else None

    @property
    def node_ports_everywhere(self) -> bool:
        """No CIDR of the family, or 0.0.0.0/0 (::/0) among them, means every address serves NodePorts."""
        return not self.node_port_cidrs or any(cidr.prefixlen == 0 for cidr in self.node_port_cidrs)

    def node_port_addresses(self) -> list[Address]:
        """The node's addresses inside the --nodeport-addresses CIDRs (all of them when it matches everything)."""
        if self.node_ports_everywhere:
            return list(self.addresses)
        return [ip for ip in self.addresses if any(ip in cidr for cidr in self.node_port_cidrs)]

    @property
    def explicit_loopback(self) -> bool:
        """NodePortAddresses.ContainsExplicitLoopback (kubernetes#138427, 1.37): a CIDR whose own address is a loopback
        one (`localhost`, 127.0.0.0/8, even 127.0.0.2/32, kubernetes#142129), not one that merely contains it
        (0.0.0.0/0, `all`)."""
        return any(cidr.network_address.is_loopback for cidr in self.node_port_cidrs)

    def facts(self) -> dict[str, object]:
        """This node's fields, for a mode's subclass that adds its own: `Sub(**base.facts(), ...)`."""
        return {f.name: getattr(self, f.name) for f in fields(NodeBase)}

    def primary_in(self, cidrs: Sequence[Network]) -> bool:
        """allowFromNode: is the node IP inside these source ranges (the node reaching its own LB IP often
        loops back locally, with the LB IP as source)."""
        primary = self.primary_ip
        return primary is not None and any(primary in cidr for cidr in cidrs)


def _cidrs(entries: Sequence[str], primary: Address | None, family: Family) -> list[Network]:
    """The CIDRs of nodePortAddresses of the family, its keywords resolved as kube-proxy's start resolves them."""
    cidrs: list[Network] = []
    for entry in entries:
        if entry == "primary":
            cidrs += [ip_network(primary)] if primary is not None and not primary.is_loopback else []
        elif entry in _KEYWORD_CIDRS[family]:
            cidrs.append(_KEYWORD_CIDRS[family][entry])
        elif (cidr := parse_cidr(entry, family)) is not None:
            cidrs.append(cidr)
    return cidrs
