"""kube-proxy's iptables mode (Kubernetes 1.28 and later) as a pure function.

`render_iptables()` reproduces a full sync of syncProxyRules() in pkg/proxy/iptables/proxier.go,
read at kubernetes/kubernetes 531be81208e2274ef42e72525a26610a9622bcdf (1.28-era shapes plus the
later additions, each behind the ProxyConfig flag that switches it): the iptables-restore payload
kube-proxy writes with --noflush, and the jump rules it installs into the built-in chains with
`iptables -C`/`-I` before that.

On purpose, this differs from a live kube-proxy in ways the kernel does not see:
- Service ports are written in the caller's order, and per-address NodePort jumps in node_ips
  order; kube-proxy walks Go maps (random order). Rules of one Service keep kube-proxy's order.
- It is always a full sync from nothing: no partial syncs, no "-X" lines for stale chains.
- IPv4 only. Addresses of the other family are ignored, as kube-proxy's IPv4 proxier ignores them;
  a Service whose ClusterIP is IPv6 (or headless) yields no rules.
- Topology hints / trafficDistribution are not modelled: every usable endpoint is used.
The input is kube-proxy's processed view (service.ServicePort): LoadBalancer IPs with ipMode Proxy
must already be left out, as kube-proxy leaves them out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

from lab.kubeproxy import hashing
from lab.kubeproxy.service import Endpoint, ProxyConfig, ServicePort

KUBE_SERVICES = "KUBE-SERVICES"
KUBE_EXTERNAL_SERVICES = "KUBE-EXTERNAL-SERVICES"
KUBE_NODEPORTS = "KUBE-NODEPORTS"
KUBE_POSTROUTING = "KUBE-POSTROUTING"
KUBE_MARK_MASQ = "KUBE-MARK-MASQ"
KUBE_FORWARD = "KUBE-FORWARD"
KUBE_PROXY_FIREWALL = "KUBE-PROXY-FIREWALL"
KUBE_FIREWALL = "KUBE-FIREWALL"

# Past this many endpoints kube-proxy drops the comments of KUBE-SVC/SEP rules to keep the
# ruleset small ("large cluster mode").
LARGE_CLUSTER_ENDPOINTS = 1000

# nfacct object names (pkg/proxy/metrics).
NFACCT_INVALID_DROPPED = "ct_state_invalid_dropped_pkts"
NFACCT_LOCALHOST_NODEPORTS = "localhost_nps_accepted_pkts"

_LOOPBACK_NET = ip_network("127.0.0.0/8")
_BUILTIN_CHAINS = {
    "filter": ("INPUT", "FORWARD", "OUTPUT"),
    "nat": ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"),
}
_NEW = ("-m", "conntrack", "--ctstate", "NEW")


@dataclass(frozen=True)
class JumpRule:
    """A rule kube-proxy keeps in a built-in chain with `iptables -t TABLE -I CHAIN 1 ARGS`."""

    table: str
    chain: str
    target: str
    comment: str = ""
    extra_args: tuple[str, ...] = ()

    @property
    def args(self) -> str:
        """The rule as iptables-restore reads it, without "-A CHAIN"."""
        comment = ("-m", "comment", "--comment", _quoted(self.comment)) if self.comment else ()
        return _join((*self.extra_args, *comment, "-j", self.target))


# iptablesJumpChains then iptablesKubeletJumpChains, in the order kube-proxy ensures them.
# Each missing rule is inserted at position 1, so on a fresh node each built-in chain ends up
# holding them in reverse order. (Where kubelet started first, its own INPUT/OUTPUT
# "-j KUBE-FIREWALL" already exists and stays below kube-proxy's jumps.)
JUMP_RULES: tuple[JumpRule, ...] = (
    JumpRule("filter", "INPUT", KUBE_EXTERNAL_SERVICES, "kubernetes externally-visible service portals", _NEW),
    JumpRule("filter", "FORWARD", KUBE_EXTERNAL_SERVICES, "kubernetes externally-visible service portals", _NEW),
    JumpRule("filter", "INPUT", KUBE_NODEPORTS, "kubernetes health check service ports"),
    JumpRule("filter", "FORWARD", KUBE_SERVICES, "kubernetes service portals", _NEW),
    JumpRule("filter", "OUTPUT", KUBE_SERVICES, "kubernetes service portals", _NEW),
    JumpRule("filter", "FORWARD", KUBE_FORWARD, "kubernetes forwarding rules"),
    JumpRule("filter", "INPUT", KUBE_PROXY_FIREWALL, "kubernetes load balancer firewall", _NEW),
    JumpRule("filter", "OUTPUT", KUBE_PROXY_FIREWALL, "kubernetes load balancer firewall", _NEW),
    JumpRule("filter", "FORWARD", KUBE_PROXY_FIREWALL, "kubernetes load balancer firewall", _NEW),
    JumpRule("nat", "OUTPUT", KUBE_SERVICES, "kubernetes service portals"),
    JumpRule("nat", "PREROUTING", KUBE_SERVICES, "kubernetes service portals"),
    JumpRule("nat", "POSTROUTING", KUBE_POSTROUTING, "kubernetes postrouting rules"),
    JumpRule("filter", "INPUT", KUBE_FIREWALL),
    JumpRule("filter", "OUTPUT", KUBE_FIREWALL),
)


@dataclass(frozen=True)
class IptablesRules:
    """Everything kube-proxy's iptables mode puts into one node's IPv4 filter and nat tables."""

    filter_chains: tuple[str, ...]
    filter_rules: tuple[str, ...]
    nat_chains: tuple[str, ...]
    nat_rules: tuple[str, ...]
    jump_rules: tuple[JumpRule, ...] = JUMP_RULES
    # kube-proxy sets net.ipv4.conf.all.route_localnet=1 so NodePorts answer on 127.0.0.1.
    route_localnet: bool = False

    @property
    def kube_proxy_payload(self) -> str:
        """The exact iptables-restore input of a full syncProxyRules() (loaded with --noflush)."""
        return "".join(
            [
                "*filter\n",
                *(f":{chain} - [0:0]\n" for chain in self.filter_chains),
                *(f"{rule}\n" for rule in self.filter_rules),
                "COMMIT\n*nat\n",
                *(f":{chain} - [0:0]\n" for chain in self.nat_chains),
                *(f"{rule}\n" for rule in self.nat_rules),
                "COMMIT\n",
            ]
        )

    def builtin_rules(self, table: str, chain: str) -> list[str]:
        """The jump rules of one built-in chain, top first, as they stand on a fresh node."""
        inserted = [jump for jump in self.jump_rules if (jump.table, jump.chain) == (table, chain)]
        return [f"-A {chain} {jump.args}" for jump in reversed(inserted)]

    def restore_text(self) -> str:
        """One iptables-restore input (without --noflush) for an empty network namespace.

        Loaded into a fresh netns it leaves what kube-proxy leaves on a node where nothing else
        touched iptables: built-in chains with policy ACCEPT, kube-proxy's jumps in the order its
        `-I` calls produce, then its chains and rules. Chains it only creates (e.g. an empty
        KUBE-FIREWALL when localhost NodePorts are off) are declared empty. Left out: the empty
        KUBE-PROXY-CANARY chains in mangle/nat/filter, which nothing jumps to (kube-proxy only
        watches them to notice a flush), so the mangle table is not written at all.
        With ProxyConfig.nfacct_counters the nfacct objects must exist first (kube-proxy creates
        them over netlink), or the "-m nfacct" rules are refused.
        """
        tables = {
            "filter": (self.filter_chains, self.filter_rules),
            "nat": (self.nat_chains, self.nat_rules),
        }
        lines = []
        for table, (chains, rules) in tables.items():
            builtins = _BUILTIN_CHAINS[table]
            created = [jump.target for jump in self.jump_rules if jump.table == table]
            lines.append(f"*{table}")
            lines += [f":{chain} ACCEPT [0:0]" for chain in builtins]
            lines += [f":{chain} - [0:0]" for chain in _unique([*chains, *created])]
            lines += [rule for chain in builtins for rule in self.builtin_rules(table, chain)]
            lines += [*rules, "COMMIT"]
        return "\n".join(lines) + "\n"


def render_iptables(
    services: Sequence[ServicePort], config: ProxyConfig, node_ips: Sequence[str] = ()
) -> IptablesRules:
    """Render kube-proxy's rules for one node.

    node_ips are the node's own addresses (kube-proxy reads them from the interfaces); the first
    is the node IP kube-proxy was given (--node-ip), used to let the node through
    loadBalancerSourceRanges. They matter when config.node_port_addresses is set, to pick the
    addresses that serve NodePorts, and for the source-range check.
    """
    node = _Node.build(config, node_ips)
    views = [view for view in map(_ServiceView.build, services) if view is not None]
    out = _Tables()
    _write_fixed_rules(out, node)
    large = sum(len(view.endpoints) for view in views) > LARGE_CLUSTER_ENDPOINTS
    for view in views:
        _write_service(out, node, _Plan.build(view), large)
    _write_nodeports_jumps(out, node)
    _write_forward_rules(out, node)
    return IptablesRules(
        filter_chains=tuple(out.filter_chains),
        filter_rules=tuple(out.filter_rules),
        nat_chains=tuple(out.nat_chains),
        nat_rules=tuple(out.nat_rules),
        route_localnet=node.localhost_nodeports,
    )


@dataclass(frozen=True)
class _Node:
    """The per-node settings NewProxier derives from the flags."""

    config: ProxyConfig
    mark: str
    primary_ip: IPv4Address | None
    localhost_nodeports: bool
    nodeport_ips: tuple[str, ...] | None  # None: every local address serves NodePorts

    @classmethod
    def build(cls, config: ProxyConfig, node_ips: Sequence[str]) -> _Node:
        own = [ip for ip in map(_parse_ip, node_ips) if isinstance(ip, IPv4Address)]
        cidrs = [cidr for cidr in map(_parse_cidr, config.node_port_addresses) if isinstance(cidr, IPv4Network)]
        # No IPv4 CIDR, or 0.0.0.0/0 among them, means "all addresses" (NewNodePortAddresses).
        match_all = not cidrs or any(cidr.prefixlen == 0 for cidr in cidrs)
        # Localhost NodePorts are switched off unless the NodePort addresses include loopback.
        has_loopback = match_all or any(cidr.overlaps(_LOOPBACK_NET) for cidr in cidrs)
        localhost = config.localhost_nodeports and has_loopback
        nodeport_ips = None
        if not match_all:
            matching = [ip for ip in own if any(ip in cidr for cidr in cidrs)]
            nodeport_ips = tuple(_unique(str(ip) for ip in matching if localhost or not ip.is_loopback))
        mark = config.masquerade_mark or "0x" + format(1 << config.masquerade_bit, "08x")
        return cls(config, mark, own[0] if own else None, localhost, nodeport_ips)

    @property
    def nfacct(self) -> bool:
        return self.config.nfacct_counters

    def if_local(self) -> tuple[str, ...]:
        return ("-s", self.config.cluster_cidr) if self.config.cluster_cidr else ()

    def if_not_local(self) -> tuple[str, ...]:
        return ("!", "-s", self.config.cluster_cidr) if self.config.cluster_cidr else ()


@dataclass(frozen=True)
class _ServiceView:
    """A ServicePort as kube-proxy's IPv4 proxier sees it: canonical IPv4 addresses only."""

    port: ServicePort
    cluster_ip: str
    external_ips: tuple[str, ...]
    lb_ips: tuple[str, ...]
    source_ranges: tuple[IPv4Network, ...]
    endpoints: tuple[Endpoint, ...]  # sorted by "IP:port", as kube-proxy's endpoints map is

    @classmethod
    def build(cls, port: ServicePort) -> _ServiceView | None:
        if port.cluster_ip is None or not isinstance(_parse_ip(port.cluster_ip), IPv4Address):
            return None
        endpoints: dict[str, Endpoint] = {}
        for given in port.endpoints:
            ip = _parse_ip(given.ip)
            if not isinstance(ip, IPv4Address):
                continue
            ep = replace(given, ip=str(ip))
            # The same "IP:port" from two slices counts once; a local copy wins.
            if ep.address not in endpoints or ep.is_local:
                endpoints[ep.address] = ep
        return cls(
            port=port,
            cluster_ip=str(_parse_ip(port.cluster_ip)),
            external_ips=_ipv4_strings(port.external_ips),
            lb_ips=_ipv4_strings(port.load_balancer_ips),
            source_ranges=tuple(c for c in map(_parse_cidr, port.load_balancer_source_ranges) if c.version == 4),
            endpoints=tuple(sorted(endpoints.values(), key=lambda ep: ep.address)),
        )

    @property
    def name(self) -> str:
        return self.port.port_name_string

    @property
    def proto(self) -> str:
        return self.port.proto

    @property
    def externally_accessible(self) -> bool:
        return bool(self.port.node_port or self.lb_ips or self.external_ips)

    @property
    def internal_local(self) -> bool:
        return self.port.internal_policy == "Local"

    @property
    def external_local(self) -> bool:
        return self.port.external_policy == "Local"

    @property
    def health_check_node_port(self) -> int:
        # kube-proxy keeps it only for Services that need it (LoadBalancer with eTP=Local).
        return self.port.health_check_node_port if self.external_local else 0

    def chain(self, name_fn: Callable[[str, str], str]) -> str:
        return name_fn(self.name, self.proto)

    def endpoint_chain(self, ep: Endpoint) -> str:
        return hashing.endpoint_chain(self.name, self.proto, ep.address)


