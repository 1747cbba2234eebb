"""kube-proxy's iptables mode, Kubernetes 1.19 to 1.38, as a pure function.

`render_iptables(services, config, node_ips, version)` reproduces a full sync of syncProxyRules()
in pkg/proxy/iptables/proxier.go as kube-proxy of `version` writes it: the iptables-restore
payload kube-proxy writes with --noflush, and the jump rules it installs into the built-in chains
with `iptables -C`/`-I` before that. The layouts are read from the kube-proxy sources vendored by
openshift/sdn (one commit per minor, 1.20-1.30) and, for 1.28 and later, from
kubernetes/kubernetes 531be81208e2274ef42e72525a26610a9622bcdf; docs/kubeproxy-versions.md maps
the versions onto layout eras and says what is inferred (1.36-1.38 write 1.35's rules: INFERRED, no rule change in
their changelogs, CHANGELOG-1.38.md read up to v1.38.0-alpha.2). Version differences are switched by
Release, next to the rule they change.

On purpose, this differs from a live kube-proxy in ways the kernel does not see:
- Service ports are written in the caller's order, and per-address NodePort jumps in node_ips
  order; kube-proxy walks Go maps (random order). Rules of one Service keep kube-proxy's order.
- It is always a full sync from nothing: no partial syncs, no "-X" lines for stale chains.
- IPv4 only. Addresses of the other family are ignored, as kube-proxy's IPv4 proxier ignores them;
  a Service whose ClusterIP is IPv6 (or headless) yields no rules.
- Addresses are written canonically. kube-proxy 1.23-1.29 copied externalIP, LoadBalancer and
  endpoint addresses as given ("192.168.099.022"); the API server only accepts such leading
  zeros for old objects.
- Endpoints are chosen as in every mode (endpoints.py, topology hints included). Feature gates are at their
  default for the version (e.g. ProxyTerminatingEndpoints off before 1.26).
The input is kube-proxy's processed view (service.ServicePort): LoadBalancer IPs with ipMode Proxy
must already be left out, as kube-proxy leaves them out.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from ipaddress import ip_network

from lab.render.kubeproxy import hashing
from lab.render.kubeproxy.addresses import Family, parse_ip
from lab.render.kubeproxy.affinity import AffinityLookup
from lab.render.kubeproxy.because import (
    CHOICE,
    MARK,
    Because,
    Setting,
    at_random,
    external_policy,
    hairpin_masquerade,
    local_detector,
    local_policy,
    masquerade_all,
    session_affinity,
)
from lab.render.kubeproxy.endpoints import categorize, hinted
from lab.render.kubeproxy.node import NodeBase
from lab.render.kubeproxy.service import Endpoint, NodeTopology, ProxyConfig, ServicePort
from lab.render.kubeproxy.versions import Release, era_of
from lab.render.kubeproxy.view import ServiceView
from lab.render.kubeproxy.xtables import (
    KUBE_FIREWALL,
    KUBE_FORWARD,
    KUBE_MARK_DROP,
    KUBE_MARK_MASQ,
    KUBE_POSTROUTING,
    JumpRule,
    KubeletRules,
    XtablesPayload,
    comment_match,
    flatten,
    forward_accept_rules,
    join,
    kubelet_rules,
    mark_masq_rule,
    postrouting_rules,
    quoted,
    restore_text,
)

DEFAULT_VERSION = "1.31"

KUBE_SERVICES = "KUBE-SERVICES"
KUBE_EXTERNAL_SERVICES = "KUBE-EXTERNAL-SERVICES"
KUBE_NODEPORTS = "KUBE-NODEPORTS"
KUBE_PROXY_FIREWALL = "KUBE-PROXY-FIREWALL"

# Past this many endpoints kube-proxy drops the comments of KUBE-SVC/SEP rules to keep the
# ruleset small ("large cluster mode"; endpointChainsNumberThreshold before 1.25).
LARGE_CLUSTER_ENDPOINTS = 1000

# nfacct object names (pkg/proxy/metrics).
NFACCT_INVALID_DROPPED = "ct_state_invalid_dropped_pkts"
NFACCT_LOCALHOST_NODEPORTS = "localhost_nps_accepted_pkts"

# The rules that send a client its xt_recent list knows to its endpoint (`-m recent --rcheck`, in the service and
# XLB chains; not the endpoint chain's `--set` that records it), as iptables-save prints them.
_RCHECK = "--rcheck"
AFFINITY_LOOKUP = AffinityLookup("nat", (_RCHECK,))
# The loopback network each family's NodePorts jump leaves out when localhost NodePorts are off (the IPv6 proxier
# always: IPv6 has no route_localnet, kube-proxy's TestDisableLocalhostNodePortsIPv6 writes "! -d ::1/128").
_LOOPBACK_NET = {"IPv4": ip_network("127.0.0.0/8"), "IPv6": ip_network("::1/128")}
_NEW = ("-m", "conntrack", "--ctstate", "NEW")
_LOCAL_SRC = ("-m", "addrtype", "--src-type", "LOCAL")
_LOCAL_DST = ("-m", "addrtype", "--dst-type", "LOCAL")


def jump_rules(version: str = DEFAULT_VERSION) -> tuple[JumpRule, ...]:
    """iptablesJumpChains (+ iptablesKubeletJumpChains from 1.27) of that version, in the order
    kube-proxy ensures them. Each missing rule is inserted at position 1, so on a fresh node each
    built-in chain ends up holding them in reverse order."""
    release = Release.of(version)
    external = "kubernetes externally-visible service portals"
    portals = "kubernetes service portals"
    lb_firewall = "kubernetes load balancer firewall"
    rules = [JumpRule("filter", "INPUT", KUBE_EXTERNAL_SERVICES, external, _NEW)]
    if release.forward_external_services:
        rules.append(JumpRule("filter", "FORWARD", KUBE_EXTERNAL_SERVICES, external, _NEW))
    if release.health_check_accept_rules:
        rules.append(JumpRule("filter", "INPUT", KUBE_NODEPORTS, "kubernetes health check service ports"))
    rules.append(JumpRule("filter", "FORWARD", KUBE_SERVICES, portals, _NEW))
    rules.append(JumpRule("filter", "OUTPUT", KUBE_SERVICES, portals, _NEW))
    if not release.forward_external_services:
        rules.append(JumpRule("filter", "INPUT", KUBE_SERVICES, portals, _NEW))
    rules.append(JumpRule("filter", "FORWARD", KUBE_FORWARD, "kubernetes forwarding rules"))
    if not release.kubelet_mark_drop:
        for chain in ("INPUT", "OUTPUT", "FORWARD"):
            rules.append(JumpRule("filter", chain, KUBE_PROXY_FIREWALL, lb_firewall, _NEW))
    rules.append(JumpRule("nat", "OUTPUT", KUBE_SERVICES, portals))
    rules.append(JumpRule("nat", "PREROUTING", KUBE_SERVICES, portals))
    rules.append(JumpRule("nat", "POSTROUTING", KUBE_POSTROUTING, "kubernetes postrouting rules"))
    if release.own_kube_firewall:  # kube-proxy's own copy of kubelet's KUBE-FIREWALL jumps (no comment)
        rules += [JumpRule("filter", "INPUT", KUBE_FIREWALL), JumpRule("filter", "OUTPUT", KUBE_FIREWALL)]
    return tuple(rules)


# The current list (1.28 and later); `jump_rules(version)` gives older ones.
JUMP_RULES: tuple[JumpRule, ...] = jump_rules("1.28")


@dataclass(frozen=True)
class IptablesRules(XtablesPayload):
    """Everything kube-proxy's iptables mode puts into one node's IPv4 filter and nat tables."""

    table_order = ("filter", "nat")

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
    # Why the rules that mark for masquerade or choose an endpoint were written (because.py).
    because: tuple[Because, ...] = ()

    @property
    def era(self) -> str:
        return era_of(self.version)

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
        return restore_text(self.tables, self.jump_rules, self.kubelet, self.ensured_chains)


def render_iptables(
    services: Sequence[ServicePort],
    config: ProxyConfig,
    node_ips: Sequence[str] = (),
    version: str = DEFAULT_VERSION,
    *,
    kubelet_iptables_cleanup: bool | None = None,
    shared: SharedRules | None = None,
) -> IptablesRules:
    """Render kube-proxy's rules for one node, as kube-proxy `version` ("1.19".."1.38") writes them.

    node_ips are the node's own addresses (kube-proxy reads them from the interfaces); the first
    is the node IP kube-proxy was given (--node-ip), used to let the node through
    loadBalancerSourceRanges. They matter when config.node_port_addresses is set, to pick the
    addresses that serve NodePorts, and for the source-range check.
    kubelet_iptables_cleanup overrides the default of kubelet's IPTablesOwnershipCleanup gate
    (1.25-1.27 only), which decides whether kubelet's rules join restore_text().
    shared: the Service ports' rules other nodes of the cluster wrote, which a node that sees a port as they
    did splices in rather than writing again (SharedRules); the result is the same with or without it.
    """
    release = Release.of(version)
    node = _Node.build(config, node_ips, release)
    shared = shared if shared is not None else SharedRules()
    keys = [shared.key(port, node) for port in services]
    out = _Tables()
    _write_fixed_rules(out, node)
    large = sum(shared.endpoint_count(key) for key in keys) > LARGE_CLUSTER_ENDPOINTS
    for port, key in zip(services, keys, strict=True):
        out.extend(shared.written(port, key, node, large))
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
        ensured_chains=(("nat", KUBE_MARK_DROP),) if release.ensures_mark_drop_chain else (),
        kubelet=kubelet_rules(version, kubelet_iptables_cleanup, config.family),
        because=tuple(out.because),
    )


@dataclass(frozen=True)
class _Node(NodeBase):
    """The per-node settings NewProxier derives from the flags."""

    release: Release
    localhost_nodeports: bool  # rules may serve NodePorts on 127/8 (always, before the 1.26 flag)
    route_localnet: bool
    nodeport_ips: tuple[str, ...] | None  # None: every local address serves NodePorts

    @classmethod
    def build(cls, config: ProxyConfig, node_ips: Sequence[str], release: Release) -> _Node:
        base = NodeBase.build(config, node_ips)
        everywhere = base.node_ports_everywhere
        loopback = _LOOPBACK_NET[config.family]
        has_loopback = everywhere or any(
            cidr.version == loopback.version and cidr.overlaps(loopback)  # type: ignore[arg-type]
            for cidr in base.node_port_cidrs
        )
        if config.family == "IPv6":
            # No route_localnet for IPv6: the IPv6 proxier never serves NodePorts on ::1 (its NodePortAddresses
            # has no IPv4 loopback, so NewProxier turns localhostNodePorts off), in every release the lab models.
            localhost = route_localnet = False
        elif release.localhost_nodeports_flag:
            # Localhost NodePorts are switched off unless the NodePort addresses include loopback.
            localhost = config.localhost_nodeports and has_loopback
            route_localnet = localhost
        else:
            localhost = True
            route_localnet = has_loopback if release.route_localnet_only_for_loopback_nodeports else True
        nodeport_ips = None
        if not everywhere:
            matching = base.node_port_addresses()
            nodeport_ips = tuple(str(ip) for ip in matching if localhost or not ip.is_loopback)
        return cls(**base.facts(), release=release, localhost_nodeports=localhost, route_localnet=route_localnet,
                   nodeport_ips=nodeport_ips)  # fmt: skip

    @property
    def nfacct(self) -> bool:
        return self.config.nfacct_counters

    def if_local(self) -> tuple[str, ...]:
        return ("-s", self.config.cluster_cidr) if self.config.cluster_cidr else ()

    def if_not_local(self) -> tuple[str, ...]:
        return ("!", "-s", self.config.cluster_cidr) if self.config.cluster_cidr else ()

    def addr(self, ip: str) -> str:
        # utilproxy.ToCIDR: a host route of the address's family (/32, /128 in the IPv6 proxier).
        return f"{ip}/{32 if self.config.family == 'IPv4' else 128}" if self.release.cidr_suffix else ip


class _ServiceView(ServiceView):
    """What the iptables proxier reads besides: its chain names, and source ranges as written or parsed."""

    def chain(self, name_fn: Callable[[str, str], str]) -> str:
        return name_fn(self.name, self.proto)

    def endpoint_chain(self, ep: Endpoint) -> str:
        return hashing.endpoint_chain(self.name, self.proto, ep.address)

    def source_range_texts(self, release: Release) -> list[str]:
        return [text if release.source_ranges_as_written else str(cidr) for text, cidr in self.source_ranges]

    def node_in_source_ranges(self, node: _Node) -> bool:
        return node.primary_in(self.source_cidrs)


@dataclass(frozen=True)
class _Plan:
    """kube-proxy's per-service decisions: which endpoints, which chains, which filter verdicts."""

    svc: _ServiceView
    release: Release
    cluster: tuple[Endpoint, ...]  # balanced over in KUBE-SVC-*
    local: tuple[Endpoint, ...]  # balanced over in KUBE-XLB-* / KUBE-SVL-*
    reachable: tuple[Endpoint, ...]  # the ones with a KUBE-SEP-* chain
    has_endpoints: bool

    @classmethod
    def build(cls, svc: _ServiceView, release: Release) -> _Plan:
        chosen = categorize(svc, release)
        return cls(svc, release, chosen.cluster, chosen.local, chosen.reachable, chosen.has_endpoints)

    @property
    def uses_local_chain(self) -> bool:
        svc = self.svc
        return svc.internal_local or (svc.external_local and svc.externally_accessible)

    @property
    def has_internal_endpoints(self) -> bool:
        if self.release.kubelet_mark_drop:  # up to 1.24 KUBE-SVL-* itself marks for dropping
            return self.has_endpoints
        return self.has_endpoints and (bool(self.local) or not self.svc.internal_local)

    @property
    def has_external_endpoints(self) -> bool:
        if self.release.kubelet_mark_drop:
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
            return "REJECT", quoted(f"{self.svc.name} has no endpoints")
        return "DROP", quoted(f"{self.svc.name} has no local endpoints")


