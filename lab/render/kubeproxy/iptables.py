"""kube-proxy's iptables mode, Kubernetes 1.19 to 1.35, as a pure function.

`render_iptables(services, config, node_ips, version)` reproduces a full sync of syncProxyRules()
in pkg/proxy/iptables/proxier.go as kube-proxy of `version` writes it: the iptables-restore
payload kube-proxy writes with --noflush, and the jump rules it installs into the built-in chains
with `iptables -C`/`-I` before that. The layouts are read from the kube-proxy sources vendored by
openshift/sdn (one commit per minor, 1.20-1.30) and, for 1.28 and later, from
kubernetes/kubernetes 531be81208e2274ef42e72525a26610a9622bcdf; docs/kubeproxy-versions.md maps
the versions onto layout eras and says what is inferred. Version differences are switched by
_Layout, next to the rule they change.

On purpose, this differs from a live kube-proxy in ways the kernel does not see:
- Service ports are written in the caller's order, and per-address NodePort jumps in node_ips
  order; kube-proxy walks Go maps (random order). Rules of one Service keep kube-proxy's order.
- It is always a full sync from nothing: no partial syncs, no "-X" lines for stale chains.
- IPv4 only. Addresses of the other family are ignored, as kube-proxy's IPv4 proxier ignores them;
  a Service whose ClusterIP is IPv6 (or headless) yields no rules.
- Addresses are written canonically. kube-proxy 1.23-1.29 copied externalIP, LoadBalancer and
  endpoint addresses as given ("192.168.099.022"); the API server only accepts such leading
  zeros for old objects.
- Topology hints / trafficDistribution are not modelled: every usable endpoint is used. Feature
  gates are at their default for the version (e.g. ProxyTerminatingEndpoints off before 1.26).
The input is kube-proxy's processed view (service.ServicePort): LoadBalancer IPs with ipMode Proxy
must already be left out, as kube-proxy leaves them out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address, ip_network

from lab.render.kubeproxy import hashing
from lab.render.kubeproxy.addresses import parse_ipv4, parse_ipv4_cidr
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort
from lab.render.kubeproxy.versions import era_of, minor_of
from lab.render.kubeproxy.view import ServiceView, unique

DEFAULT_VERSION = "1.31"

KUBE_SERVICES = "KUBE-SERVICES"
KUBE_EXTERNAL_SERVICES = "KUBE-EXTERNAL-SERVICES"
KUBE_NODEPORTS = "KUBE-NODEPORTS"
KUBE_POSTROUTING = "KUBE-POSTROUTING"
KUBE_MARK_MASQ = "KUBE-MARK-MASQ"
KUBE_MARK_DROP = "KUBE-MARK-DROP"
KUBE_FORWARD = "KUBE-FORWARD"
KUBE_PROXY_FIREWALL = "KUBE-PROXY-FIREWALL"
KUBE_FIREWALL = "KUBE-FIREWALL"

# Past this many endpoints kube-proxy drops the comments of KUBE-SVC/SEP rules to keep the
# ruleset small ("large cluster mode"; endpointChainsNumberThreshold before 1.25).
LARGE_CLUSTER_ENDPOINTS = 1000

# nfacct object names (pkg/proxy/metrics).
NFACCT_INVALID_DROPPED = "ct_state_invalid_dropped_pkts"
NFACCT_LOCALHOST_NODEPORTS = "localhost_nps_accepted_pkts"

# kubelet's --iptables-drop-bit default (15), formatted like getIPTablesMark ("%#08x").
KUBELET_DROP_MARK = "0x00008000"

_LOOPBACK_NET = ip_network("127.0.0.0/8")
_BUILTIN_CHAINS = {
    "filter": ("INPUT", "FORWARD", "OUTPUT"),
    "nat": ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"),
}
_NEW = ("-m", "conntrack", "--ctstate", "NEW")
_LOCAL_SRC = ("-m", "addrtype", "--src-type", "LOCAL")
_LOCAL_DST = ("-m", "addrtype", "--dst-type", "LOCAL")


@dataclass(frozen=True)
class JumpRule:
    """A rule kept in a built-in chain with `iptables -t TABLE -I CHAIN 1 ARGS`."""

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


def jump_rules(version: str = DEFAULT_VERSION) -> tuple[JumpRule, ...]:
    """iptablesJumpChains (+ iptablesKubeletJumpChains from 1.27) of that version, in the order
    kube-proxy ensures them. Each missing rule is inserted at position 1, so on a fresh node each
    built-in chain ends up holding them in reverse order."""
    v = minor_of(version)
    external = "kubernetes externally-visible service portals"
    portals = "kubernetes service portals"
    lb_firewall = "kubernetes load balancer firewall"
    rules = [JumpRule("filter", "INPUT", KUBE_EXTERNAL_SERVICES, external, _NEW)]
    if v >= 20:  # #95252: FORWARD too, instead of INPUT -> KUBE-SERVICES
        rules.append(JumpRule("filter", "FORWARD", KUBE_EXTERNAL_SERVICES, external, _NEW))
    if v >= 21:  # #97824: healthCheckNodePort ACCEPT rules
        rules.append(JumpRule("filter", "INPUT", KUBE_NODEPORTS, "kubernetes health check service ports"))
    rules.append(JumpRule("filter", "FORWARD", KUBE_SERVICES, portals, _NEW))
    rules.append(JumpRule("filter", "OUTPUT", KUBE_SERVICES, portals, _NEW))
    if v <= 19:  # removed by #95252 (1.20)
        rules.append(JumpRule("filter", "INPUT", KUBE_SERVICES, portals, _NEW))
    rules.append(JumpRule("filter", "FORWARD", KUBE_FORWARD, "kubernetes forwarding rules"))
    if v >= 25:  # #110289
        for chain in ("INPUT", "OUTPUT", "FORWARD"):
            rules.append(JumpRule("filter", chain, KUBE_PROXY_FIREWALL, lb_firewall, _NEW))
    rules.append(JumpRule("nat", "OUTPUT", KUBE_SERVICES, portals))
    rules.append(JumpRule("nat", "PREROUTING", KUBE_SERVICES, portals))
    rules.append(JumpRule("nat", "POSTROUTING", KUBE_POSTROUTING, "kubernetes postrouting rules"))
    if v >= 27:  # #114470: kube-proxy's own copy of kubelet's KUBE-FIREWALL jumps (no comment)
        rules += [JumpRule("filter", "INPUT", KUBE_FIREWALL), JumpRule("filter", "OUTPUT", KUBE_FIREWALL)]
    return tuple(rules)


# The current list (1.28 and later); `jump_rules(version)` gives older ones.
JUMP_RULES: tuple[JumpRule, ...] = jump_rules("1.28")


@dataclass(frozen=True)
class KubeletRules:
    """What kubelet's syncIPTablesRules (pkg/kubelet/kubelet_network_linux.go) adds on a node and
    kube-proxy's restore leaves alone: KUBE-MARK-DROP, which kube-proxy up to 1.24 jumps to, and
    filter KUBE-FIREWALL, which drops those marked packets (INPUT and OUTPUT only) and
    martian 127/8 traffic. (kubelet's KUBE-MARK-MASQ / KUBE-POSTROUTING are left out: kube-proxy
    declares those chains, so its restore replaces kubelet's identical rules.)"""

    filter_chains: tuple[str, ...]
    filter_rules: tuple[str, ...]
    nat_chains: tuple[str, ...]
    nat_rules: tuple[str, ...]
    jump_rules: tuple[JumpRule, ...]


def kubelet_rules(version: str, ownership_cleanup: bool | None = None) -> KubeletRules | None:
    """kubelet's rules of that version, or None when its IPTablesOwnershipCleanup gate (alpha 1.25,
    on by default from 1.27 (#114472), locked on in 1.28 (#119374)) leaves only the hint chain and
    a copy of kube-proxy's own localnet rule. `ownership_cleanup` overrides the gate's default for
    1.25-1.27, the releases where it could be switched."""
    v = minor_of(version)
    if ownership_cleanup is not None and not 25 <= v <= 27:
        raise ValueError(f"kubelet {version} has no IPTablesOwnershipCleanup gate to set")
    cleanup = v >= 27 if ownership_cleanup is None else ownership_cleanup
    if cleanup:
        return None
    mark_drop = _join(
        ("-A", KUBE_FIREWALL, "-m", "comment", "--comment", _quoted("kubernetes firewall for dropping marked packets"))
        + ("-m", "mark", "--mark", f"{KUBELET_DROP_MARK}/{KUBELET_DROP_MARK}", "-j", "DROP")
    )
    # The #90259 mitigation (1.19); kubelet spells the addresses --dst/--src.
    localnet = _join(
        ("-A", KUBE_FIREWALL, "-m", "comment", "--comment", _quoted("block incoming localnet connections"))
        + ("--dst", "127.0.0.0/8", "!", "--src", "127.0.0.0/8")
        + ("-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP")
    )
    # Up to 1.24 kubelet appended the mark rule first; the 1.25 rework around the gate ensures
    # the localnet rule first and the deprecated rules after it.
    firewall = (mark_drop, localnet) if v <= 24 else (localnet, mark_drop)
    return KubeletRules(
        filter_chains=(KUBE_FIREWALL,),
        filter_rules=firewall,
        nat_chains=(KUBE_MARK_DROP,),
        nat_rules=(f"-A {KUBE_MARK_DROP} -j MARK --or-mark {KUBELET_DROP_MARK}",),
        jump_rules=(
            JumpRule("filter", "OUTPUT", KUBE_FIREWALL),
            JumpRule("filter", "INPUT", KUBE_FIREWALL),
            JumpRule("nat", "POSTROUTING", KUBE_POSTROUTING, "kubernetes postrouting rules"),
        ),
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
    version: str = DEFAULT_VERSION
    # Chains kube-proxy creates with EnsureChain but never fills (KUBE-MARK-DROP, 1.20-1.24).
    ensured_chains: tuple[tuple[str, str], ...] = ()
    # kubelet's rules on the same node, where kube-proxy of this version relies on them.
    kubelet: KubeletRules | None = None

    @property
    def era(self) -> str:
        return era_of(self.version)

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
        """The jump rules of one built-in chain, top first, as they stand on a fresh node: kubelet
        starts first, so kube-proxy's `-I ... 1` rules end up above kubelet's."""
        ours = [jump for jump in self.jump_rules if (jump.table, jump.chain) == (table, chain)]
        theirs = [
            jump
            for jump in (self.kubelet.jump_rules if self.kubelet else ())
            if (jump.table, jump.chain) == (table, chain) and jump not in ours
        ]
        return [f"-A {chain} {jump.args}" for jump in [*reversed(ours), *reversed(theirs)]]

    def restore_text(self) -> str:
        """One iptables-restore input (without --noflush) for an empty network namespace.

        Loaded into a fresh netns it leaves what the node's Kubernetes components leave where
        nothing else touched iptables: built-in chains with policy ACCEPT, the jumps in the order
        the `-I` calls produce, then kube-proxy's chains and rules. Where kube-proxy of this
        version relies on kubelet's rules (up to 1.26, and 1.25-1.27 whenever kubelet's
        IPTablesOwnershipCleanup gate is off), kubelet's KUBE-MARK-DROP and KUBE-FIREWALL chains,
        their rules and kubelet's INPUT/OUTPUT jumps are included too, so that the node is
        complete: see KubeletRules. Chains that are only created (e.g. an empty KUBE-FIREWALL when
        localhost NodePorts are off, KUBE-MARK-DROP ensured by kube-proxy 1.20-1.24) are declared
        empty. Left out: the empty KUBE-PROXY-CANARY / KUBE-KUBELET-CANARY chains and kubelet's
        KUBE-IPTABLES-HINT, which nothing jumps to, so the mangle table is not written at all.
        With ProxyConfig.nfacct_counters (1.31+) the nfacct objects must exist first (kube-proxy
        creates them over netlink), or the "-m nfacct" rules are refused.
        """
        kubelet = self.kubelet
        tables = {
            "filter": (
                self.filter_chains,
                self.filter_rules,
                kubelet.filter_chains if kubelet else (),
                kubelet.filter_rules if kubelet else (),
            ),
            "nat": (
                self.nat_chains,
                self.nat_rules,
                kubelet.nat_chains if kubelet else (),
                kubelet.nat_rules if kubelet else (),
            ),
        }
        lines = []
        for table, (chains, rules, kubelet_chains, kubelet_table_rules) in tables.items():
            builtins = _BUILTIN_CHAINS[table]
            jumps = [*self.jump_rules, *(kubelet.jump_rules if kubelet else ())]
            created = [jump.target for jump in jumps if jump.table == table]
            created += [chain for ensured_table, chain in self.ensured_chains if ensured_table == table]
            lines.append(f"*{table}")
            lines += [f":{chain} ACCEPT [0:0]" for chain in builtins]
            lines += [f":{chain} - [0:0]" for chain in unique([*chains, *kubelet_chains, *created])]
            lines += [rule for chain in builtins for rule in self.builtin_rules(table, chain)]
            # kubelet re-adds (iptables -C / -A) whatever a kube-proxy restore flushed, unless an
            # equivalent rule is already there.
            present = {_kubelet_spelling(rule) for rule in rules}
            lines += [*rules, *(rule for rule in kubelet_table_rules if _kubelet_spelling(rule) not in present)]
            lines.append("COMMIT")
        return "\n".join(lines) + "\n"


def render_iptables(
    services: Sequence[ServicePort],
    config: ProxyConfig,
    node_ips: Sequence[str] = (),
    version: str = DEFAULT_VERSION,
    *,
    kubelet_iptables_cleanup: bool | None = None,
) -> IptablesRules:
    """Render kube-proxy's rules for one node, as kube-proxy `version` ("1.19".."1.35") writes them.

    node_ips are the node's own addresses (kube-proxy reads them from the interfaces); the first
    is the node IP kube-proxy was given (--node-ip), used to let the node through
    loadBalancerSourceRanges. They matter when config.node_port_addresses is set, to pick the
    addresses that serve NodePorts, and for the source-range check.
    kubelet_iptables_cleanup overrides the default of kubelet's IPTablesOwnershipCleanup gate
    (1.25-1.27 only), which decides whether kubelet's rules join restore_text().
    """
    lay = _Layout(minor_of(version))
    node = _Node.build(config, node_ips, lay)
    views = [view for view in map(_ServiceView.build, services) if view is not None]
    out = _Tables()
    _write_fixed_rules(out, node)
    large = sum(len(view.endpoints) for view in views) > LARGE_CLUSTER_ENDPOINTS
    for view in views:
        plan = _Plan.build(view, lay)
        if lay.xlb:
            _write_xlb_service(out, node, plan, large)
        else:
            _write_service(out, node, plan, large)
    _write_nodeports_jumps(out, node)
    _write_forward_rules(out, node)
    return IptablesRules(
        filter_chains=tuple(out.filter_chains),
        filter_rules=tuple(out.filter_rules),
        nat_chains=tuple(out.nat_chains),
        nat_rules=tuple(out.nat_rules),
        jump_rules=jump_rules(version),
        route_localnet=node.route_localnet,
        version=version,
        ensured_chains=(("nat", KUBE_MARK_DROP),) if 20 <= lay.minor <= 24 else (),
        kubelet=kubelet_rules(version, kubelet_iptables_cleanup),
    )


@dataclass(frozen=True)
class _Layout:
    """What kube-proxy of one minor version writes differently; each switch names its change."""

    minor: int

    @property
    def cidr_suffix(self) -> bool:
        """-d/-s addresses written as "IP/32" (utilproxy.ToCIDR) until 1.23 wrote plain IPs."""
        return self.minor <= 22

    @property
    def physdev_external_ips(self) -> bool:
        """externalIPs caught only from off-node (physdev/addrtype pair); #96296 (1.21) treats them
        like ClusterIPs."""
        return self.minor <= 20

    @property
    def lb_reject_chain(self) -> str:
        """Where a LoadBalancer IP without endpoints is rejected (#95252 moved it in 1.20)."""
        return KUBE_SERVICES if self.minor <= 19 else KUBE_EXTERNAL_SERVICES

    @property
    def health_check_rules(self) -> bool:
        """filter KUBE-NODEPORTS ACCEPTs healthCheckNodePorts (#97824, 1.21)."""
        return self.minor >= 21

    @property
    def masquerade_in_service_chain(self) -> bool:
        """#96959 (1.22): KUBE-MARK-MASQ jumps move from KUBE-SERVICES/NODEPORTS into KUBE-SVC-*."""
        return self.minor >= 22

    @property
    def xlb(self) -> bool:
        """KUBE-XLB-* for externalTrafficPolicy=Local, until #109060 (1.24) brought KUBE-EXT/SVL."""
        return self.minor <= 23

    @property
    def mark_drop(self) -> bool:
        """Traffic that may not pass is marked for kubelet's KUBE-FIREWALL, until #110289/#110290
        (1.25) dropped it in filter (KUBE-PROXY-FIREWALL, "has no local endpoints" DROP)."""
        return self.minor <= 24

    @property
    def localhost_nodeports_flag(self) -> bool:
        """--iptables-localhost-nodeports (#108250, 1.26)."""
        return self.minor >= 26

    @property
    def own_kube_firewall(self) -> bool:
        """kube-proxy writes the "block incoming localnet connections" rule itself (#114470)."""
        return self.minor >= 27

    @property
    def split_conntrack_rules(self) -> bool:
        """Two FORWARD conntrack rules ("pod source"/"pod destination") until 1.23 merged them."""
        return self.minor <= 22

    @property
    def arrow_comments(self) -> bool:
        """KUBE-SVC/SVL rules commented "SPN -> IP:port" (1.24, with #109060); before: SPN."""
        return self.minor >= 24

    @property
    def terminating_fallback(self) -> bool:
        """ProxyTerminatingEndpoints on by default (beta 1.26, GA 1.28)."""
        return self.minor >= 26

    @property
    def conditional_invalid_drop(self) -> bool:
        """No INVALID drop with nf_conntrack_tcp_be_liberal=1 (1.29)."""
        return self.minor >= 29

    @property
    def nfacct_invalid(self) -> bool:
        """INVALID drops counted with nfacct (#122812): not yet in S1.30 (1.30.3), so 1.31."""
        return self.minor >= 31

    @property
    def nfacct_localhost(self) -> bool:
        """Localhost NodePort packets counted with nfacct (#125015), 1.31 (inferred)."""
        return self.minor >= 31

    @property
    def fw_trailing_comment(self) -> bool:
        """KUBE-FW-* ends with a comment-only "other traffic ... will be dropped" rule (1.27)."""
        return self.minor >= 27

    @property
    def source_ranges_as_written(self) -> bool:
        """loadBalancerSourceRanges copied as given (trimmed) until 1.30 wrote the parsed CIDR."""
        return self.minor <= 29


@dataclass(frozen=True)
class _Node:
    """The per-node settings NewProxier derives from the flags."""

    config: ProxyConfig
    lay: _Layout
    mark: str
    primary_ip: IPv4Address | None
    localhost_nodeports: bool  # rules may serve NodePorts on 127/8 (always, before the 1.26 flag)
    route_localnet: bool
    nodeport_ips: tuple[str, ...] | None  # None: every local address serves NodePorts

    @classmethod
    def build(cls, config: ProxyConfig, node_ips: Sequence[str], lay: _Layout) -> _Node:
        own = [ip for ip in map(parse_ipv4, node_ips) if ip is not None]
        cidrs = [cidr for cidr in map(parse_ipv4_cidr, config.node_port_addresses) if cidr is not None]
        # No IPv4 CIDR, or 0.0.0.0/0 among them, means "all addresses" (GetNodeAddresses).
        match_all = not cidrs or any(cidr.prefixlen == 0 for cidr in cidrs)
        has_loopback = match_all or any(cidr.overlaps(_LOOPBACK_NET) for cidr in cidrs)
        if lay.localhost_nodeports_flag:
            # Localhost NodePorts are switched off unless the NodePort addresses include loopback.
            localhost = config.localhost_nodeports and has_loopback
            route_localnet = localhost
        else:
            localhost = True
            # route_localnet: always until 1.23; from 1.24 (#107684) only if NodePorts may be on 127/8.
            route_localnet = has_loopback if lay.minor >= 24 else True
        nodeport_ips = None
        if not match_all:
            matching = [ip for ip in own if any(ip in cidr for cidr in cidrs)]
            nodeport_ips = tuple(unique(str(ip) for ip in matching if localhost or not ip.is_loopback))
        mark = config.masquerade_mark or "0x" + format(1 << config.masquerade_bit, "08x")
        return cls(config, lay, mark, own[0] if own else None, localhost, route_localnet, nodeport_ips)

    @property
    def nfacct(self) -> bool:
        return self.config.nfacct_counters

    def if_local(self) -> tuple[str, ...]:
        return ("-s", self.config.cluster_cidr) if self.config.cluster_cidr else ()

    def if_not_local(self) -> tuple[str, ...]:
        return ("!", "-s", self.config.cluster_cidr) if self.config.cluster_cidr else ()

    def addr(self, ip: str) -> str:
        return f"{ip}/32" if self.lay.cidr_suffix else ip


class _ServiceView(ServiceView):
    """What the iptables proxier reads besides: its chain names, and source ranges as written or parsed."""

    def chain(self, name_fn: Callable[[str, str], str]) -> str:
        return name_fn(self.name, self.proto)

    def endpoint_chain(self, ep: Endpoint) -> str:
        return hashing.endpoint_chain(self.name, self.proto, ep.address)

    def source_range_texts(self, lay: _Layout) -> list[str]:
        return [text if lay.source_ranges_as_written else str(cidr) for text, cidr in self.source_ranges]

    def node_in_source_ranges(self, node: _Node) -> bool:
        """allowFromNode: the node reaching its own LB IP often loops back locally, with the LB IP
        as source."""
        return node.primary_ip is not None and any(node.primary_ip in cidr for cidr in self.source_cidrs)


@dataclass(frozen=True)
class _Plan:
    """kube-proxy's per-service decisions: which endpoints, which chains, which filter verdicts."""

    svc: _ServiceView
    lay: _Layout
    cluster: tuple[Endpoint, ...]  # balanced over in KUBE-SVC-*
    local: tuple[Endpoint, ...]  # balanced over in KUBE-XLB-* / KUBE-SVL-*
    reachable: tuple[Endpoint, ...]  # the ones with a KUBE-SEP-* chain
    has_endpoints: bool

    @classmethod
    def build(cls, svc: _ServiceView, lay: _Layout) -> _Plan:
        if lay.minor <= 21:
            return cls._build_ready_only(svc, lay)
        if lay.minor <= 23:
            return cls._build_filtered(svc, lay)
        return cls._build_categorized(svc, lay)

    @classmethod
    def _build_ready_only(cls, svc: _ServiceView, lay: _Layout) -> _Plan:
        """1.19-1.21: ready endpoints only (1.21 filters them in syncProxyRules, older releases
        never put the others into the endpoints map); internalTrafficPolicy is an alpha gate, off."""
        ready = tuple(ep for ep in svc.endpoints if ep.ready)
        local = tuple(ep for ep in ready if ep.is_local) if svc.external_local else ()
        return cls(svc, lay, ready, local, ready, bool(ready))

    @classmethod
    def _build_filtered(cls, svc: _ServiceView, lay: _Layout) -> _Plan:
        """1.22-1.23: internalTrafficPolicy=Local (beta) keeps only this node's endpoints for the
        whole Service (FilterEndpoints); ProxyTerminatingEndpoints (alpha) is off."""
        eps = tuple(ep for ep in svc.endpoints if ep.is_local or not svc.internal_local)
        ready = tuple(ep for ep in eps if ep.ready)
        local = tuple(ep for ep in ready if ep.is_local) if svc.external_local else ()
        if lay.minor == 22:
            # 1.22 counts any endpoint, ready or not, and gives each one a KUBE-SEP chain.
            return cls(svc, lay, ready, local, eps, bool(eps))
        return cls(svc, lay, ready, local, ready, bool(ready))

    @classmethod
    def _build_categorized(cls, svc: _ServiceView, lay: _Layout) -> _Plan:
        """CategorizeEndpoints (pkg/proxy/topology.go, 1.24+): ready endpoints, else (gate on)
        serving+terminating ones, chosen separately for the Cluster and the Local policy."""
        eps = svc.endpoints
        fallback = lay.terminating_fallback

        def usable(ep: Endpoint) -> bool:
            return ep.ready or (fallback and ep.serving and ep.terminating)

        uses_cluster = not svc.internal_local or svc.externally_accessible
        uses_local = svc.internal_local or (svc.external_local and svc.externally_accessible)
        cluster: list[Endpoint] = []
        local: list[Endpoint] = []
        if uses_cluster:
            cluster = [ep for ep in eps if ep.ready]
            if not cluster and fallback:
                cluster = [ep for ep in eps if ep.serving and ep.terminating]
        if uses_local:
            local = [ep for ep in eps if ep.is_local and ep.ready]
            if not local and fallback:
                local = [ep for ep in eps if ep.is_local and ep.serving and ep.terminating]
        has_endpoints = bool(cluster) or (uses_local and any(map(usable, eps)))
        merged = {ep.address: ep for ep in [*cluster, *local]}
        reachable = tuple(sorted(merged.values(), key=lambda ep: ep.address))
        return cls(svc, lay, tuple(cluster), tuple(local), reachable, has_endpoints)

    @property
    def uses_local_chain(self) -> bool:
        svc = self.svc
        return svc.internal_local or (svc.external_local and svc.externally_accessible)

    @property
    def has_internal_endpoints(self) -> bool:
        if self.lay.mark_drop:  # up to 1.24 KUBE-SVL-* itself marks for dropping
            return self.has_endpoints
        return self.has_endpoints and (bool(self.local) or not self.svc.internal_local)

    @property
    def has_external_endpoints(self) -> bool:
        if self.lay.mark_drop:
            return self.has_endpoints
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
    lay = node.lay
    out.filter_chains += [KUBE_SERVICES, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD]
    if lay.health_check_rules:
        out.filter_chains.append(KUBE_NODEPORTS)
    if not lay.mark_drop:
        out.filter_chains.append(KUBE_PROXY_FIREWALL)
    out.nat_chains += [KUBE_SERVICES, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_MARK_MASQ]
    mark = node.mark
    out.nat("-A", KUBE_POSTROUTING, "-m", "mark", "!", "--mark", f"{mark}/{mark}", "-j", "RETURN")
    # Clear the mark so a packet that loops through the stack again is not masqueraded twice.
    out.nat("-A", KUBE_POSTROUTING, "-j", "MARK", "--xor-mark", mark)
    random_fully = ("--random-fully",) if node.config.random_fully else ()
    snat_comment = _comment("kubernetes service traffic requiring SNAT")
    out.nat("-A", KUBE_POSTROUTING, snat_comment, "-j", "MASQUERADE", random_fully)
    out.nat("-A", KUBE_MARK_MASQ, "-j", "MARK", "--or-mark", mark)
    if lay.own_kube_firewall and node.localhost_nodeports:
        # route_localnet lets martian 127/8 traffic in from outside (issue 90259); this
        # rule (kubelet writes the same one) drops it unless it was DNATed to a NodePort.
        out.filter_chains.append(KUBE_FIREWALL)
        localnet = ("-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8")
        not_dnat = ("-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT")
        comment = _comment("block incoming localnet connections")
        out.filter("-A", KUBE_FIREWALL, comment, localnet, not_dnat, "-j", "DROP")


# --- 1.19-1.23: KUBE-XLB ------------------------------------------------------------------------


def _write_xlb_service(out: _Tables, node: _Node, plan: _Plan, large: bool) -> None:
    """One Service port as syncProxyRules() wrote it up to 1.23, in its order: (1.23: endpoint
    chains first,) chains, ClusterIP, externalIPs, LoadBalancer IPs, NodePort, health check,
    service chain, then the KUBE-XLB chain of an externalTrafficPolicy=Local Service."""
    svc, lay, cfg = plan.svc, node.lay, node.config
    name, port = svc.name, str(svc.port.port)
    svc_chain = svc.chain(hashing.service_chain)
    xlb_chain = "KUBE-XLB-" + hashing.port_proto_hash(name, svc.proto)
    fw_chain = svc.chain(hashing.firewall_chain)
    # Where traffic to the Service's external addresses goes.
    destination = xlb_chain if svc.external_local else svc_chain
    # Where its masquerade rules live (#96959).
    masq_chain = svc_chain if lay.masquerade_in_service_chain else KUBE_SERVICES

    if lay.minor == 23 and plan.has_endpoints:
        for ep in plan.reachable:
            _write_endpoint_chain(out, node, svc, ep, large)
    if plan.has_endpoints:
        out.nat_chains.append(svc_chain)
    if svc.external_local:
        # Declared whenever the policy is Local, endpoints or not.
        out.nat_chains.append(xlb_chain)

    cluster_ip = (_comment(f"{name} cluster IP"), _proto(svc.proto), "-d", node.addr(svc.cluster_ip), "--dport", port)
    if plan.has_endpoints:
        if cfg.masquerade_all:
            out.nat("-A", masq_chain, cluster_ip, "-j", KUBE_MARK_MASQ)
        elif cfg.cluster_cidr:
            out.nat("-A", masq_chain, cluster_ip, node.if_not_local(), "-j", KUBE_MARK_MASQ)
        out.nat("-A", KUBE_SERVICES, cluster_ip, "-j", svc_chain)
    else:
        _write_reject(out, KUBE_SERVICES, name, _to(svc, node.addr(svc.cluster_ip)))

    for ip in svc.external_ips:
        external_ip = (_comment(f"{name} external IP"), _proto(svc.proto), "-d", node.addr(ip), "--dport", port)
        if not plan.has_endpoints:
            _write_reject(out, KUBE_EXTERNAL_SERVICES, name, _to(svc, node.addr(ip)))
            continue
        if not svc.external_local:
            # Cluster policy: SNAT, since the endpoint may be on another node. 1.19-1.20 always;
            # from 1.21 (#96296) like a ClusterIP, unless there is no local-traffic detector.
            unless_pod = () if lay.physdev_external_ips else node.if_not_local()
            out.nat("-A", masq_chain, external_ip, unless_pod, "-j", KUBE_MARK_MASQ)
        if lay.physdev_external_ips:
            # Only traffic not bridged in from a container and not from a local process...
            off_node = ("-m", "physdev", "!", "--physdev-is-in", "-m", "addrtype", "!", "--src-type", "LOCAL")
            out.nat("-A", KUBE_SERVICES, external_ip, off_node, "-j", destination)
            # ...or to an externalIP that is a local address (e.g. GCE LB IPs in the local table).
            out.nat("-A", KUBE_SERVICES, external_ip, _LOCAL_DST, "-j", destination)
        else:
            out.nat("-A", KUBE_SERVICES, external_ip, "-j", destination)

    for ip in svc.lb_ips:
        if not plan.has_endpoints:
            _write_reject(out, lay.lb_reject_chain, name, _to(svc, node.addr(ip)))
            continue
        # A KUBE-FW chain for every LoadBalancer IP (declared once per IP, as kube-proxy did).
        out.nat_chains.append(fw_chain)
        lb_comment = _comment(f"{name} loadbalancer IP")
        lb_ip = (_proto(svc.proto), "-d", node.addr(ip), "--dport", port)
        out.nat("-A", KUBE_SERVICES, lb_comment, lb_ip, "-j", fw_chain)
        head = ("-A", fw_chain, lb_comment)
        if not svc.external_local:
            out.nat(head, "-j", KUBE_MARK_MASQ)
        if not svc.source_ranges:
            out.nat(head, "-j", destination)
        else:
            for text in svc.source_range_texts(lay):
                out.nat(head, "-s", text, "-j", destination)
            if svc.node_in_source_ranges(node):
                out.nat(head, "-s", node.addr(ip), "-j", destination)
        # Whatever did not match a source range is marked for kubelet's KUBE-FIREWALL to drop.
        out.nat(head, "-j", KUBE_MARK_DROP)

    if node_port := svc.port.node_port:
        match = ("-m", "comment", "--comment", name, _proto(svc.proto), "--dport", str(node_port))
        if not plan.has_endpoints:
            _write_reject(out, KUBE_EXTERNAL_SERVICES, name, (_LOCAL_DST, _proto(svc.proto), "--dport", str(node_port)))
        elif not svc.external_local:
            out.nat("-A", svc_chain if lay.masquerade_in_service_chain else KUBE_NODEPORTS, match, "-j", KUBE_MARK_MASQ)
            out.nat("-A", KUBE_NODEPORTS, match, "-j", svc_chain)
        else:
            # Fix localhost martian source error: 127/8 sources must be masqueraded.
            out.nat("-A", KUBE_NODEPORTS, match, "-s", "127.0.0.0/8", "-j", KUBE_MARK_MASQ)
            out.nat("-A", KUBE_NODEPORTS, match, "-j", xlb_chain)

    _write_health_check_rule(out, node, svc)

    if not plan.has_endpoints:
        return
    affinity_endpoints = plan.reachable if lay.minor <= 22 else plan.cluster
    if lay.minor <= 21:
        # Chains first, then per endpoint its balancing rule followed by its own chain's rules.
        out.nat_chains += [svc.endpoint_chain(ep) for ep in plan.reachable]
        _write_affinity_rules(out, svc_chain, svc, affinity_endpoints, large, node)
        for i, ep in enumerate(plan.cluster):
            _write_balancing_rule(out, svc_chain, svc, plan.cluster, i, large, node)
            _write_endpoint_rules(out, node, svc, ep, large)
    else:
        if lay.minor == 22:
            out.nat_chains += [svc.endpoint_chain(ep) for ep in plan.reachable]
        _write_affinity_rules(out, svc_chain, svc, affinity_endpoints, large, node)
        for i in range(len(plan.cluster)):
            _write_balancing_rule(out, svc_chain, svc, plan.cluster, i, large, node)
        if lay.minor == 22:
            for ep in plan.reachable:
                _write_endpoint_rules(out, node, svc, ep, large)

    if not svc.external_local:
        return
    if cfg.cluster_cidr:
        # Pods going to the external VIP are sent to the ClusterIP instead: any endpoint.
        redirect = _comment("Redirect pods trying to reach external loadbalancer VIP to clusterIP")
        out.nat("-A", xlb_chain, redirect, node.if_local(), "-j", svc_chain)
    masq_local = _comment(f"masquerade LOCAL traffic for {name} LB IP")
    out.nat("-A", xlb_chain, masq_local, _LOCAL_SRC, "-j", KUBE_MARK_MASQ)
    route_local = _comment(f"route LOCAL traffic for {name} LB IP to service chain")
    out.nat("-A", xlb_chain, route_local, _LOCAL_SRC, "-j", svc_chain)
    if not plan.local:
        out.nat("-A", xlb_chain, _comment(f"{name} has no local endpoints"), "-j", KUBE_MARK_DROP)
    elif lay.minor <= 22:
        timeout = svc.port.affinity_timeout
        for ep in plan.local if timeout else ():
            sep = svc.endpoint_chain(ep)
            recent = ("-m", "recent", "--name", sep, "--rcheck", "--seconds", str(timeout), "--reap")
            out.nat("-A", xlb_chain, "-m", "comment", "--comment", name, recent, "-j", sep)
        for i, ep in enumerate(plan.local):
            pick = _statistic(len(plan.local) - i)
            out.nat("-A", xlb_chain, _comment(f"Balancing rule {i} for {name}"), pick, "-j", svc.endpoint_chain(ep))
    else:
        _write_affinity_rules(out, xlb_chain, svc, plan.local, large, node)
        for i in range(len(plan.local)):
            _write_balancing_rule(out, xlb_chain, svc, plan.local, i, large, node)


# --- 1.24 and later: KUBE-EXT / KUBE-SVL ----------------------------------------------------------


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
        _write_policy_chain(out, node, svc, svc.chain(hashing.service_chain), plan.cluster, large)
    if plan.local:
        _write_policy_chain(out, node, svc, svc.chain(hashing.local_chain), plan.local, large)
    elif node.lay.mark_drop and plan.has_endpoints and plan.uses_local_chain:
        # 1.24: a Local policy without local endpoints marks for kubelet's KUBE-FIREWALL.
        local_chain = svc.chain(hashing.local_chain)
        out.nat_chains.append(local_chain)
        out.nat("-A", local_chain, _comment(f"{svc.name} has no local endpoints"), "-j", KUBE_MARK_DROP)
    for ep in plan.reachable:
        _write_endpoint_chain(out, node, svc, ep, large)


def _write_service_entries(out: _Tables, node: _Node, plan: _Plan) -> None:
    """Where a Service's addresses are caught: nat jumps, or filter verdicts when nothing serves them."""
    svc, lay = plan.svc, node.lay
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
        if plan.uses_firewall_chain and not lay.mark_drop:
            # Whatever KUBE-FW-* did not DNAT is dropped here, in filter.
            out.filter("-A", KUBE_PROXY_FIREWALL, fw_comment, _to(svc, ip), "-j", "DROP")
    if not plan.has_external_endpoints:
        for ip in svc.lb_ips:
            _write_verdict(out, KUBE_EXTERNAL_SERVICES, plan, _to(svc, ip))

    if svc.port.node_port:
        _write_node_port(out, node, plan)

    _write_health_check_rule(out, node, svc)


def _write_node_port(out: _Tables, node: _Node, plan: _Plan) -> None:
    svc = plan.svc
    head = ("-A", KUBE_NODEPORTS, "-m", "comment", "--comment", svc.name, _proto(svc.proto))
    node_port = ("--dport", str(svc.port.node_port))
    ext_chain = svc.chain(hashing.external_chain)
    if plan.has_endpoints:
        # NodePorts are not subject to loadBalancerSourceRanges: straight to EXT.
        if node.localhost_nodeports and node.nfacct and node.lay.nfacct_localhost:
            nfacct = ("-m", "nfacct", "--nfacct-name", NFACCT_LOCALHOST_NODEPORTS)
            out.nat(head, "-d", "127.0.0.0/8", node_port, nfacct, "-j", ext_chain)
        out.nat(head, node_port, "-j", ext_chain)
    if not plan.has_external_endpoints:
        _write_verdict(out, KUBE_EXTERNAL_SERVICES, plan, _LOCAL_DST, _proto(svc.proto), node_port)


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
        masq_comment = _comment(f"masquerade LOCAL traffic for {destinations}")
        out.nat("-A", ext_chain, masq_comment, _LOCAL_SRC, "-j", KUBE_MARK_MASQ)
        out.nat("-A", ext_chain, _comment(f"route LOCAL traffic for {destinations}"), _LOCAL_SRC, "-j", cluster_chain)
    if plan.has_external_endpoints:
        out.nat("-A", ext_chain, "-j", plan.external_policy_chain)


def _write_firewall_chain(out: _Tables, node: _Node, plan: _Plan) -> None:
    """KUBE-FW-*: loadBalancerSourceRanges. Only VIP-style LBs that keep the client IP are filtered."""
    svc, lay = plan.svc, node.lay
    fw_chain = svc.chain(hashing.firewall_chain)
    ext_chain = svc.chain(hashing.external_chain)
    out.nat_chains.append(fw_chain)
    head = ("-A", fw_chain, _comment(f"{svc.name} loadbalancer IP"))
    # 1.24 wrote the whole chain once per LoadBalancer IP, ending in KUBE-MARK-DROP.
    for lb_ip in svc.lb_ips if lay.mark_drop else svc.lb_ips[:1]:
        for text in svc.source_range_texts(lay):
            out.nat(head, "-s", text, "-j", ext_chain)
        if svc.node_in_source_ranges(node):
            for ip in [lb_ip] if lay.mark_drop else svc.lb_ips:
                out.nat(head, "-s", ip, "-j", ext_chain)
        if lay.mark_drop:
            out.nat(head, "-j", KUBE_MARK_DROP)
    if lay.fw_trailing_comment:
        out.nat("-A", fw_chain, _comment(f"other traffic to {svc.name} will be dropped by KUBE-PROXY-FIREWALL"))


def _write_policy_chain(
    out: _Tables, node: _Node, svc: _ServiceView, chain: str, endpoints: Sequence[Endpoint], large: bool
) -> None:
    """KUBE-SVC-* / KUBE-SVL-*: affinity checks first, then one random pick per endpoint."""
    out.nat_chains.append(chain)
    _write_affinity_rules(out, chain, svc, endpoints, large, node)
    for i in range(len(endpoints)):
        _write_balancing_rule(out, chain, svc, endpoints, i, large, node)


# --- shared by all layouts ------------------------------------------------------------------------


def _write_health_check_rule(out: _Tables, node: _Node, svc: _ServiceView) -> None:
    if node.lay.health_check_rules and (hc_port := svc.health_check_node_port):
        # Accepted whether or not this node has local endpoints: the LB must be able to ask.
        hc_comment = _comment(f"{svc.name} health check node port")
        out.filter("-A", KUBE_NODEPORTS, hc_comment, _proto("tcp"), "--dport", str(hc_port), "-j", "ACCEPT")


def _write_reject(out: _Tables, chain: str, name: str, match: Iterable[str]) -> None:
    out.filter("-A", chain, _comment(f"{name} has no endpoints"), match, "-j", "REJECT")


def _balancing_comment(svc: _ServiceView, ep: Endpoint, large: bool, node: _Node) -> tuple[str, ...]:
    """Comments on KUBE-SVC/SVL/XLB rules, which kube-proxy leaves out in large clusters."""
    if large:
        return ()
    if node.lay.arrow_comments:
        return _comment(f"{svc.name} -> {ep.address}")
    return ("-m", "comment", "--comment", svc.name)


def _write_affinity_rules(
    out: _Tables, chain: str, svc: _ServiceView, endpoints: Sequence[Endpoint], large: bool, node: _Node
) -> None:
    if not svc.port.affinity_timeout:
        return
    for ep in endpoints:
        sep = svc.endpoint_chain(ep)
        recent = ("-m", "recent", "--name", sep, "--rcheck", "--seconds", str(svc.port.affinity_timeout), "--reap")
        out.nat("-A", chain, _balancing_comment(svc, ep, large, node), recent, "-j", sep)


def _write_balancing_rule(
    out: _Tables, chain: str, svc: _ServiceView, endpoints: Sequence[Endpoint], i: int, large: bool, node: _Node
) -> None:
    ep = endpoints[i]
    pick = _statistic(len(endpoints) - i)
    out.nat("-A", chain, _balancing_comment(svc, ep, large, node), pick, "-j", svc.endpoint_chain(ep))


def _statistic(remaining: int) -> tuple[str, ...]:
    """Rule i matches 1/(n-i) of what reaches it; the last one takes the rest."""
    if remaining <= 1:
        return ()
    return ("-m", "statistic", "--mode", "random", "--probability", f"{1 / remaining:.10f}")


def _write_endpoint_chain(out: _Tables, node: _Node, svc: _ServiceView, ep: Endpoint, large: bool) -> None:
    out.nat_chains.append(svc.endpoint_chain(ep))
    _write_endpoint_rules(out, node, svc, ep, large)


def _write_endpoint_rules(out: _Tables, node: _Node, svc: _ServiceView, ep: Endpoint, large: bool) -> None:
    """KUBE-SEP-*: masquerade hairpin traffic (a pod reaching itself), remember affinity, DNAT."""
    sep = svc.endpoint_chain(ep)
    comment = () if large else ("-m", "comment", "--comment", svc.name)
    out.nat("-A", sep, comment, "-s", node.addr(ep.ip), "-j", KUBE_MARK_MASQ)
    affinity = ("-m", "recent", "--name", sep, "--set") if svc.port.affinity_timeout else ()
    out.nat("-A", sep, comment, affinity, _proto(svc.proto), "-j", "DNAT", "--to-destination", ep.address)


def _write_nodeports_jumps(out: _Tables, node: _Node) -> None:
    """The tail call to KUBE-NODEPORTS; it must follow every other KUBE-SERVICES rule."""
    comment = _comment("kubernetes service nodeports; NOTE: this must be the last rule in this chain")
    if node.nodeport_ips is None:
        # Without route_localnet a NodePort cannot answer on 127/8, so do not catch it (1.26+).
        not_localhost = () if node.localhost_nodeports else ("!", "-d", "127.0.0.0/8")
        out.nat("-A", KUBE_SERVICES, comment, _LOCAL_DST, not_localhost, "-j", KUBE_NODEPORTS)
        return
    for ip in node.nodeport_ips:
        out.nat("-A", KUBE_SERVICES, comment, "-d", ip, "-j", KUBE_NODEPORTS)


def _write_forward_rules(out: _Tables, node: _Node) -> None:
    lay = node.lay
    if not (lay.conditional_invalid_drop and node.config.conntrack_tcp_be_liberal):
        # Without tcp_be_liberal an out-of-window packet is INVALID, is not un-DNATed and would
        # reach the pod with the wrong addresses, which then resets the connection (issue 74839).
        counted = node.nfacct and lay.nfacct_invalid
        nfacct = ("-m", "nfacct", "--nfacct-name", NFACCT_INVALID_DROPPED) if counted else ()
        out.filter("-A", KUBE_FORWARD, "-m", "conntrack", "--ctstate", "INVALID", nfacct, "-j", "DROP")
    # Forward marked traffic (and what follows it) even when the FORWARD policy is DROP.
    marked = ("-m", "mark", "--mark", f"{node.mark}/{node.mark}")
    out.filter("-A", KUBE_FORWARD, _comment("kubernetes forwarding rules"), marked, "-j", "ACCEPT")
    established = ("-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED")
    if lay.split_conntrack_rules:
        for which in ("source", "destination"):
            comment = _comment(f"kubernetes forwarding conntrack pod {which} rule")
            out.filter("-A", KUBE_FORWARD, comment, established, "-j", "ACCEPT")
    else:
        out.filter("-A", KUBE_FORWARD, _comment("kubernetes forwarding conntrack rule"), established, "-j", "ACCEPT")


def _comment(text: str) -> tuple[str, ...]:
    return ("-m", "comment", "--comment", _quoted(text))


def _to(svc: _ServiceView, ip: str) -> tuple[str, ...]:
    """Match the Service port on one of its addresses."""
    return (*_proto(svc.proto), "-d", ip, "--dport", str(svc.port.port))


def _proto(proto: str) -> tuple[str, ...]:
    return ("-m", proto, "-p", proto)


def _quoted(text: str) -> str:
    return f'"{text}"'


def _kubelet_spelling(rule: str) -> str:
    """kubelet writes --dst/--src where kube-proxy writes -d/-s; iptables -C treats them alike."""
    return rule.replace(" --dst ", " -d ").replace(" --src ", " -s ")


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