@dataclass(frozen=True)
class _Plan:
    """kube-proxy's per-service decisions: which endpoints, which chains, which filter verdicts."""

    svc: _ServiceView
    cluster: tuple[Endpoint, ...]
    local: tuple[Endpoint, ...]
    reachable: tuple[Endpoint, ...]
    has_endpoints: bool

    @classmethod
    def build(cls, svc: _ServiceView) -> _Plan:
        """CategorizeEndpoints (pkg/proxy/topology.go): ready endpoints, else serving+terminating
        ones, chosen separately for the Cluster and the Local policy."""
        eps = svc.endpoints
        uses_cluster = not svc.internal_local or svc.externally_accessible
        uses_local = svc.internal_local or (svc.external_local and svc.externally_accessible)
        cluster: list[Endpoint] = []
        local: list[Endpoint] = []
        if uses_cluster:
            cluster = [ep for ep in eps if ep.ready] or [ep for ep in eps if ep.serving and ep.terminating]
        if uses_local:
            local = [ep for ep in eps if ep.is_local and ep.ready] or [
                ep for ep in eps if ep.is_local and ep.serving and ep.terminating
            ]
        usable_anywhere = any(ep.ready or (ep.serving and ep.terminating) for ep in eps)
        has_endpoints = bool(cluster) or (uses_local and usable_anywhere)
        merged = {ep.address: ep for ep in [*cluster, *local]}
        reachable = tuple(sorted(merged.values(), key=lambda ep: ep.address))
        return cls(svc, tuple(cluster), tuple(local), reachable, has_endpoints)

    @property
    def has_internal_endpoints(self) -> bool:
        return self.has_endpoints and (bool(self.local) or not self.svc.internal_local)

    @property
    def has_external_endpoints(self) -> bool:
        return self.has_endpoints and (bool(self.local) or not self.svc.external_local)

    @property
    def internal_chain(self) -> str:
        return self.svc.chain(hashing.local_chain if self.svc.internal_local else hashing.service_chain)

    @property
    def external_policy_chain(self) -> str:
        return self.svc.chain(hashing.local_chain if self.svc.external_local else hashing.service_chain)

    @property
    def uses_external_chain(self) -> bool:
        # Even without usable external endpoints: the EXT chain short-circuits local traffic.
        return self.has_endpoints and self.svc.externally_accessible

    @property
    def uses_firewall_chain(self) -> bool:
        return self.has_endpoints and bool(self.svc.lb_ips) and bool(self.svc.source_ranges)

    @property
    def load_balancer_chain(self) -> str:
        fw = self.uses_firewall_chain
        return self.svc.chain(hashing.firewall_chain if fw else hashing.external_chain)

    def filter_verdict(self) -> tuple[str, str]:
        """Target and comment of the filter rules for traffic that has nowhere to go."""
        if not self.has_endpoints:
            return "REJECT", _quoted(f"{self.svc.name} has no endpoints")
        return "DROP", _quoted(f"{self.svc.name} has no local endpoints")