@dataclass
class _Tables:
    """kube-proxy's four line buffers: chain declarations and rules for filter and nat."""

    filter_chains: list[str] = field(default_factory=list)
    filter_rules: list[str] = field(default_factory=list)
    nat_chains: list[str] = field(default_factory=list)
    nat_rules: list[str] = field(default_factory=list)
    because: list[Because] = field(default_factory=list)  # why its rules that mark or choose were written

    def filter(self, *parts: str | Iterable[str]) -> None:
        self.filter_rules.append(join(flatten(parts)))

    def nat(self, *parts: str | Iterable[str]) -> None:
        self.nat_rules.append(join(flatten(parts)))

    def mark(self, chain: str, comment: str, setting: Setting | None, *match: str | Iterable[str]) -> None:
        """A rule of nat `chain` that jumps to KUBE-MARK-MASQ, with the setting that wrote it; `comment` is its
        comment ("" for none), which iptables-save shows back as it was written."""
        commented = comment_match(comment) if comment else ()
        self.nat("-A", chain, commented, match, "-j", KUBE_MARK_MASQ)
        self.marked(chain, setting, *((comment,) if comment else ()))

    def marked(self, chain: str, setting: Setting | None, *says: str) -> None:
        """The nat rule of `chain` just written jumps to KUBE-MARK-MASQ because of `setting`; `says`: the other
        fragments of its text that tell it from its neighbours in iptables-save's listing."""
        self.because.append(Because(MARK, "nat", chain, (*says, f"-j {KUBE_MARK_MASQ}"), setting))

    def chooses(self, chain: str, endpoint_chain: str, setting: Setting | None, choice: str, *says: str) -> None:
        """The nat rule of `chain` just written jumps to `endpoint_chain`, choosing it as `choice` says."""
        self.because.append(Because(CHOICE, "nat", chain, (*says, f"-j {endpoint_chain}"), setting, choice))

    def extend(self, other: _Tables) -> None:
        """Another buffer's lines after these (one Service port's, written apart)."""
        self.filter_chains += other.filter_chains
        self.filter_rules += other.filter_rules
        self.nat_chains += other.nat_chains
        self.nat_rules += other.nat_rules
        self.because += other.because


