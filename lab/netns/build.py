"""realize: turn a Topology into namespaces, veths, bridges, addresses, routes and sysctls.

Layout (all inside namespaces named <prefix>-<actor>; nothing in the host's namespace):
  fabric   bridge br0 = the shared L2 underlay; its address is the underlay gateway, which also
           routes external/LB VIPs to a node (a pass-through load balancer)
  node     eth0 on the underlay, bridge cni0 holding the pod CIDR's first address, routes to the
           other nodes' pod CIDRs, forwarding and br_netfilter as kubelet/CNI leave them
  pod      eth0 (veth into the node's cni0), default route via cni0
  external eth0 on the underlay, default route via the gateway
Interfaces are created straight into their namespaces (veth with a peer namespace), never in the host.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

from lab.model.topology import NodeSpec, PodSpec, Topology
from lab.netns.enter import ensure_br_netfilter, write_sysctls
from lab.netns.links import NetBuilder
from lab.netns.runs import new_prefix, release, remove_namespaces

FABRIC = "fabric"


@dataclass
class Realized:
    """A built topology: which namespace each actor lives in, and how long building took."""

    prefix: str
    topology: Topology
    namespaces: dict[str, str]
    seconds: float = 0.0
    pod_ports: dict[str, str] = field(default_factory=dict)  # pod → its veth on the node's cni0

    def ns_of(self, actor: str) -> str:
        pod = next((p for p in self.topology.pods if p.name == actor), None)
        if pod is not None and pod.host_network:
            return self.namespaces[pod.node]
        return self.namespaces[actor]

    def teardown(self) -> None:
        remove_namespaces(list(self.namespaces.values()))
        release(self.prefix)


def _prefixlen(cidr: str) -> int:
    return ipaddress.IPv4Network(cidr).prefixlen


def _veth_name(pod: PodSpec, index: int) -> str:
    name = f"veth-{pod.name}"
    return name if len(name) <= 15 else f"veth{index}"


class _Builder(NetBuilder):
    def __init__(self, topo: Topology, prefix: str, stack: ExitStack) -> None:
        super().__init__(prefix, stack)
        self.topo = topo

    def fabric(self) -> None:
        self.open(FABRIC)
        underlay = self.topo.cluster.underlay
        self.bridge(FABRIC, "br0", self.topo.cluster.gateway_ip, _prefixlen(underlay))
        write_sysctls(self.ns(FABRIC), {"net.ipv4.ip_forward": "1", "net.bridge.bridge-nf-call-iptables": "0"})

    def attach_to_underlay(self, actor: str, ip: str) -> None:
        self.veth(actor, "eth0", FABRIC, actor[:15])
        self.up(FABRIC, actor[:15], master=self.index(FABRIC, "br0"))
        self.up(actor, "eth0", ip, _prefixlen(self.topo.cluster.underlay))
        self.ipr[actor].route("add", dst="0.0.0.0/0", gateway=self.topo.cluster.gateway_ip)

    def node(self, node: NodeSpec) -> None:
        self.open(node.name)
        self.attach_to_underlay(node.name, node.ip)
        promisc = {"flags": 0x100, "change": 0x100} if self.topo.cluster.hairpin_mode == "promiscuous-bridge" else {}
        self.bridge(node.name, "cni0", node.bridge_ip, _prefixlen(node.pod_cidr), **promisc)
        for other in self.topo.nodes:
            if other.name != node.name:
                self.ipr[node.name].route("add", dst=other.pod_cidr, gateway=other.ip)
        write_sysctls(
            self.ns(node.name),
            {
                "net.ipv4.ip_forward": "1",
                "net.bridge.bridge-nf-call-iptables": "1" if self.topo.cluster.br_netfilter else "0",
                # kube-proxy (iptables, localhost NodePorts on) sets this so 127.0.0.1:NodePort can be DNATed.
                "net.ipv4.conf.all.route_localnet": "1",
            },
        )

    def pod(self, pod: PodSpec, index: int) -> str:
        node = self.topo.node(pod.node)
        self.open(pod.name)
        port = _veth_name(pod, index)
        self.veth(node.name, port, pod.name, "eth0")
        self.up(node.name, port, master=self.index(node.name, "cni0"))
        if self.topo.cluster.hairpin_mode == "hairpin-veth":
            self.ipr[node.name].brport("set", index=self.index(node.name, port), mode=1)
        self.up(pod.name, "eth0", pod.ip, _prefixlen(node.pod_cidr))
        self.ipr[pod.name].route("add", dst="0.0.0.0/0", gateway=node.bridge_ip)
        return port

    def routes_to_vips(self) -> None:
        for vip, via in self.topo.lb_routes:
            self.ipr[FABRIC].route("add", dst=f"{vip}/32", gateway=via)


@contextmanager
def realize(topo: Topology, prefix: str | None = None) -> Iterator[Realized]:
    """Build the topology; on any failure, or on leaving the block, remove everything built."""
    ensure_br_netfilter()
    prefix = prefix or new_prefix()
    start = time.perf_counter()
    realized = Realized(prefix, topo, {})
    try:
        with ExitStack() as stack:
            builder = _Builder(topo, prefix, stack)
            try:
                builder.fabric()
                for node in topo.nodes:
                    builder.node(node)
                for ext in topo.externals:
                    builder.open(ext.name)
                    builder.attach_to_underlay(ext.name, ext.ip)
                for i, pod in enumerate(topo.pods):
                    if not pod.host_network:
                        realized.pod_ports[pod.name] = builder.pod(pod, i)
                builder.routes_to_vips()
            finally:
                realized.namespaces = dict(builder.names)
        realized.seconds = time.perf_counter() - start
        yield realized
    finally:
        realized.teardown()