@dataclass
class _Tables:
    """kube-proxy's four line buffers: chain declarations and rules for filter and nat."""

    filter_chains: list[str] = field(default_factory=list)
    filter_rules: list[str] = field(default_factory=list)
    nat_chains: list[str] = field(default_factory=list)
    nat_rules: list[str] = field(default_factory=list)

    def filter(self, *parts: str | Iterable[str]) -> None:
        self.filter_rules.append(_join(_flatten(parts)))

    def nat(self, *parts: str | Iterable[str]) -> None:
        self.nat_rules.append(_join(_flatten(parts)))


def _write_fixed_rules(out: _Tables, node: _Node) -> None:
    out.filter_chains += [KUBE_SERVICES, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_NODEPORTS, KUBE_PROXY_FIREWALL]
    out.nat_chains += [KUBE_SERVICES, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_MARK_MASQ]
    mark = node.mark
    out.nat("-A", KUBE_POSTROUTING, "-m", "mark", "!", "--mark", f"{mark}/{mark}", "-j", "RETURN")
    # Clear the mark so a packet that loops through the stack again is not masqueraded twice.
    out.nat("-A", KUBE_POSTROUTING, "-j", "MARK", "--xor-mark", mark)
    random_fully = ("--random-fully",) if node.config.random_fully else ()
    snat_comment = _comment("kubernetes service traffic requiring SNAT")
    out.nat("-A", KUBE_POSTROUTING, snat_comment, "-j", "MASQUERADE", random_fully)
    out.nat("-A", KUBE_MARK_MASQ, "-j", "MARK", "--or-mark", mark)
    if node.localhost_nodeports:
        # route_localnet lets martian 127/8 traffic in from outside (issue 90259); this
        # rule (kubelet writes the same one) drops it unless it was DNATed to a NodePort.
        out.filter_chains.append(KUBE_FIREWALL)
        localnet = ("-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8")
        not_dnat = ("-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT")
        comment = _comment("block incoming localnet connections")
        out.filter("-A", KUBE_FIREWALL, comment, localnet, not_dnat, "-j", "DROP")