@dataclass(frozen=True)
class _PortKey:
    """What decides one Service port's rules on a node: the node-level facts its writers read, and the port
    itself, without its endpoints' locality and the node it is seen from where they cannot matter (`shared`)."""

    facts: Hashable
    port: Hashable
    shared: Hashable  # the port without what differs between nodes: its view's endpoint count is read by it


@dataclass
class SharedRules:
    """Each Service port's rules as one node wrote them, kept for every other node of the cluster that sees the
    port the same way. What differs between nodes: which endpoints are local, the node's name and zone
    (topology hints), its node IP (loadBalancerSourceRanges) and its NodePort addresses (_write_nodeports_jumps,
    written per node anyway). With both traffic policies Cluster, CategorizeEndpoints (1.24+) reads no locality,
    and without any hint no topology: such a port is keyed without them, so a hundred nodes write it once. Any
    other port is keyed by everything its node's kube-proxy knows of it, and so written for that node alone."""

    _written: dict[tuple[_PortKey, bool], _Tables] = field(default_factory=dict)
    _views: dict[Hashable, tuple[int, bool]] = field(default_factory=dict)  # shared form: (endpoints, collapsed)

    def key(self, port: ServicePort, node: _Node) -> _PortKey:
        release = node.release
        eps = tuple(
            (e.ip, e.port, e.ready, e.serving, e.terminating, e.zone_hints, e.node_hints) for e in port.endpoints
        )
        family = node.config.family
        shared = (release.version, family, replace(port, endpoints=(), node=NodeTopology()), eps)
        facts = (release.version, node.config, node.mark, node.localhost_nodeports,
                 node.primary_ip if port.load_balancer_source_ranges else None)  # fmt: skip
        _, collapsed = self._view(port, shared, release, family)
        unlocalized = (
            release.endpoint_selection == "categorized"
            and port.internal_policy == port.external_policy == "Cluster"
            and not any(e.zone_hints or e.node_hints for e in port.endpoints)
            and not collapsed
        )
        return _PortKey(facts, shared if unlocalized else port, shared)

    def _view(self, port: ServicePort, shared: Hashable, release: Release, family: Family) -> tuple[int, bool]:
        """The port's endpoint count as its view has them, and whether two of its endpoints share an address
        (which copy kube-proxy keeps may be the local one): the same on every node."""
        if shared not in self._views:
            view = _ServiceView.build(port, release, family)
            count = len(view.endpoints) if view is not None else 0
            known = sum(
                parse_ip(e.ip, family) is not None and (e.ready or release.knows_unready_endpoints)
                for e in port.endpoints
            )
            self._views[shared] = (count, view is not None and count < known)
        return self._views[shared]

    def endpoint_count(self, key: _PortKey) -> int:
        return self._views[key.shared][0]

    def written(self, port: ServicePort, key: _PortKey, node: _Node, large: bool) -> _Tables:
        """The port's rules on `node`, written the first time a node sees it so."""
        if (key, large) not in self._written:
            out = _Tables()
            if (view := _ServiceView.build(port, node.release, node.config.family)) is not None:
                plan = _Plan.build(view, node.release)
                (_write_xlb_service if node.release.xlb else _write_service)(out, node, plan, large)
            self._written[key, large] = out
        return self._written[key, large]


