"""render: what kube-proxy leaves on each node, per proxy mode, as the texts each tool loads, and what a node
needs set before (realize is told, it asks no renderer)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from lab.describe.families import Family
from lab.describe.kernel_when import release_numbers
from lab.describe.topology import Topology
from lab.render.kubeproxy import iptables, nftables
from lab.render.kubeproxy.adapter import proxy_config, service_ports
from lab.render.kubeproxy.affinity import AffinityLookup
from lab.render.kubeproxy.because import Because
from lab.render.kubeproxy.conntrack import start_sysctls
from lab.render.kubeproxy.iptables import SharedRules, render_iptables
from lab.render.kubeproxy.ipvs import IpvsRules, render_ipvs, sync_lines
from lab.render.kubeproxy.nftables import LocalhostNodePort, render_nftables
from lab.render.kubeproxy.ports import HeldPort, held_ports
from lab.render.kubeproxy.versions import Release

IPVS_DEVICE = "kube-ipvs0"
ROUTE_LOCALNET = "net.ipv4.conf.all.route_localnet"


@dataclass(frozen=True)
class NodeSetup:
    """What render decided one node needs before any rule is loaded (realize asks no renderer): the sysctls
    kube-proxy sets when it starts."""

    sysctls: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class NodeDataplane:
    """Everything to load into one node, as the texts each tool reads."""

    mode: str
    iptables: str = ""
    nft: str = ""
    ipsets: str = ""
    ipvs: str = ""  # ipvsadm-restore lines: every virtual server, or (a resync) what changes
    dummy_addresses: tuple[str, ...] = ()
    sysctls: tuple[tuple[str, str], ...] = ()  # ipvs': written once ipvsadm has loaded ip_vs
    held_ports: tuple[HeldPort, ...] = ()  # the sockets kube-proxy up to 1.23 holds open (ports.py)
    # The listeners of 1.37's userspace proxy for localhost NodePorts (nftables mode with its feature gate).
    localhost_proxy: tuple[LocalhostNodePort, ...] = ()
    setup: NodeSetup = NodeSetup()  # what realize sets on the node before any of this is loaded
    # The family of the proxier that wrote this (iptables then means ip6tables-restore text, nft an ip6 table), and
    # in a dual-stack cluster the secondary family's proxier's output: kube-proxy runs one proxier per family.
    family: Family = "IPv4"
    other_family: NodeDataplane | None = None
    # Why the rules that mark for masquerade or choose an endpoint were written (render/kubeproxy/because.py).
    because: tuple[Because, ...] = ()

    @property
    def proxiers(self) -> tuple[NodeDataplane, ...]:
        """Each family's proxier's output, the primary first: what each loads on the node."""
        return (self, self.other_family) if self.other_family else (self,)

    @property
    def reasons(self) -> tuple[Because, ...]:
        """Why every proxier's rules that mark for masquerade or choose an endpoint were written."""
        return tuple(because for proxier in self.proxiers for because in proxier.because)

    def proxied(self) -> list[str]:
        """The localhost proxy's listeners, one line each (`lab render` prints them as comments after the rules)."""
        return [
            f"kube-proxy listens on 127.0.0.1:{p.node_port}/TCP for {p.service} -> {', '.join(p.endpoints)}"
            for p in self.localhost_proxy
        ]

    def text(self) -> str:
        """What `lab render` prints: each part under a heading naming the tool that loads it; each family's
        proxier under its own heading when the cluster is not IPv4 alone."""
        if self.family == "IPv4" and self.other_family is None:
            return self._family_text()
        return "".join(
            f"# ==== {p.family} proxier ({_LOADER[p.mode, p.family]})\n{p._family_text()}" for p in self.proxiers
        )

    def _family_text(self) -> str:
        if self.mode == "iptables":
            return self.iptables
        if self.mode == "nftables":
            return self.nft + "".join(f"# {line}\n" for line in self.proxied())
        parts = [
            (f"ip addr add <each> dev {IPVS_DEVICE}", "\n".join(self.dummy_addresses)),
            ("ipset restore", self.ipsets),
            (_LOADER["iptables", self.family], self.iptables),
            ("ipvsadm-restore", self.ipvs),
            ("sysctl", "\n".join(f"{k} = {v}" for k, v in self.sysctls)),
        ]
        return "".join(f"# ---- {tool}\n{body.rstrip()}\n" for tool, body in parts)


