"""realize: turn a Topology into namespaces, veths, bridges, addresses, routes and sysctls.

Layout (all inside namespaces named <prefix>-<actor>; nothing in the host's namespace):
  _fabric  bridge br0 = the shared L2 underlay; its address is the underlay gateway, which also
           routes external/LB VIPs to a node (a pass-through load balancer), each router's LAN to
           that router and, with cni bridge, each node's pod CIDR to that node. With load balancers
           or an egress gateway (lab/install/actors.py) it sends no ICMP redirects and tracks bridged traffic
           too (bridge-nf-call-iptables), so a load balancer's NAT is undone on answers that go from
           node to node over the underlay, as a cloud network does wherever the answer travels.
  node     eth0 on the underlay, forwarding and br_netfilter as kubelet/CNI leave them, the sysctls kube-proxy
           sets on start (route_localnet, as render decided: NodeSetup), and per cni:
           bridge         cni0 holding the pod CIDR's first address, routes to the other nodes' pod CIDRs
                          via their underlay addresses
           routed-tunnel  no bridge: a /32 route per pod to its veth (proxy ARP answers the pods' gateway
                          169.254.1.1, as Calico does); a tunnel device with the pod block's first (network)
                          address, the other nodes' pod CIDRs routed through it: ipip `tunl0` or VXLAN
                          `vxlan.calico` with static neighbour and FDB entries, as the pipeline decided (it asks
                          the host's kernel for ipip)
           flannel        cni0 as bridge; flannel's vxlan backend: `flannel.1` with the pod block's network
                          address, the other nodes' pod CIDRs routed through it onlink, static neighbour and
                          FDB entries (its chains are install's: lab/install/flannel.py)
  pod      eth0 (veth into the node's cni0), default route via cni0; routed-tunnel: eth0 with the pod's
           /32, default route via 169.254.1.1
  external eth0 on the underlay, default route via the gateway; a router (a host with `network` or
           `routes`) forwards, hashes multipath routes on L4 (fib_multipath_hash_policy=1) and holds
           bridge lan0 with its network's first address; a host `behind` it hangs off lan0
Interfaces are created straight into their namespaces (veth with a peer namespace), never in the host.
Dual-stack: every interface above that holds an address holds one of each family (br0 the secondary underlay's
gateway, eth0 the secondary node or host address, cni0 the secondary pod block's first, a pod its status.podIPs[1]),
each actor has a default route per family, and each route to a node's pod block has its secondary twin.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from lab.describe.topology import DEFAULT_MTU, FLANNEL_DEVICE, ExternalSpec, NodeSpec, PodSpec, Topology
from lab.paths import NETNS_DIR
from lab.realize.enter import NamespaceError, ensure_br_netfilter, write_sysctls
from lab.realize.families import (
    address,
    bridge_filtering,
    default_route,
    forwarding,
    host_prefixlen,
    multipath_hash_l4,
    network,
    versions,
)
from lab.realize.kernel_names import bridge_port, ifname
from lab.realize.links import NetBuilder
from lab.realize.rtnl import Batch
from lab.realize.runs import new_prefix, release, remove_namespaces
from lab.realize.standins import STAND_INS, fill_stand_ins, routed_blocks
from lab.render.dataplane import NodeSetup

# The actor (its namespace) holding the underlay's bridge: named with a leading '_', as lab.realize.standins's
# STAND_INS is, so that no pod, node or external host (none of whose names holds one) is ever it.
FABRIC = "_fabric"
LAN_BRIDGE = "lan0"
POD_GATEWAY = "169.254.1.1"  # Calico's pods route everything to this link-local address, answered by proxy ARP
VXLAN_DEVICE = "vxlan.calico"
TUNNEL_DEVICES = {"ipip": "tunl0", "vxlan": VXLAN_DEVICE}  # cni routed-tunnel's device, by tunnel kind
VXLAN_ID, VXLAN_PORT = 4096, 4789
# flannel's vxlan backend as its defaults build it (flannel-io/flannel pkg/backend/vxlan/vxlan.go and device.go at
# cdf760595c23292fd03ff4daf03638ac1ceef417): VNI 1 (defaultVNI) names the device flannel.1; Port 0 leaves the
# kernel's default destination port, 8472; the device's MTU is the link's less 50 (newVXLANDevice).
FLANNEL_VNI, FLANNEL_PORT, VXLAN_OVERHEAD = 1, 8472, 50
SCOPE_LINK = 253
IFF_PROMISC = 0x100
LOOPBACK = 1  # lo's index in every namespace
# Indexes the builder gives a pod's veth (rtnetlink takes them on creation, so none is asked for): eth0 above the
# fallback tunnel devices a namespace may be born with (tunl0, sit0, ... when their modules are loaded), and the
# node's end of pod i's veth 1000 + i.
POD_ETH0 = 16
PORT_INDEX_BASE = 1000
DEDUP_CHAIN = "KUBE-DEDUP"  # kubelet's (kubenet) ebtables chain against promiscuous-bridge duplicates


def _run(netns: str, argv: tuple[str, ...]) -> None:
    """A command in a namespace being built (install's tools come after realize)."""
    done = subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True, text=True, check=False)
    if done.returncode:
        said = (done.stderr or done.stdout).strip()
        raise NamespaceError(f"`{shlex.join(argv)}` in {netns} exited with {done.returncode}: {said}")