def _write_fixed_rules(out: _Tables, node: _Node) -> None:
    release = node.release
    out.filter_chains += [KUBE_SERVICES, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD]
    if release.health_check_accept_rules:
        out.filter_chains.append(KUBE_NODEPORTS)
    if not release.kubelet_mark_drop:
        out.filter_chains.append(KUBE_PROXY_FIREWALL)
    out.nat_chains += [KUBE_SERVICES, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_MARK_MASQ]
    out.nat_rules += [*postrouting_rules(node.mark, node.config.random_fully), mark_masq_rule(node.mark)]
    if release.own_kube_firewall and node.localhost_nodeports:
        # route_localnet lets martian 127/8 traffic in from outside (issue 90259); this
        # rule (kubelet writes the same one) drops it unless it was DNATed to a NodePort.
        out.filter_chains.append(KUBE_FIREWALL)
        localnet = ("-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8")
        not_dnat = ("-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT")
        comment = comment_match("block incoming localnet connections")
        out.filter("-A", KUBE_FIREWALL, comment, localnet, not_dnat, "-j", "DROP")


# --- 1.19-1.23: KUBE-XLB ------------------------------------------------------------------------


def _write_xlb_service(out: _Tables, node: _Node, plan: _Plan, large: bool) -> None:
    """One Service port as syncProxyRules() wrote it up to 1.23, in its order: (1.23: endpoint
    chains first,) chains, ClusterIP, externalIPs, LoadBalancer IPs, NodePort, health check,
    service chain, then the KUBE-XLB chain of an externalTrafficPolicy=Local Service."""
    svc, release, cfg = plan.svc, node.release, node.config
    name, port = svc.name, str(svc.port.port)
    svc_chain = svc.chain(hashing.service_chain)
    xlb_chain = "KUBE-XLB-" + hashing.port_proto_hash(name, svc.proto)
    fw_chain = svc.chain(hashing.firewall_chain)
    # Where traffic to the Service's external addresses goes.
    destination = xlb_chain if svc.external_local else svc_chain
    # Where its masquerade rules live (#96959).
    masq_chain = svc_chain if release.masquerade_in_service_chain else KUBE_SERVICES

    if release.xlb_endpoint_chains_first and plan.has_endpoints:
        for ep in plan.reachable:
            _write_endpoint_chain(out, node, svc, ep, large)
    if plan.has_endpoints:
        out.nat_chains.append(svc_chain)
    if svc.external_local:
        # Declared whenever the policy is Local, endpoints or not.
        out.nat_chains.append(xlb_chain)

    cluster_ip = (
        comment_match(f"{name} cluster IP"),
        _proto(svc.proto),
        "-d",
        node.addr(svc.cluster_ip),
        "--dport",
        port,
    )
    if plan.has_endpoints:
        if cfg.masquerade_all:
            out.nat("-A", masq_chain, cluster_ip, "-j", KUBE_MARK_MASQ)
            out.marked(masq_chain, masquerade_all(), f"{name} cluster IP")
        elif cfg.cluster_cidr:
            out.nat("-A", masq_chain, cluster_ip, node.if_not_local(), "-j", KUBE_MARK_MASQ)
            out.marked(masq_chain, local_detector(cfg.cluster_cidr), f"{name} cluster IP")
        out.nat("-A", KUBE_SERVICES, cluster_ip, "-j", svc_chain)
    else:
        _write_reject(out, KUBE_SERVICES, name, _to(svc, node.addr(svc.cluster_ip)))

    for ip in svc.external_ips:
        external_ip = (comment_match(f"{name} external IP"), _proto(svc.proto), "-d", node.addr(ip), "--dport", port)
        if not plan.has_endpoints:
            _write_reject(out, KUBE_EXTERNAL_SERVICES, name, _to(svc, node.addr(ip)))
            continue
        if not svc.external_local:
            # Cluster policy: SNAT, since the endpoint may be on another node. 1.19-1.20 always;
            # from 1.21 (#96296) like a ClusterIP, unless there is no local-traffic detector.
            unless_pod = () if release.physdev_external_ips else node.if_not_local()
            out.nat("-A", masq_chain, external_ip, unless_pod, "-j", KUBE_MARK_MASQ)
            out.marked(masq_chain, external_policy(name, "Cluster"), f"{name} external IP")
        if release.physdev_external_ips:
            # Only traffic not bridged in from a container and not from a local process...
            off_node = ("-m", "physdev", "!", "--physdev-is-in", "-m", "addrtype", "!", "--src-type", "LOCAL")
            out.nat("-A", KUBE_SERVICES, external_ip, off_node, "-j", destination)
            # ...or to an externalIP that is a local address (e.g. GCE LB IPs in the local table).
            out.nat("-A", KUBE_SERVICES, external_ip, _LOCAL_DST, "-j", destination)
        else:
            out.nat("-A", KUBE_SERVICES, external_ip, "-j", destination)

    for ip in svc.lb_ips:
        if not plan.has_endpoints:
            _write_reject(
                out,
                (KUBE_EXTERNAL_SERVICES if release.forward_external_services else KUBE_SERVICES),
                name,
                _to(svc, node.addr(ip)),
            )
            continue
        # A KUBE-FW chain for every LoadBalancer IP (declared once per IP, as kube-proxy did).
        out.nat_chains.append(fw_chain)
        lb_comment = comment_match(f"{name} loadbalancer IP")
        lb_ip = (_proto(svc.proto), "-d", node.addr(ip), "--dport", port)
        out.nat("-A", KUBE_SERVICES, lb_comment, lb_ip, "-j", fw_chain)
        head = ("-A", fw_chain, lb_comment)
        if not svc.external_local:
            out.nat(head, "-j", KUBE_MARK_MASQ)
            out.marked(fw_chain, external_policy(name, "Cluster"), f"{name} loadbalancer IP")
        if not svc.source_ranges:
            out.nat(head, "-j", destination)
        else:
            for text in svc.source_range_texts(release):
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
            masq_at = svc_chain if release.masquerade_in_service_chain else KUBE_NODEPORTS
            out.nat("-A", masq_at, match, "-j", KUBE_MARK_MASQ)
            out.marked(masq_at, external_policy(name, "Cluster"), f'"{name}"', f"--dport {node_port}")
            out.nat("-A", KUBE_NODEPORTS, match, "-j", svc_chain)
        else:
            # Fix localhost martian source error: 127/8 sources must be masqueraded (the IPv6 proxier names ::1/128,
            # INFERRED: no IPv6 golden of the xlb era is in the index).
            out.nat("-A", KUBE_NODEPORTS, match, "-s", str(_LOOPBACK_NET[node.config.family]), "-j", KUBE_MARK_MASQ)
            out.nat("-A", KUBE_NODEPORTS, match, "-j", xlb_chain)

    _write_health_check_rule(out, node, svc)

    if not plan.has_endpoints:
        return
    affinity_endpoints = plan.reachable if release.xlb_affinity_over_known_endpoints else plan.cluster
    if release.xlb_endpoint_rules_interleaved:
        # Chains first, then per endpoint its balancing rule followed by its own chain's rules.
        out.nat_chains += [svc.endpoint_chain(ep) for ep in plan.reachable]
        _write_affinity_rules(out, svc_chain, svc, affinity_endpoints, large, node)
        chosen_from = _chosen_from(svc_chain, svc, node)
        for i, ep in enumerate(plan.cluster):
            _write_balancing_rule(out, svc_chain, svc, plan.cluster, i, large, node, chosen_from)
            _write_endpoint_rules(out, node, svc, ep, large)
    else:
        if release.unready_endpoint_chains:
            out.nat_chains += [svc.endpoint_chain(ep) for ep in plan.reachable]
        _write_affinity_rules(out, svc_chain, svc, affinity_endpoints, large, node)
        chosen_from = _chosen_from(svc_chain, svc, node)
        for i in range(len(plan.cluster)):
            _write_balancing_rule(out, svc_chain, svc, plan.cluster, i, large, node, chosen_from)
        if release.unready_endpoint_chains:
            for ep in plan.reachable:
                _write_endpoint_rules(out, node, svc, ep, large)

    if not svc.external_local:
        return
    if cfg.cluster_cidr:
        # Pods going to the external VIP are sent to the ClusterIP instead: any endpoint.
        redirect = comment_match("Redirect pods trying to reach external loadbalancer VIP to clusterIP")
        out.nat("-A", xlb_chain, redirect, node.if_local(), "-j", svc_chain)
    masq_local = comment_match(f"masquerade LOCAL traffic for {name} LB IP")
    out.nat("-A", xlb_chain, masq_local, _LOCAL_SRC, "-j", KUBE_MARK_MASQ)
    out.marked(xlb_chain, external_policy(name, "Local"), f"masquerade LOCAL traffic for {name} LB IP")
    route_local = comment_match(f"route LOCAL traffic for {name} LB IP to service chain")
    out.nat("-A", xlb_chain, route_local, _LOCAL_SRC, "-j", svc_chain)
    if not plan.local:
        out.nat("-A", xlb_chain, comment_match(f"{name} has no local endpoints"), "-j", KUBE_MARK_DROP)
    elif release.xlb_affinity_over_known_endpoints:
        timeout = svc.port.affinity_timeout
        for ep in plan.local if timeout else ():
            sep = svc.endpoint_chain(ep)
            recent = ("-m", "recent", "--name", sep, _RCHECK, "--seconds", str(timeout), "--reap")
            out.nat("-A", xlb_chain, "-m", "comment", "--comment", name, recent, "-j", sep)
        for i, ep in enumerate(plan.local):
            pick = _statistic(len(plan.local) - i)
            out.nat(
                "-A", xlb_chain, comment_match(f"Balancing rule {i} for {name}"), pick, "-j", svc.endpoint_chain(ep)
            )
    else:
        _write_affinity_rules(out, xlb_chain, svc, plan.local, large, node)
        chosen_from = _chosen_from(xlb_chain, svc, node)
        for i in range(len(plan.local)):
            _write_balancing_rule(out, xlb_chain, svc, plan.local, i, large, node, chosen_from)


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
    elif node.release.kubelet_mark_drop and plan.has_endpoints and plan.uses_local_chain:
        # 1.24: a Local policy without local endpoints marks for kubelet's KUBE-FIREWALL.
        local_chain = svc.chain(hashing.local_chain)
        out.nat_chains.append(local_chain)
        out.nat("-A", local_chain, comment_match(f"{svc.name} has no local endpoints"), "-j", KUBE_MARK_DROP)
    for ep in plan.reachable:
        _write_endpoint_chain(out, node, svc, ep, large)