_LOADER = {
    ("iptables", "IPv4"): "iptables-restore",
    ("iptables", "IPv6"): "ip6tables-restore",
    ("nftables", "IPv4"): "nft -f: table ip kube-proxy",
    ("nftables", "IPv6"): "nft -f: table ip6 kube-proxy",
    ("ipvs", "IPv4"): "ipvs",
    ("ipvs", "IPv6"): "ipvs",
}


def kernel_version(release: str) -> tuple[int, int]:
    """A kernel release's (major, minor): `6.1.0-50-amd64` → (6, 1)."""
    major, minor, *_ = release_numbers(release)
    return major, minor


def _setup(topo: Topology, route_localnet: bool) -> NodeSetup:
    """What kube-proxy sets on start, before the rules that need it: its conntrack sysctls, and route_localnet so
    NodePorts answer on 127.0.0.1 (iptables with localhost NodePorts, ipvs up to 1.20; nftables never)."""
    cluster = topo.cluster
    conntrack = start_sysctls(cluster.tcp_be_liberal, cluster.udp_timeout, cluster.udp_stream_timeout)
    return NodeSetup(conntrack + (((ROUTE_LOCALNET, "1"),) if route_localnet else ()))


def _local(topo: Topology, node_name: str) -> tuple[str, ...]:
    """Every address of the node's own interfaces, loopback's too (each proxier takes its family's)."""
    loopback = ("127.0.0.1", "::1") if "IPv6" in topo.cluster.families else ("127.0.0.1",)
    return (*topo.node(node_name).addresses, *loopback)


def ipvs_rules(topo: Topology, node_name: str, family: Family | None = None) -> IpvsRules:
    """Everything the ipvs proxier of `family` (the primary one by default) writes on the node for this topology."""
    services, config = service_ports(topo, node_name, family), proxy_config(topo, family)
    version = topo.cluster.kube_version
    # kube-proxy makes NodePort virtual servers on every address of the node's own interfaces.
    # The kernel the variant is described for (the pipeline read it); without one, render_ipvs's default.
    kernel = {"kernel": kernel_version(topo.kernel)} if topo.kernel else {}
    return render_ipvs(services, config, _local(topo, node_name), version, **kernel)


def ipvs_plane(rules: IpvsRules, family: Family = "IPv4", previous: IpvsRules | None = None) -> NodeDataplane:
    """The texts install loads of one ipvs proxier's `rules` (with `previous`, as its sync after those: the changes
    to the virtual servers rather than all of them)."""
    virtual_servers = (
        "".join(f"{line}\n" for line in sync_lines(previous, rules))
        if previous is not None
        else rules.ipvsadm_restore()
    )
    return NodeDataplane(
        "ipvs",
        iptables=rules.iptables_restore(),  # ip6tables-restore's for the IPv6 proxier
        ipsets=rules.ipset_restore(),
        ipvs=virtual_servers,
        dummy_addresses=rules.dummy_addresses,
        sysctls=tuple((k.replace("/", "."), str(v)) for k, v in rules.sysctls.items()),
        family=family,
        because=rules.because,
    )


def ipvs_dataplane(
    topo: Topology, node_name: str, rules: IpvsRules, previous: IpvsRules | None, family: Family | None = None
) -> NodeDataplane:
    """What the ipvs proxier of `family` (the primary one by default) loads on the node (ipvs_plane), and what the
    node needs with it. A dual-stack node's two proxiers share the one IPVS table and the one kube-ipvs0, each
    adding its own family's (NewDualStackProxier in openshift/sdn vendor/k8s.io/kubernetes/pkg/proxy/ipvs/
    proxier.go at 70cefcddca885822c5e7214eaf9f0da33eccb26b)."""
    family = family or topo.cluster.families[0]
    plane = ipvs_plane(rules, family, previous)
    # ipvsBindLoadBalancerIPs false: kube-proxy patched as TKE's ipvs mode is, LB IPs stay off kube-ipvs0.
    unbound = set() if topo.cluster.ipvs_bind_lb_ips else {ip for s in topo.services for ip in s.ingress_ips}
    dummy = tuple(a for a in rules.dummy_addresses if a.split("/")[0] not in unbound)
    release = Release.of(topo.cluster.kube_version)
    return replace(
        plane,
        dummy_addresses=dummy,
        setup=_setup(topo, dict(plane.sysctls).get(ROUTE_LOCALNET) == "1"),
        # After its first sync kube-ipvs0's addresses are the node's too: an externalIP on it is held.
        held_ports=held_ports(
            service_ports(topo, node_name, family),
            proxy_config(topo, family),
            (*_local(topo, node_name), *(a.split("/")[0] for a in dummy)),
            release,
        ),
    )