def _write_service(out: _Tables, node: _Node, plan: _Plan, large: bool) -> None:
    _write_service_entries(out, node, plan)
    if plan.has_internal_endpoints:
        _write_internal_masquerade(out, node, plan)
    if plan.uses_external_chain:
        _write_external_chain(out, node, plan)
    if plan.uses_firewall_chain:
        _write_firewall_chain(out, node, plan)
    svc = plan.svc
    if plan.cluster:
        _write_policy_chain(out, svc, svc.chain(hashing.service_chain), plan.cluster, large)
    if plan.local:
        _write_policy_chain(out, svc, svc.chain(hashing.local_chain), plan.local, large)
    for ep in plan.reachable:
        _write_endpoint_chain(out, svc, ep, large)


def _write_service_entries(out: _Tables, node: _Node, plan: _Plan) -> None:
    """Where a Service's addresses are caught: nat jumps, or filter verdicts when nothing serves them."""
    svc = plan.svc
    ext_chain = svc.chain(hashing.external_chain)
    cluster_ip = _to(svc, svc.cluster_ip)
    if plan.has_internal_endpoints:
        out.nat("-A", KUBE_SERVICES, _comment(f"{svc.name} cluster IP"), cluster_ip, "-j", plan.internal_chain)
    else:
        _write_verdict(out, KUBE_SERVICES, plan, cluster_ip)

    for ip in svc.external_ips:
        if plan.has_endpoints:
            out.nat("-A", KUBE_SERVICES, _comment(f"{svc.name} external IP"), _to(svc, ip), "-j", ext_chain)
        if not plan.has_external_endpoints:
            _write_verdict(out, KUBE_EXTERNAL_SERVICES, plan, _to(svc, ip))

    fw_comment = _comment(f"{svc.name} traffic not accepted by {svc.chain(hashing.firewall_chain)}")
    for ip in svc.lb_ips:
        if plan.has_endpoints:
            lb_comment = _comment(f"{svc.name} loadbalancer IP")
            out.nat("-A", KUBE_SERVICES, lb_comment, _to(svc, ip), "-j", plan.load_balancer_chain)
        if plan.uses_firewall_chain:
            # Whatever KUBE-FW-* did not DNAT is dropped here, in filter.
            out.filter("-A", KUBE_PROXY_FIREWALL, fw_comment, _to(svc, ip), "-j", "DROP")
    if not plan.has_external_endpoints:
        for ip in svc.lb_ips:
            _write_verdict(out, KUBE_EXTERNAL_SERVICES, plan, _to(svc, ip))

    if svc.port.node_port:
        _write_node_port(out, node, plan)

    if hc_port := svc.health_check_node_port:
        # Accepted whether or not this node has local endpoints: the LB must be able to ask.
        hc_comment = _comment(f"{svc.name} health check node port")
        out.filter("-A", KUBE_NODEPORTS, hc_comment, _proto("tcp"), "--dport", str(hc_port), "-j", "ACCEPT")