def _write_service_entries(out: _Tables, node: _Node, plan: _Plan) -> None:
    """Where a Service's addresses are caught: nat jumps, or filter verdicts when nothing serves them."""
    svc, release = plan.svc, node.release
    ext_chain = svc.chain(hashing.external_chain)
    cluster_ip = _to(svc, svc.cluster_ip)
    if plan.has_internal_endpoints:
        out.nat("-A", KUBE_SERVICES, comment_match(f"{svc.name} cluster IP"), cluster_ip, "-j", plan.internal_chain)
    else:
        _write_verdict(out, KUBE_SERVICES, plan, cluster_ip)

    for ip in svc.external_ips:
        if plan.has_endpoints:
            out.nat("-A", KUBE_SERVICES, comment_match(f"{svc.name} external IP"), _to(svc, ip), "-j", ext_chain)
        if not plan.has_external_endpoints:
            _write_verdict(out, KUBE_EXTERNAL_SERVICES, plan, _to(svc, ip))

    fw_comment = comment_match(f"{svc.name} traffic not accepted by {svc.chain(hashing.firewall_chain)}")
    for ip in svc.lb_ips:
        if plan.has_endpoints:
            lb_comment = comment_match(f"{svc.name} loadbalancer IP")
            out.nat("-A", KUBE_SERVICES, lb_comment, _to(svc, ip), "-j", plan.load_balancer_chain)
        if plan.uses_firewall_chain and not release.kubelet_mark_drop:
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
        if node.localhost_nodeports and node.nfacct and node.release.nfacct_localhost:
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
    svc, cidr = plan.svc, node.config.cluster_cidr
    match = (*_proto(svc.proto), "-d", svc.cluster_ip, "--dport", str(svc.port.port))
    if node.config.masquerade_all:
        out.mark(plan.internal_chain, f"{svc.name} cluster IP", masquerade_all(), *match)
    elif cidr:
        out.mark(plan.internal_chain, f"{svc.name} cluster IP", local_detector(cidr), *match, *node.if_not_local())


