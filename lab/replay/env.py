"""The world around one replayed node, built from nothing but addresses.

  source ──┐                          ┌── pod <ip>   (endpoints and sources inside --pod-cidr,
  (outside)│                          │              on the node's cni0 bridge)
           world (router) ── node ── cni0
           │
           sink: answers for every other address (endpoints elsewhere in the cluster,
                 and anything the node forwards without NAT), recording what arrived; as the
                 un-NATed destination it answers an outside client back through the node

Links carry no subnets: every address is a /32 (IPv6: a /128), routes are on-link, and the router
answers ARP by proxy, so the node keeps exactly the addresses the user gave. IPv6 has no proxy NDP for
any address (only for addresses listed one by one), so over IPv6 every actor routes to the router's
link-local fe80::1 instead, and the router to the sink's fe80::2; the node may hold addresses of both
families (a dual-stack node), and the packet's family is its destination's. Every link-local address an
actor sends neighbour solicitations from is the lab's own, given with the link: the kernel's own one
comes only once the link's carrier is seen (up to a second later), and a solicitation due before that
waits a second for its retry, which a probe's first packet would wait out.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

from lab.realize.enter import ensure_br_netfilter, write_sysctls
from lab.realize.families import bridge_filtering, default_route, forwarding, host_prefixlen
from lab.realize.links import NetBuilder
from lab.realize.runs import new_prefix, release, remove_namespaces
from lab.replay.dump import Target

# Own addresses of the router and the sink, only ever the sender address of their ARP requests
# (an ARP request from 0.0.0.0 is a probe, which proxy ARP does not answer).
WORLD_ARP_ADDRESS = "169.254.255.1"
SINK_ARP_ADDRESS = "169.254.255.2"
# IPv6 link-local addresses (see the module's docstring): the router's end of every link and the node's cni0
# (the gateways), the other end of a link to the router (the sink's is the router's default gateway); pods on
# cni0 take the next ones.
WORLD_LINK_LOCAL = "fe80::1"
SINK_LINK_LOCAL = "fe80::2"
RTNH_F_ONLINK = 4
SINK_TABLE = 100
SOURCE_TABLE = 200
RETURN_TABLE = 201


@dataclass(frozen=True)
class Setup:
    node_ips: tuple[str, ...]
    pod_cidr: str | None
    source: str
    dst_ip: str
    dst_port: int
    protocol: str
    targets: tuple[Target, ...]

    @property
    def version(self) -> int:
        """The packet's IP version: its destination's (the source's is checked to match)."""
        return ipaddress.ip_address(self.dst_ip).version

    @property
    def ipv6(self) -> bool:
        """Does any address of the world need IPv6 (on in every namespace)?"""
        return any(":" in ip for ip in (*self.node_ips, self.source, self.dst_ip))

    @property
    def node_ip(self) -> str:
        """The node's first address of the packet's family: where the router sends what the node handles."""
        return next(ip for ip in self.node_ips if ipaddress.ip_address(ip).version == self.version)

    def in_pods(self, ip: str) -> bool:
        return self.pod_cidr is not None and ipaddress.ip_address(ip) in ipaddress.ip_network(self.pod_cidr)

    @property
    def bridge_ip(self) -> str | None:
        """The node's own address on cni0: the first of the pod CIDR, as the CNI bridge plugin's gateway."""
        return str(next(ipaddress.ip_network(self.pod_cidr).hosts())) if self.pod_cidr else None

    @property
    def source_role(self) -> str:
        # A loopback source (127.0.0.1 to a localhost NodePort) can only be the node talking to itself.
        if self.source in self.node_ips or ipaddress.ip_address(self.source).is_loopback:
            return "node"
        return "pod" if self.in_pods(self.source) else "outside"

    def pod_ips(self) -> list[str]:
        wanted = [t.ip for t in self.targets if self.in_pods(t.ip)]
        if self.source_role == "pod":
            wanted.append(self.source)
        # A destination in the pod network is a pod too, so that a connection no rule NATs is answered there
        # instead of dying unanswered on cni0 (which would pass for a DROP).
        if self.in_pods(self.dst_ip) and self.dst_ip not in (self.bridge_ip, *self.node_ips):
            wanted.append(self.dst_ip)
        return sorted(set(wanted), key=ipaddress.ip_address)


@dataclass
class Env:
    prefix: str
    setup: Setup
    namespaces: dict[str, str] = field(default_factory=dict)

    @property
    def source_ns(self) -> str:
        role = self.setup.source_role
        return self.namespaces["node" if role == "node" else f"pod-{self.setup.source}" if role == "pod" else "source"]


def _onlink_peer(b: NetBuilder, actor: str, world_if: str, addresses: list[str], ipv6: bool) -> None:
    """actor's eth0 ↔ the router's world_if; addresses as /32 or /128, default routes on-link (IPv4) or through
    the router's link-local address (IPv6, when the world has it on)."""
    b.veth("world", world_if, actor, "eth0")
    b.up("world", world_if)
    b.up(actor, "eth0")
    idx, world_idx = b.index(actor, "eth0"), b.index("world", world_if)
    for address in addresses:
        b.address(actor, idx, address, host_prefixlen(address))
        b.ipr["world"].route("add", dst=f"{address}/{host_prefixlen(address)}", oif=world_idx)
    b.ipr[actor].route("add", dst="0.0.0.0/0", oif=idx, scope=253)
    # Proxy ARP answers after a random delay of up to 0.8 s unless told otherwise.
    write_sysctls(
        b.ns("world"), {f"net.ipv4.conf.{world_if}.proxy_arp": "1", f"net.ipv4.neigh.{world_if}.proxy_delay": "0"}
    )
    if ipv6:
        b.address("world", world_idx, WORLD_LINK_LOCAL, 64)
        b.address(actor, idx, SINK_LINK_LOCAL, 64)
        b.ipr[actor].route("add", dst="::/0", gateway=WORLD_LINK_LOCAL, oif=idx, family=socket.AF_INET6)


@contextmanager
def build(setup: Setup) -> Iterator[Env]:
    ensure_br_netfilter()
    prefix = new_prefix()
    env = Env(prefix, setup)
    try:
        with ExitStack() as stack:
            b = NetBuilder(prefix, stack, ipv6=setup.ipv6)
            try:
                _build(b, setup)
            finally:
                env.namespaces = dict(b.names)
        yield env
    finally:
        remove_namespaces(list(env.namespaces.values()))
        release(prefix)


def _build(b: NetBuilder, setup: Setup) -> None:
    for actor in ("world", "node", "sink"):
        b.open(actor)
    b.up("world", "lo", WORLD_ARP_ADDRESS)
    all_versions = {4, 6} if setup.ipv6 else {4}
    write_sysctls(b.ns("world"), {**forwarding(all_versions), "net.ipv4.conf.all.send_redirects": "0"})
    _onlink_peer(b, "node", "node", list(setup.node_ips), setup.ipv6)
    write_sysctls(
        b.ns("node"),
        {
            **forwarding(all_versions),
            "net.ipv4.conf.all.route_localnet": "1",
            **bridge_filtering(all_versions, on=True),
            # Every address is on-link here; ICMP redirects would only eat the ICMP rate limit that the
            # REJECT rules' port-unreachable answers need.
            "net.ipv4.conf.all.send_redirects": "0",
        },
    )
    # The sink accepts any destination arriving from outside (AnyIP in a table of its own), while
    # its own answers still route normally back out.
    _onlink_peer(b, "sink", "sink", [], setup.ipv6)
    b.up("sink", "lo", SINK_ARP_ADDRESS)
    sink_if, lo = b.index("world", "sink"), b.index("sink", "lo")
    b.ipr["world"].route("add", dst="0.0.0.0/0", oif=sink_if)
    if setup.ipv6:
        b.ipr["world"].route("add", dst="::/0", gateway=SINK_LINK_LOCAL, oif=sink_if, family=socket.AF_INET6)
    for family in _families(setup):
        default = "0.0.0.0/0" if family == socket.AF_INET else "::/0"
        b.ipr["sink"].route("add", dst=default, type="local", oif=lo, table=SINK_TABLE, scope=254, family=family)
        b.ipr["sink"].rule("add", iifname="eth0", table=SINK_TABLE, priority=100, family=family)
    if setup.source_role == "outside":
        b.open("source")
        _onlink_peer(b, "source", "source", [setup.source], setup.ipv6)
        # Whatever the source sends is for the node to handle, wherever it is addressed.
        b.ipr["world"].route(
            "add",
            dst=default_route(setup.node_ip),
            gateway=setup.node_ip,
            oif=b.index("world", "node"),
            flags=RTNH_F_ONLINK,
            table=SOURCE_TABLE,
        )
        b.ipr["world"].rule("add", iifname="source", table=SOURCE_TABLE, priority=100, family=_family(setup))
        _return_through_node(b, setup)
    if setup.pod_cidr:
        _pods(b, setup)


def _family(setup: Setup) -> int:
    """The packet's socket family (AF_INET, AF_INET6)."""
    return socket.AF_INET6 if setup.version == 6 else socket.AF_INET


def _families(setup: Setup) -> tuple[int, ...]:
    return (socket.AF_INET, socket.AF_INET6) if setup.ipv6 else (socket.AF_INET,)


def _return_through_node(b: NetBuilder, setup: Setup) -> None:
    """The sink answering an outside client as the destination itself (nothing NATed it) answers back through
    the node, the way the client's packets went. Straight back, the node would see the client's ACK without
    the SYN-ACK, and conntrack (kube-proxy's INVALID drop) would kill a connection no rule refused; where a
    real network routes the answer is not in the dump. Endpoints in the sink still answer directly."""
    host = host_prefixlen(setup.source)
    b.ipr["world"].route(
        "add",
        dst=f"{setup.source}/{host}",
        gateway=setup.node_ip,
        oif=b.index("world", "node"),
        flags=RTNH_F_ONLINK,
        table=RETURN_TABLE,
    )
    b.ipr["world"].rule(
        "add", iifname="sink", src=setup.dst_ip, src_len=host, table=RETURN_TABLE, priority=101, family=_family(setup)
    )


def _pods(b: NetBuilder, setup: Setup) -> None:
    assert setup.pod_cidr is not None and setup.bridge_ip is not None
    net = ipaddress.ip_network(setup.pod_cidr)
    gateway = setup.bridge_ip
    bridge = b.bridge("node", "cni0", gateway, net.prefixlen)
    if setup.ipv6:
        b.address("node", bridge, WORLD_LINK_LOCAL, 64)
    # Pods sit behind the node: the router forwards their CIDR to the node's own address.
    b.ipr["world"].route(
        "add", dst=setup.pod_cidr, gateway=setup.node_ip, oif=b.index("world", "node"), flags=RTNH_F_ONLINK
    )
    for i, ip in enumerate(setup.pod_ips()):
        actor = f"pod-{ip}"
        b.open(actor)
        port = f"veth{i}"
        b.veth("node", port, actor, "eth0")
        b.up("node", port, master=b.index("node", "cni0"))
        # As the CNI bridge plugin does with hairpinMode: a pod may reach itself through a Service.
        b.ipr["node"].brport("set", index=b.index("node", port), mode=1)
        pod_if = b.up(actor, "eth0", ip, net.prefixlen)
        if setup.ipv6:
            b.address(actor, pod_if, f"fe80::{i + 2:x}", 64)
        b.ipr[actor].route("add", dst=default_route(gateway), gateway=gateway)