def _vtep_mac(index: int) -> str:
    return f"66:ee:00:00:{index >> 8 & 0xFF:02x}:{index & 0xFF:02x}"


@dataclass(frozen=True)
class _Grown:
    """The live maps behind a Realized's read-only views, which plug_pods (and nothing else) adds to."""

    namespaces: dict[str, str]
    pod_ports: dict[str, str]
    pods: dict[str, PodSpec] = field(default_factory=dict)


@dataclass(frozen=True)
class Realized:
    """A built topology: which namespace each actor lives in, and how long building took. Later stages only
    read it: what they start is theirs to stop, and a step's new Topology travels beside it (lab.pipeline)."""

    prefix: str
    topology: Topology  # the one built; a step changes only what kube-proxy is told, and plugs the pods it creates
    namespaces: Mapping[str, str]
    seconds: float
    pod_ports: Mapping[str, str]  # pod → its veth on the node's cni0
    tunnel_device: str = ""  # cni routed-tunnel: "tunl0" (ipip) or "vxlan.calico" (VXLAN); flannel: "flannel.1"
    _grown: _Grown = field(default_factory=lambda: _Grown({}, {}), compare=False, repr=False)

    @property
    def plugged(self) -> Mapping[str, PodSpec]:
        """Pods plugged in after the build (plug_pods), by name, in the order they were."""
        return MappingProxyType(self._grown.pods)

    def pod(self, name: str) -> PodSpec:
        """A pod built at the start or plugged in since."""
        return self._grown.pods.get(name) or self.topology.pod(name)

    def has_pod(self, name: str) -> bool:
        return name in self._grown.pods or name in self._built_pods

    @cached_property
    def _built_pods(self) -> frozenset[str]:
        return frozenset(p.name for p in self.topology.built_pods)

    @cached_property
    def _on_node_network(self) -> Mapping[str, str]:
        """hostNetwork pod → its node, whose namespace it shares (pods plugged in later are never such)."""
        return {p.name: p.node for p in self.topology.built_pods if p.host_network}

    def ns_of(self, actor: str) -> str:
        return self.namespaces[self._on_node_network.get(actor, actor)]


def unplug_pod(realized: Realized, pod: str) -> None:
    """A deleted pod's network goes: its veth pair is removed from the node's side (with it the pod's address
    and, for cni routed-tunnel, its /32 route). The namespace stays until the run ends, unreachable, so that
    what a backend had open there is closed by its owner."""
    node = realized.pod(pod).node
    _run(realized.namespaces[node], ("ip", "link", "del", realized.pod_ports[pod]))