def _write_external_chain(out: _Tables, node: _Node, plan: _Plan) -> None:
    """KUBE-EXT-*: every NodePort, externalIP and LoadBalancer packet goes through here."""
    svc = plan.svc
    ext_chain = svc.chain(hashing.external_chain)
    cluster_chain = svc.chain(hashing.service_chain)
    out.nat_chains.append(ext_chain)
    destinations = f"{svc.name} external destinations"
    if not svc.external_local:
        # Cluster policy may send the packet to another node: masquerade so the reply returns.
        out.mark(ext_chain, f"masquerade traffic for {destinations}", external_policy(svc.name, "Cluster"))
    else:
        if node.config.cluster_cidr:
            # Pods reaching an external address behave as if they went out to the LB and came
            # back: any endpoint, source kept. Needs the local-traffic detector.
            out.nat(
                "-A", ext_chain, comment_match(f"pod traffic for {destinations}"), node.if_local(), "-j", cluster_chain
            )
        # The node itself picks a local address as source, which must be masqueraded, and may
        # use any endpoint.
        local = external_policy(svc.name, "Local")
        out.mark(ext_chain, f"masquerade LOCAL traffic for {destinations}", local, *_LOCAL_SRC)
        out.nat(
            "-A", ext_chain, comment_match(f"route LOCAL traffic for {destinations}"), _LOCAL_SRC, "-j", cluster_chain
        )
    if plan.has_external_endpoints:
        out.nat("-A", ext_chain, "-j", plan.external_policy_chain)


