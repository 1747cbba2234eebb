"""The ports kube-proxy up to 1.23 holds open on its node with sockets of its own (its "port opener").

Each sync, the iptables and ipvs proxiers open a socket for every NodePort — on every address when
--nodeport-addresses is empty or holds 0.0.0.0/0, else on each node address inside those CIDRs — and for every
externalIP that is an address of the node, on the Service port; SCTP never. The socket is only held, never read,
so that no other process on the node takes the port (kubernetes#100643 tells the history): a TCP one listens,
and the kernel completes the handshake of any connection that reaches it; a UDP one is bound and queues what
reaches it. Rules catch the port's packets first when they DNAT or reject them; what they leave alone reaches
the socket. Read in pkg/proxy/iptables/proxier.go and pkg/proxy/ipvs/proxier.go at S1.18 to S1.23 (openshift/sdn
vendoring, docs/kubeproxy-versions.md); #108496 removed the port opener in 1.24.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.render.kubeproxy.addresses import parse_ip
from lab.render.kubeproxy.node import NodeBase
from lab.render.kubeproxy.service import ProxyConfig, ServicePort
from lab.render.kubeproxy.versions import Release


@dataclass(frozen=True)
class HeldPort:
    """One socket kube-proxy holds: utilnet.LocalPort."""

    protocol: str  # TCP | UDP
    address: str  # "" = every address of the node (a zero CIDR in --nodeport-addresses)
    port: int
    description: str  # kube-proxy's own: "nodePort for ns/name:port", "externalIP for ns/name:port"
    family: str = "IPv4"  # the proxier's: utilnet.LocalPort's IPFamily, a "tcp4" or "tcp6" socket

    def covers(self, protocol: str, address: str, port: int) -> bool:
        return self.protocol == protocol and self.port == port and self.address in ("", address)

    def __str__(self) -> str:
        if self.family == "IPv6":
            return f"{self.protocol} [{self.address or '::'}]:{self.port} ({self.description})"
        return f"{self.protocol} {self.address or '0.0.0.0'}:{self.port} ({self.description})"


def held_ports(
    services: Sequence[ServicePort], config: ProxyConfig, local_addresses: Sequence[str], release: Release
) -> tuple[HeldPort, ...]:
    """The sockets kube-proxy of `release` holds on a node whose interfaces have `local_addresses`."""
    if not release.holds_service_ports:
        return ()
    base = NodeBase.build(config, local_addresses)
    held: list[HeldPort] = []
    for svc in services:
        if svc.protocol == "SCTP":  # "We do not start listening on SCTP ports" (the SCTP support KEP)
            continue
        name = svc.port_name_string
        for ip in svc.external_ips:
            if (address := parse_ip(ip, config.family)) is not None and address in base.addresses:
                held.append(HeldPort(svc.protocol, ip, svc.port, f"externalIP for {name}", config.family))
        if svc.node_port:
            addresses = [""] if base.node_ports_everywhere else [str(a) for a in base.node_port_addresses()]
            held += [HeldPort(svc.protocol, a, svc.node_port, f"nodePort for {name}", config.family) for a in addresses]
    return tuple(dict.fromkeys(held))