def plug_pods(realized: Realized, pods: Sequence[PodSpec]) -> None:
    """Pods a step creates that the build did not foresee (a scale-up asked through lab.api), networked as the
    build networks its own: each one's namespace (recorded before it is made), a veth into its node's cni0 or
    cni routed-tunnel's /32 route with proxy ARP, its address and default route. Realized's maps then name them,
    and the run's teardown removes them with the rest. Pods on the pod network only (the caller refuses others)."""
    grown = realized._grown
    with ExitStack() as stack:
        builder = _Builder(realized.topology, realized.prefix, stack, {}, "")
        builder.names = grown.namespaces  # the run's own map: what is made here is torn down with the rest
        for node in dict.fromkeys(p.node for p in pods):
            builder.join(node)
        first = len(realized.topology.built_pods) + len(grown.pods)  # veth indexes no pod of the run took
        ports = builder.pods([(first + i, pod) for i, pod in enumerate(pods)])
    grown.pod_ports.update(ports)
    grown.pods.update({pod.name: pod for pod in pods})


def _nothing(*_: object) -> None:
    """No work alongside the build."""


def _prefixlen(cidr: str) -> int:
    return network(cidr).prefixlen


def _versions(topo: Topology) -> frozenset[int]:
    """The IP versions the topology's addresses are of: what each router forwards, and whether its namespaces
    need IPv6 on. A pod's address is of its node's pod CIDR: the CIDRs stand for the (many) pods."""
    nodes = [address for n in topo.nodes for address in (n.ip, n.pod_cidr, n.secondary_ip, n.secondary_pod_cidr)]
    externals = [address for e in topo.externals for address in (e.ip, e.secondary_ip)]
    return versions([a for a in (topo.cluster.gateway_ip, topo.cluster.secondary_gateway_ip, *nodes, *externals) if a])


def _pod_blocks(node: NodeSpec) -> list[tuple[str, str]]:
    """The node's pod blocks with its address of each one's family, where the others route them (cni bridge)."""
    blocks = [(node.pod_cidr, node.ip)]
    if node.secondary_pod_cidr:
        blocks.append((node.secondary_pod_cidr, node.secondary_ip))
    return blocks


def _veth_name(pod: PodSpec, index: int) -> str:
    """veth-NAME when it fits and NAME is plain, else by the pod's index (unique on its node)."""
    name = ifname(pod.name, "veth-")
    return name if name == f"veth-{pod.name}" else f"veth{index}"