def _write_firewall_chain(out: _Tables, node: _Node, plan: _Plan) -> None:
    """KUBE-FW-*: loadBalancerSourceRanges. Only VIP-style LBs that keep the client IP are filtered."""
    svc, release = plan.svc, node.release
    fw_chain = svc.chain(hashing.firewall_chain)
    ext_chain = svc.chain(hashing.external_chain)
    out.nat_chains.append(fw_chain)
    head = ("-A", fw_chain, comment_match(f"{svc.name} loadbalancer IP"))
    # 1.24 wrote the whole chain once per LoadBalancer IP, ending in KUBE-MARK-DROP.
    for lb_ip in svc.lb_ips if release.kubelet_mark_drop else svc.lb_ips[:1]:
        for text in svc.source_range_texts(release):
            out.nat(head, "-s", text, "-j", ext_chain)
        if svc.node_in_source_ranges(node):
            for ip in [lb_ip] if release.kubelet_mark_drop else svc.lb_ips:
                out.nat(head, "-s", ip, "-j", ext_chain)
        if release.kubelet_mark_drop:
            out.nat(head, "-j", KUBE_MARK_DROP)
    if release.fw_trailing_comment:
        out.nat("-A", fw_chain, comment_match(f"other traffic to {svc.name} will be dropped by KUBE-PROXY-FIREWALL"))


def _write_policy_chain(
    out: _Tables, node: _Node, svc: _ServiceView, chain: str, endpoints: Sequence[Endpoint], large: bool
) -> None:
    """KUBE-SVC-* / KUBE-SVL-*: affinity checks first, then one random pick per endpoint."""
    out.nat_chains.append(chain)
    _write_affinity_rules(out, chain, svc, endpoints, large, node)
    chosen_from = _chosen_from(chain, svc, node)
    for i in range(len(endpoints)):
        _write_balancing_rule(out, chain, svc, endpoints, i, large, node, chosen_from)


# --- shared by all layouts ------------------------------------------------------------------------