def _write_node_port(out: _Tables, node: _Node, plan: _Plan) -> None:
    svc = plan.svc
    head = ("-A", KUBE_NODEPORTS, "-m", "comment", "--comment", svc.name, _proto(svc.proto))
    node_port = ("--dport", str(svc.port.node_port))
    ext_chain = svc.chain(hashing.external_chain)
    if plan.has_endpoints:
        # NodePorts are not subject to loadBalancerSourceRanges: straight to EXT.
        if node.localhost_nodeports and node.nfacct:
            nfacct = ("-m", "nfacct", "--nfacct-name", NFACCT_LOCALHOST_NODEPORTS)
            out.nat(head, "-d", "127.0.0.0/8", node_port, nfacct, "-j", ext_chain)
        out.nat(head, node_port, "-j", ext_chain)
    if not plan.has_external_endpoints:
        local_dst = ("-m", "addrtype", "--dst-type", "LOCAL")
        _write_verdict(out, KUBE_EXTERNAL_SERVICES, plan, local_dst, _proto(svc.proto), node_port)


def _write_verdict(out: _Tables, chain: str, plan: _Plan, *match: Iterable[str]) -> None:
    """REJECT (no endpoints anywhere) or DROP (none for this traffic policy here), in filter."""
    target, comment = plan.filter_verdict()
    out.filter("-A", chain, "-m", "comment", "--comment", comment, match, "-j", target)