def node_dataplane(
    topo: Topology, node_name: str, previous: Topology | None = None, shared: SharedRules | None = None
) -> NodeDataplane:
    """What kube-proxy writes on the node; with `previous`, as its sync after running `previous` (ipvs: the
    changes to the virtual servers rather than all of them). A dual-stack node runs a proxier per family: the
    primary's output, with the secondary's as its other_family. `shared`: what other nodes of the same topology
    wrote, spliced in where this node sees a Service port as they did (iptables mode)."""
    primary, *others = topo.cluster.families
    plane = _family_dataplane(topo, node_name, previous, primary, shared)
    if not others:
        return plane
    return replace(plane, other_family=_family_dataplane(topo, node_name, previous, others[0], shared))


def _family_dataplane(
    topo: Topology, node_name: str, previous: Topology | None, family: Family, shared: SharedRules | None
) -> NodeDataplane:
    """What the proxier of one family writes on the node."""
    if topo.cluster.proxy_mode == "ipvs":
        before = ipvs_rules(previous, node_name, family) if previous is not None else None
        return ipvs_dataplane(topo, node_name, ipvs_rules(topo, node_name, family), before, family)
    node = topo.node(node_name)
    services, config = service_ports(topo, node_name, family), proxy_config(topo, family)
    version = topo.cluster.kube_version
    release = Release.of(version)
    if topo.cluster.proxy_mode == "nftables":
        rules = render_nftables(services, config, [node.ip_of(family)], version)
        return NodeDataplane(
            "nftables",
            nft=rules.script(),
            setup=_setup(topo, False),
            localhost_proxy=rules.localhost_nodeports,
            family=family,
            because=rules.because,
        )
    # GetNodeIPs: every address of the node's interfaces, loopback's too, so that nodePortAddresses naming
    # 127.0.0.0/8 serves NodePorts on 127.0.0.1 (with iptables.localhostNodePorts).
    rendered = render_iptables(services, config, _local(topo, node_name), version, shared=shared)
    held = held_ports(services, config, _local(topo, node_name), release)
    return NodeDataplane(
        "iptables",
        rendered.restore_text(),
        setup=_setup(topo, rendered.route_localnet),
        held_ports=held,
        family=family,
        because=rendered.because,
    )


def render(topo: Topology, previous: Topology | None = None) -> dict[str, NodeDataplane]:
    """What kube-proxy writes on every node for this topology (with `previous`: its sync after running that); what
    the nodes share is written once."""
    shared = SharedRules()
    return {node.name: node_dataplane(topo, node.name, previous, shared) for node in topo.nodes}


def node_held_ports(topo: Topology, node_name: str) -> tuple[HeldPort, ...]:
    """The sockets kube-proxy holds on this actor, if it is a node (none elsewhere)."""
    if all(node.name != node_name for node in topo.nodes):
        return ()
    return tuple(port for proxier in node_dataplane(topo, node_name).proxiers for port in proxier.held_ports)


def rule_reasons(topo: Topology, node_name: str) -> tuple[Because, ...]:
    """Why kube-proxy wrote the node's rules that mark for masquerade or choose an endpoint, every proxier's."""
    if all(node.name != node_name for node in topo.nodes):
        return ()
    return node_dataplane(topo, node_name).reasons


def setups(planes: Mapping[str, NodeDataplane]) -> dict[str, NodeSetup]:
    """What realize sets on each node, as rendered."""
    return {node: plane.setup for node, plane in planes.items()}


def affinity_lookup(mode: str) -> AffinityLookup | None:
    """How the rule that sends a client along its ClientIP affinity reads in the kernel's listing, as the mode's
    renderer writes it (None for ipvs, whose affinity is the virtual server's persistence, no rule)."""
    return {"iptables": iptables.AFFINITY_LOOKUP, "nftables": nftables.AFFINITY_LOOKUP}.get(mode)