def _write_health_check_rule(out: _Tables, node: _Node, svc: _ServiceView) -> None:
    if node.release.health_check_accept_rules and (hc_port := svc.health_check_node_port):
        # Accepted whether or not this node has local endpoints: the LB must be able to ask.
        hc_comment = comment_match(f"{svc.name} health check node port")
        out.filter("-A", KUBE_NODEPORTS, hc_comment, _proto("tcp"), "--dport", str(hc_port), "-j", "ACCEPT")


def _write_reject(out: _Tables, chain: str, name: str, match: Iterable[str]) -> None:
    out.filter("-A", chain, comment_match(f"{name} has no endpoints"), match, "-j", "REJECT")


def _balancing_comment(svc: _ServiceView, ep: Endpoint, large: bool, node: _Node) -> tuple[str, ...]:
    """Comments on KUBE-SVC/SVL/XLB rules, which kube-proxy leaves out in large clusters."""
    if large:
        return ()
    if node.release.arrow_comments:
        return comment_match(f"{svc.name} -> {ep.address}")
    return ("-m", "comment", "--comment", svc.name)


def _write_affinity_rules(
    out: _Tables, chain: str, svc: _ServiceView, endpoints: Sequence[Endpoint], large: bool, node: _Node
) -> None:
    if not svc.port.affinity_timeout:
        return
    for ep in endpoints:
        sep = svc.endpoint_chain(ep)
        timeout = str(svc.port.affinity_timeout)
        recent = ("-m", "recent", "--name", sep, _RCHECK, "--seconds", timeout, "--reap")
        out.nat("-A", chain, _balancing_comment(svc, ep, large, node), recent, "-j", sep)
        affinity = session_affinity(svc.name, svc.port.affinity_timeout)
        out.chooses(chain, sep, affinity, "by the client's affinity", _RCHECK)


def _write_balancing_rule(
    out: _Tables,
    chain: str,
    svc: _ServiceView,
    endpoints: Sequence[Endpoint],
    i: int,
    large: bool,
    node: _Node,
    chosen_from: Setting | None,
) -> None:
    ep = endpoints[i]
    pick = _statistic(len(endpoints) - i)
    out.nat("-A", chain, _balancing_comment(svc, ep, large, node), pick, "-j", svc.endpoint_chain(ep))
    out.chooses(chain, svc.endpoint_chain(ep), chosen_from, at_random(len(endpoints)))


def _chosen_from(chain: str, svc: _ServiceView, node: _Node) -> Setting | None:
    """The setting that narrowed a balancing chain's endpoints. Taken once per chain by its callers: the topology
    hints' check reads every endpoint, and once per rule made a chain of n endpoints cost n² (10 000 endpoints:
    seconds of render per node)."""
    local = chain.startswith(("KUBE-SVL-", "KUBE-XLB-"))
    internal = svc.internal_local and chain.startswith("KUBE-SVL-")
    return local_policy(svc.name, internal) if local else hinted(svc, node.release)


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
    out.because.append(Because(MARK, "nat", sep, (f"-j {KUBE_MARK_MASQ}",), hairpin_masquerade(svc.name)))
    affinity = ("-m", "recent", "--name", sep, "--set") if svc.port.affinity_timeout else ()
    out.nat("-A", sep, comment, affinity, _proto(svc.proto), "-j", "DNAT", "--to-destination", ep.address)


def _write_nodeports_jumps(out: _Tables, node: _Node) -> None:
    """The tail call to KUBE-NODEPORTS; it must follow every other KUBE-SERVICES rule."""
    comment = comment_match("kubernetes service nodeports; NOTE: this must be the last rule in this chain")
    if node.nodeport_ips is None:
        # Without route_localnet a NodePort cannot answer on 127/8, so do not catch it (1.26+).
        not_localhost = () if node.localhost_nodeports else ("!", "-d", str(_LOOPBACK_NET[node.config.family]))
        out.nat("-A", KUBE_SERVICES, comment, _LOCAL_DST, not_localhost, "-j", KUBE_NODEPORTS)
        return
    for ip in node.nodeport_ips:
        out.nat("-A", KUBE_SERVICES, comment, "-d", ip, "-j", KUBE_NODEPORTS)


def _write_forward_rules(out: _Tables, node: _Node) -> None:
    release = node.release
    if not (release.conditional_invalid_drop and node.config.conntrack_tcp_be_liberal):
        # Without tcp_be_liberal an out-of-window packet is INVALID, is not un-DNATed and would
        # reach the pod with the wrong addresses, which then resets the connection (issue 74839).
        counted = node.nfacct and release.nfacct_invalid
        nfacct = ("-m", "nfacct", "--nfacct-name", NFACCT_INVALID_DROPPED) if counted else ()
        out.filter("-A", KUBE_FORWARD, "-m", "conntrack", "--ctstate", "INVALID", nfacct, "-j", "DROP")
    out.filter_rules += forward_accept_rules(node.mark, release)


def _to(svc: _ServiceView, ip: str) -> tuple[str, ...]:
    """Match the Service port on one of its addresses."""
    return (*_proto(svc.proto), "-d", ip, "--dport", str(svc.port.port))


def _proto(proto: str) -> tuple[str, ...]:
    return ("-m", proto, "-p", proto)