def _write_internal_masquerade(out: _Tables, node: _Node, plan: _Plan) -> None:
    """Masquerade ClusterIP traffic from outside the pod network (the Service range may be routed
    to any node, whose reply must come back through it); everything with --masquerade-all."""
    svc = plan.svc
    match = (_comment(f"{svc.name} cluster IP"), _proto(svc.proto), "-d", svc.cluster_ip, "--dport", str(svc.port.port))
    if node.config.masquerade_all:
        out.nat("-A", plan.internal_chain, match, "-j", KUBE_MARK_MASQ)
    elif node.config.cluster_cidr:
        out.nat("-A", plan.internal_chain, match, node.if_not_local(), "-j", KUBE_MARK_MASQ)


def _write_external_chain(out: _Tables, node: _Node, plan: _Plan) -> None:
    """KUBE-EXT-*: every NodePort, externalIP and LoadBalancer packet goes through here."""
    svc = plan.svc
    ext_chain = svc.chain(hashing.external_chain)
    cluster_chain = svc.chain(hashing.service_chain)
    out.nat_chains.append(ext_chain)
    destinations = f"{svc.name} external destinations"
    if not svc.external_local:
        # Cluster policy may send the packet to another node: masquerade so the reply returns.
        out.nat("-A", ext_chain, _comment(f"masquerade traffic for {destinations}"), "-j", KUBE_MARK_MASQ)
    else:
        if node.config.cluster_cidr:
            # Pods reaching an external address behave as if they went out to the LB and came
            # back: any endpoint, source kept. Needs the local-traffic detector.
            out.nat("-A", ext_chain, _comment(f"pod traffic for {destinations}"), node.if_local(), "-j", cluster_chain)
        # The node itself picks a local address as source, which must be masqueraded, and may
        # use any endpoint.
        local_src = ("-m", "addrtype", "--src-type", "LOCAL")
        masq_comment = _comment(f"masquerade LOCAL traffic for {destinations}")
        out.nat("-A", ext_chain, masq_comment, local_src, "-j", KUBE_MARK_MASQ)
        out.nat("-A", ext_chain, _comment(f"route LOCAL traffic for {destinations}"), local_src, "-j", cluster_chain)
    if plan.has_external_endpoints:
        out.nat("-A", ext_chain, "-j", plan.external_policy_chain)