class _Builder(NetBuilder):
    def __init__(
        self, topo: Topology, prefix: str, stack: ExitStack, setups: Mapping[str, NodeSetup], tunnel: str
    ) -> None:
        self.versions = _versions(topo)
        super().__init__(prefix, stack, ipv6=6 in self.versions)
        self.topo = topo
        self.setups = setups
        self.tunnel = tunnel
        self.tunnel_device = FLANNEL_DEVICE if topo.cluster.cni == "flannel" else TUNNEL_DEVICES.get(tunnel, "")

    def fabric(self) -> None:
        self.open(FABRIC)
        cluster = self.topo.cluster
        underlay = cluster.underlay
        br0 = self.bridge(FABRIC, "br0", cluster.gateway_ip, _prefixlen(underlay))
        if cluster.secondary_gateway_ip:
            self.address(FABRIC, br0, cluster.secondary_gateway_ip, _prefixlen(cluster.secondary_underlay))
        sysctls = forwarding(self.versions) | bridge_filtering(self.versions, on=False)
        if self.topo.has_actors:
            sysctls |= {f"net.ipv4.conf.{d}.send_redirects": "0" for d in ("all", "default", "br0")}
            if self.topo.load_balancers or self.topo.egress:
                sysctls |= bridge_filtering(self.versions, on=True)
        write_sysctls(self.ns(FABRIC), sysctls)
        owned = {self.topo.cluster.gateway_ip}
        for lb in self.topo.load_balancers:
            if lb.address not in owned:
                owned.add(lb.address)
                inside = address(lb.address) in network(underlay)
                prefixlen = _prefixlen(underlay) if inside else host_prefixlen(lb.address)
                self.address(FABRIC, self.index(FABRIC, "br0"), lb.address, prefixlen)

    def attach_to_underlay(self, actor: str, ip: str, mtu: int = DEFAULT_MTU, secondary_ip: str = "") -> None:
        """The actor's eth0 on the underlay's bridge, both ends of the link at `mtu`: a frame bigger than a
        node's link is dropped by the bridge on its way there, without a word, as a switch port does. With a
        `secondary_ip` (dual-stack) eth0 holds it too, with a default route of its family."""
        port = bridge_port(actor)
        self.veth(actor, "eth0", FABRIC, port)
        self.up(FABRIC, port, master=self.index(FABRIC, "br0"), mtu=mtu)
        if (self.topo.load_balancers or self.topo.egress) and actor in {n.name for n in self.topo.nodes}:
            # br_netfilter DNATs a load balancer's frame at the bridge: sent back to the node it came from,
            # the bridge would need hairpin mode on that port (a cloud network delivers it, so allow it).
            self.ipr[FABRIC].brport("set", index=self.index(FABRIC, port), mode=1)
        eth0 = self.up(actor, "eth0", ip, _prefixlen(self.topo.cluster.underlay), mtu=mtu)
        if any(node.mtu != DEFAULT_MTU for node in self.topo.nodes):
            # Links of different MTUs: the underlay carries frames, each checked against the MTU of the link it
            # goes down, as a switch does.
            self.frames_only(FABRIC, port)
        gateway = self.topo.cluster.gateway_ip
        self.ipr[actor].route("add", dst=default_route(gateway), gateway=gateway)
        if secondary_ip:
            cluster = self.topo.cluster
            self.address(actor, eth0, secondary_ip, _prefixlen(cluster.secondary_underlay))
            gateway = cluster.secondary_gateway_ip
            self.ipr[actor].route("add", dst=default_route(gateway), gateway=gateway)

    def node(self, node: NodeSpec) -> None:
        self.open(node.name)
        self.attach_to_underlay(node.name, node.ip, node.mtu, node.secondary_ip)
        if self.topo.cluster.cni == "routed-tunnel":
            self.tunnel_to_other_nodes(node)
        else:
            cni0 = self.bridge(node.name, "cni0", node.bridge_ip, _prefixlen(node.pod_cidr))
            if node.secondary_bridge_ip:
                self.address(node.name, cni0, node.secondary_bridge_ip, _prefixlen(node.secondary_pod_cidr))
            if self.topo.cluster.cni == "flannel":
                self.flannel_vxlan(node)
            else:
                routes = self.batch(node.name)  # one per other node and family: thousands at a hundred nodes
                for other in routed_blocks(self.topo):
                    if other.name != node.name:
                        for block, via in _pod_blocks(other):
                            routes.route(block, gateway=via)
                routes.commit()
        write_sysctls(
            self.ns(node.name),
            {
                **forwarding(self.versions),
                **bridge_filtering(self.versions, on=self.topo.cluster.br_netfilter),
                **dict(self.setups[node.name].sysctls),
            },
        )

    def promiscuous_bridge(self, node: NodeSpec) -> None:
        """kubelet --hairpin-mode=promiscuous-bridge, as kubenet does it once a pod is attached: cni0 promiscuous,
        no hairpin flag on the pods' ports (CNI bridge "hairpinMode": false, see pod()), and kubelet's ebtables
        dedup chain. All three are modelled, with the real ebtables, so the probes show what the kernel makes of
        the combination.

        A promiscuous bridge also passes the frames it forwards up to the node's own stack, which may route a
        copy back out of cni0: KUBE-DEDUP drops such copies (cni0's MAC, a pod's source address) and keeps what
        the node sends from the gateway address (a masqueraded hairpin).
        """
        ipr, ns, cni0 = self.ipr[node.name], self.ns(node.name), self.index(node.name, "cni0")
        # Only the PROMISC bit: `flags` alone would be taken for the whole set and clear UP.
        ipr.link("set", index=cni0, flags=IFF_PROMISC, change=IFF_PROMISC)
        # Read now, with the pods' ports attached: a bridge takes the lowest MAC of its ports.
        mac = ipr.link("get", index=cni0)[0].get_attr("IFLA_ADDRESS")
        frames = ("-p", "IPv4", "-s", mac, "-o", "veth+")
        for rule in (
            ("-N", DEDUP_CHAIN),
            ("-A", "OUTPUT", "-j", DEDUP_CHAIN),
            ("-A", DEDUP_CHAIN, *frames, "--ip-src", node.bridge_ip, "-j", "ACCEPT"),
            ("-A", DEDUP_CHAIN, *frames, "--ip-src", node.pod_cidr, "-j", "DROP"),
        ):
            _run(ns, ("ebtables", "-t", "filter", *rule))

    def tunnel_to_other_nodes(self, node: NodeSpec) -> None:
        """Calico's node: the tunnel device with an address from the pod block, other blocks through it."""
        ipr, others = self.ipr[node.name], [n for n in self.topo.nodes if n.name != node.name]
        eth0 = self.index(node.name, "eth0")
        # The kernel's own MTU for the device (the link's less the encapsulation) unless the scenario sets one.
        mtu = {"mtu": self.topo.cluster.tunnel_mtu} if self.topo.cluster.tunnel_mtu else {}
        if self.tunnel == "ipip":
            # Loading ipip gives every namespace a fallback tunl0 (remote any): Calico configures exactly that
            # one. Where the fallback is off (fb_tunnels_only_for_init_net), make a device like it.
            if not ipr.link_lookup(ifname="tunl0"):
                ipr.link("add", ifname="tunl0", kind="ipip")
            dev = self.up(node.name, "tunl0", node.tunnel_ip, 32, **mtu)
            if dev < eth0:
                # The fallback tunl0 is born with the namespace, before eth0; on a real node the NIC comes
                # first. Masquerade through an interface without an address (a pod's veth) takes the first
                # address in device order (lo first, by design), so put the node's address on lo to keep
                # the real order's answer (the node's IP) rather than tunl0's.
                self.address(node.name, self.index(node.name, "lo"), node.ip, 32)
            routes = self.batch(node.name)
            for other in others:
                routes.route(other.pod_cidr, gateway=other.ip, oif=dev, onlink=True)
            routes.commit()
        else:
            self.vxlan_to_other_nodes(node, VXLAN_DEVICE, VXLAN_ID, VXLAN_PORT, **mtu)
        # Calico's own block: anything in it without a pod route goes nowhere.
        ipr.route("add", dst=node.pod_cidr, type="blackhole")

    def vxlan_to_other_nodes(self, node: NodeSpec, device: str, vni: int, port: int, **mtu: int) -> None:
        """A VXLAN device on eth0 holding the node's tunnel address (a /32), and per other node its tunnel address's
        static neighbour and FDB entries and its pod block routed through it onlink: Calico's vxlan.calico and
        flannel's flannel.1 alike."""
        nodes = self.topo.nodes
        self.vxlan(
            node.name, device, vni, node.ip, self.index(node.name, "eth0"), port, _vtep_mac(nodes.index(node) + 1)
        )
        dev = self.up(node.name, device, node.tunnel_ip, **mtu)
        routes = self.batch(node.name)
        for other in nodes:
            if other.name != node.name:
                self.vtep(node.name, dev, other.tunnel_ip, _vtep_mac(nodes.index(other) + 1), other.ip)
                routes.route(other.pod_cidr, gateway=other.tunnel_ip, oif=dev, onlink=True)
        routes.commit()

    def flannel_vxlan(self, node: NodeSpec) -> None:
        """flannel's vxlan backend on the node: flannel.1 with the block's network address as a /32 (so no
        broadcast route is made), and for each other node's lease the neighbour entry of its flannel.1 address,
        the FDB entry of its VTEP MAC and the route `podCIDR via <its flannel.1 address> dev flannel.1 onlink`
        (handleSubnetEvents in flannel-io/flannel pkg/backend/vxlan/vxlan_network.go at
        cdf760595c23292fd03ff4daf03638ac1ceef417; no learning, as flannel's default Learning false)."""
        mtu = node.mtu - VXLAN_OVERHEAD
        self.vxlan_to_other_nodes(node, FLANNEL_DEVICE, FLANNEL_VNI, FLANNEL_PORT, mtu=mtu)

    def pods(self, pods: list[tuple[int, PodSpec]]) -> dict[str, str]:
        """Every pod's namespace and veth, node by node in batches: the node's pods' namespaces made at once, one
        write to the node for all their veths, one to each pod for its own side (then its socket is closed: only
        one node's pods hold a socket at a time, not the whole cluster's, which a file-descriptor limit may not
        allow). The pod's port on the node is the veth's name
        there (see _veth_name)."""
        routed = self.topo.cluster.cni == "routed-tunnel"
        ports: dict[str, str] = {}
        for node in self.topo.nodes:
            mine = [(i, pod) for i, pod in pods if pod.node == node.name]
            if not mine:
                continue
            batches = self.open_all([pod.name for _, pod in mine])
            on_node = self.batch(node.name)
            with ExitStack() as fds:
                for i, pod in mine:
                    port, index = _veth_name(pod, i), PORT_INDEX_BASE + i
                    ports[pod.name] = port
                    fd = os.open(NETNS_DIR / self.ns(pod.name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                    fds.callback(os.close, fd)
                    on_node.veth(port, index, "eth0", POD_ETH0, fd)
                    if routed:
                        on_node.up(index)
                        on_node.route(f"{pod.ip}/{host_prefixlen(pod.ip)}", oif=index, scope=SCOPE_LINK)
                    else:
                        on_node.up(index, master=self.index(node.name, "cni0"))
                        if self.topo.cluster.hairpin_mode == "hairpin-veth":
                            on_node.hairpin(index)
                on_node.commit()
            if routed:
                # Calico's host side of each pod: proxy ARP answers the pod's gateway at once.
                sysctls: dict[str, str] = {}
                for _, pod in mine:
                    port = ports[pod.name]
                    sysctls |= {f"net.ipv4.conf.{port}.proxy_arp": "1", f"net.ipv4.neigh.{port}.proxy_delay": "0"}
                write_sysctls(self.ns(node.name), sysctls)
            for _, pod in mine:
                self.pod_side(batches[pod.name], pod)
                batches[pod.name].sock.close()
        for _, pod in pods:  # Realized.namespaces lists the pods in the workload's order, not the order made
            self.names[pod.name] = self.names.pop(pod.name)
        return ports

    def pod_side(self, batch: Batch, pod: PodSpec) -> None:
        """lo and eth0 up, the pod's address, and its default route: via cni0 (bridge), or via Calico's
        169.254.1.1 on the link (routed-tunnel, the pod holding its /32)."""
        batch.up(LOOPBACK)
        if self.topo.cluster.cni == "routed-tunnel":
            batch.address(POD_ETH0, pod.ip, host_prefixlen(pod.ip))
            batch.up(POD_ETH0)
            batch.route(f"{POD_GATEWAY}/32", oif=POD_ETH0, scope=SCOPE_LINK)
            batch.route("0.0.0.0/0", gateway=POD_GATEWAY, oif=POD_ETH0)
        else:
            node = self.topo.node(pod.node)
            batch.address(POD_ETH0, pod.ip, _prefixlen(node.pod_cidr))
            if pod.secondary_ip:
                batch.address(POD_ETH0, pod.secondary_ip, _prefixlen(node.secondary_pod_cidr))
            batch.up(POD_ETH0)
            for gateway in (node.bridge_ip, node.secondary_bridge_ip if pod.secondary_ip else ""):
                if gateway:
                    batch.route(default_route(gateway), gateway=gateway)
        batch.commit()

    def routes_to_vips(self) -> None:
        for vip, via in self.topo.lb_routes:
            self.ipr[FABRIC].route("add", dst=f"{vip}/{host_prefixlen(vip)}", gateway=via)
        if self.topo.cluster.cni == "bridge":
            # The underlay routes each node's pod CIDR to it, as a cloud network's routes for a bridge CNI do (VPC
            # routes, TKE's GlobalRouter): answers a load balancer or the egress gateway un-NATs back to a pod
            # address find their way, and so does the gateway's own ICMP error for a pod's packet it cannot route,
            # as it does for a host's. (A tunnel CNI's underlay knows no pod address: that is why it tunnels.)
            routes = self.batch(FABRIC)
            for node in routed_blocks(self.topo):
                for block, via in _pod_blocks(node):
                    routes.route(block, gateway=via)
            routes.commit()

    def stand_ins(self) -> None:
        """A sliced cluster's stand-in nodes, all in one namespace on the underlay (lab/realize/standins.py)."""
        self.open(STAND_INS)
        self.attach_to_underlay(STAND_INS, self.topo.stand_ins[0].ip)
        fill_stand_ins(self, self.topo)

    def external(self, ext: ExternalSpec) -> None:
        self.open(ext.name)
        if ext.behind:
            router = next(e for e in self.topo.externals if e.name == ext.behind)
            port = bridge_port(ext.name)
            self.veth(ext.name, "eth0", router.name, port)
            self.up(router.name, port, master=self.index(router.name, LAN_BRIDGE))
            self.up(ext.name, "eth0", ext.ip, _prefixlen(router.network))
            self.ipr[ext.name].route("add", dst=default_route(router.lan_ip), gateway=router.lan_ip)
            return
        self.attach_to_underlay(ext.name, ext.ip, secondary_ip=ext.secondary_ip)
        if not ext.is_router:
            return
        write_sysctls(self.ns(ext.name), forwarding(self.versions) | multipath_hash_l4(self.versions))
        if ext.network:
            self.bridge(ext.name, LAN_BRIDGE, ext.lan_ip, _prefixlen(ext.network))
            # The underlay's gateway knows the way back to this router's hosts.
            self.ipr[FABRIC].route("add", dst=ext.network, gateway=ext.ip)
        for route in ext.routes:
            if len(route.via) == 1:
                self.ipr[ext.name].route("add", dst=route.to, gateway=route.via[0])
            else:
                hops = [{"gateway": hop} for hop in route.via]
                self.ipr[ext.name].route("add", dst=route.to, multipath=hops)


@contextmanager
def realize(
    topo: Topology,
    setups: Mapping[str, NodeSetup],
    tunnel: str,
    prefix: str | None = None,
    alongside: Callable[[], AbstractContextManager[Callable[[str, str], object]]] | None = None,
) -> Iterator[Realized]:
    """Build the topology, each node as `setups` (render's, by node name) says and cni routed-tunnel's device
    of the `tunnel` kind ("ipip" or "vxlan"; "" for cni bridge); on any failure, or on leaving the block,
    remove everything built. `alongside()` is entered before the nodes are built and left once the hosts and pods
    are; what it gives is called with each node and its namespace as soon as that node is built: work that needs
    only the node (kube-proxy's first sync) runs meanwhile, and is over before anything is removed."""
    kinds = tuple(TUNNEL_DEVICES) if topo.cluster.cni == "routed-tunnel" else ("",)
    if tunnel not in kinds:
        raise ValueError(f"cni {topo.cluster.cni} is built with tunnel {' or '.join(map(repr, kinds))}, not {tunnel!r}")
    ensure_br_netfilter()
    prefix = prefix or new_prefix()
    start = time.perf_counter()
    names: dict[str, str] = {}  # actor → namespace, filled as each is made: what to remove however far it got
    try:
        with ExitStack() as stack:
            builder = _Builder(topo, prefix, stack, setups, tunnel)
            names = builder.names
            builder.fabric()
            with alongside() if alongside else nullcontext(_nothing) as node_built:
                for node in topo.nodes:
                    builder.node(node)
                    node_built(node.name, names[node.name])
                if topo.stand_ins:
                    builder.stand_ins()
                # Routers before the hosts behind them.
                for ext in sorted(topo.externals, key=lambda e: bool(e.behind)):
                    builder.external(ext)
                pod_ports = builder.pods([(i, pod) for i, pod in enumerate(topo.built_pods) if not pod.host_network])
            if topo.cluster.cni == "bridge" and topo.cluster.hairpin_mode == "promiscuous-bridge":
                for node in topo.nodes:
                    builder.promiscuous_bridge(node)
            builder.routes_to_vips()
        seconds = time.perf_counter() - start
        grown = _Grown(names, pod_ports)  # plug_pods adds to them: the views below show it, the teardown removes it
        yield Realized(
            prefix,
            topo,
            MappingProxyType(names),
            seconds,
            MappingProxyType(pod_ports),
            builder.tunnel_device,
            grown,
        )
    finally:
        remove_namespaces(list(names.values()))
        release(prefix)