def _write_firewall_chain(out: _Tables, node: _Node, plan: _Plan) -> None:
    """KUBE-FW-*: loadBalancerSourceRanges. Only VIP-style LBs that keep the client IP are filtered."""
    svc = plan.svc
    fw_chain = svc.chain(hashing.firewall_chain)
    ext_chain = svc.chain(hashing.external_chain)
    out.nat_chains.append(fw_chain)
    head = ("-A", fw_chain, _comment(f"{svc.name} loadbalancer IP"))
    for cidr in svc.source_ranges:
        out.nat(head, "-s", str(cidr), "-j", ext_chain)
    if node.primary_ip is not None and any(node.primary_ip in cidr for cidr in svc.source_ranges):
        # The node reaching the LB IP often loops back locally with the LB IP as source.
        for ip in svc.lb_ips:
            out.nat(head, "-s", ip, "-j", ext_chain)
    out.nat("-A", fw_chain, _comment(f"other traffic to {svc.name} will be dropped by KUBE-PROXY-FIREWALL"))


def _write_policy_chain(
    out: _Tables, svc: _ServiceView, chain: str, endpoints: Sequence[Endpoint], large: bool
) -> None:
    """KUBE-SVC-* / KUBE-SVL-*: affinity checks first, then one random pick per endpoint."""
    out.nat_chains.append(chain)
    if svc.port.affinity_timeout:
        for ep in endpoints:
            sep = svc.endpoint_chain(ep)
            recent = ("-m", "recent", "--name", sep, "--rcheck", "--seconds", str(svc.port.affinity_timeout), "--reap")
            out.nat("-A", chain, _rule_comment(f"{svc.name} -> {ep.address}", large), recent, "-j", sep)
    for i, ep in enumerate(endpoints):
        remaining = len(endpoints) - i
        # Rule i matches 1/(n-i) of what reaches it; the last one takes the rest.
        statistic = ("-m", "statistic", "--mode", "random", "--probability", f"{1 / remaining:.10f}")
        pick = statistic if remaining > 1 else ()
        out.nat("-A", chain, _rule_comment(f"{svc.name} -> {ep.address}", large), pick, "-j", svc.endpoint_chain(ep))


def _write_endpoint_chain(out: _Tables, svc: _ServiceView, ep: Endpoint, large: bool) -> None:
    """KUBE-SEP-*: masquerade hairpin traffic (a pod reaching itself), remember affinity, DNAT."""
    sep = svc.endpoint_chain(ep)
    out.nat_chains.append(sep)
    comment = () if large else ("-m", "comment", "--comment", svc.name)
    out.nat("-A", sep, comment, "-s", ep.ip, "-j", KUBE_MARK_MASQ)
    affinity = ("-m", "recent", "--name", sep, "--set") if svc.port.affinity_timeout else ()
    out.nat("-A", sep, comment, affinity, _proto(svc.proto), "-j", "DNAT", "--to-destination", ep.address)


def _write_nodeports_jumps(out: _Tables, node: _Node) -> None:
    """The tail call to KUBE-NODEPORTS; it must follow every other KUBE-SERVICES rule."""
    comment = _comment("kubernetes service nodeports; NOTE: this must be the last rule in this chain")
    if node.nodeport_ips is None:
        # Without route_localnet a NodePort cannot answer on 127/8, so do not catch it.
        not_localhost = () if node.localhost_nodeports else ("!", "-d", "127.0.0.0/8")
        local_dst = ("-m", "addrtype", "--dst-type", "LOCAL")
        out.nat("-A", KUBE_SERVICES, comment, local_dst, not_localhost, "-j", KUBE_NODEPORTS)
        return
    for ip in node.nodeport_ips:
        out.nat("-A", KUBE_SERVICES, comment, "-d", ip, "-j", KUBE_NODEPORTS)


def _write_forward_rules(out: _Tables, node: _Node) -> None:
    if not node.config.conntrack_tcp_be_liberal:
        # Without tcp_be_liberal an out-of-window packet is INVALID, is not un-DNATed and would
        # reach the pod with the wrong addresses, which then resets the connection (issue 74839).
        nfacct = ("-m", "nfacct", "--nfacct-name", NFACCT_INVALID_DROPPED) if node.nfacct else ()
        out.filter("-A", KUBE_FORWARD, "-m", "conntrack", "--ctstate", "INVALID", nfacct, "-j", "DROP")
    # Forward marked traffic (and what follows it) even when the FORWARD policy is DROP.
    marked = ("-m", "mark", "--mark", f"{node.mark}/{node.mark}")
    out.filter("-A", KUBE_FORWARD, _comment("kubernetes forwarding rules"), marked, "-j", "ACCEPT")
    established = ("-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED")
    out.filter("-A", KUBE_FORWARD, _comment("kubernetes forwarding conntrack rule"), established, "-j", "ACCEPT")


def _comment(text: str) -> tuple[str, ...]:
    return ("-m", "comment", "--comment", _quoted(text))


def _rule_comment(text: str, large: bool) -> tuple[str, ...]:
    """Comments on KUBE-SVC/SVL rules, which kube-proxy leaves out in large clusters."""
    return () if large else _comment(text)


def _to(svc: _ServiceView, ip: str) -> tuple[str, ...]:
    """Match the Service port on one of its addresses."""
    return (*_proto(svc.proto), "-d", ip, "--dport", str(svc.port.port))


def _proto(proto: str) -> tuple[str, ...]:
    return ("-m", proto, "-p", proto)


def _quoted(text: str) -> str:
    return f'"{text}"'


def _join(parts: Iterable[str]) -> str:
    return " ".join(parts)


def _flatten(parts: Iterable[str | Iterable[str]]) -> list[str]:
    flat: list[str] = []
    for part in parts:
        if isinstance(part, str):
            flat.append(part)
        else:
            flat += _flatten(part)
    return flat


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _parse_ip(text: str) -> IPv4Address | IPv6Address:
    """Like Go's netutils.ParseIPSloppy: IPv4 octets may have leading zeros ("172.30.0.041")."""
    if ":" not in text:
        text = ".".join(str(int(octet)) for octet in text.split("."))
    return ip_address(text)


def _parse_cidr(text: str) -> IPv4Network | IPv6Network:
    """Like ParseCIDRSloppy after TrimSpace; the result is the network ("1.2.3.4/24" -> 1.2.3.0/24)."""
    address, _, prefix = text.strip().partition("/")
    return ip_network(f"{_parse_ip(address)}/{int(prefix)}", strict=False)


def _ipv4_strings(ips: Iterable[str]) -> tuple[str, ...]:
    return tuple(str(ip) for ip in map(_parse_ip, ips) if isinstance(ip, IPv4Address))
