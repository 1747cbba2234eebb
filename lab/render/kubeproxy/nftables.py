"""kube-proxy's nftables mode, Kubernetes 1.30 to 1.38, as a pure function.

`render_nftables(services, config, node_ips, version)` reproduces the first syncProxyRules() of
pkg/proxy/nftables/proxier.go on a FRESH node: the one knftables transaction kube-proxy pipes into
`nft -f -` once both Services and EndpointSlices are synced, in the order its code adds the
operations ("add table", "add chain" + "flush chain", "add rule", "add set"/"add map", "flush",
"add element", ...; knftables' text form, IPv4 table `ip kube-proxy` only).

Versions and where each layout comes from (the `Release` switches name the change):
  1.30       openshift/sdn 70cefcddca885822c5e7214eaf9f0da33eccb26b (vendored upstream 1.30.3),
             pkg/proxy/nftables/proxier.go - exact source.
  1.31-1.32  kubernetes/kubernetes b0f823e6ccd8a10b3893fc75011b9981af39285c proxier.go, a master
             snapshot with #126013 (1.31: partial syncs, element storage) and without #130119
             (1.33). Changes from 1.30: set/map flushes move to the end of setupNFTables, the
             firewall rule moves after the external chain, firewall-ips elements lose their
             comment.
  1.33       GoogleCloudPlatform/kubernetes 3a65f31d88c1f0bd79fb7c4d2800600a31aee8f1 proxier.go, a
             mirror snapshot with #130119 (readOrReset) and without #131492/#132456 (1.34). On a
             fresh node ListElements fails and the same flushes are written, so the transaction
             equals 1.31-1.32. (Which release each snapshot belongs to is inferred from the PRs.)
  1.34-1.35  no proxier.go of that era is stored; the rules are those of kube-proxy's unit test at
             kubernetes/kubernetes 81810de635aa13aa0a32992f6def3aa9d6025ebc (TestOverallNFTablesRules,
             TestBadIPs, ...), which contain #132456 (filter-prerouting-pre-dnat /
             filter-output-pre-dnat at dstnat-10, filter-input/forward/output at priority 0,
             filter-output-post-dnat merged into filter-output) and #131492 (the ClusterIP
             masquerade rule no longer matches the port). Where the rules go in the transaction
             is the 1.33 order with those two changes applied (the once-per-process add+delete
             covers the new base chains): inferred.
  1.36-1.37  kiarashazarnia/kubernetes 4426ed5de01a08d75530f9e4c4814f6a28d806eb proxier.go, a master
             snapshot of August 2026 (after 1.37.0, with no test files), with the changes that came
             after 1.37 left out, and a 1.36.2 node's `nft list table ip kube-proxy` for 1.36: no
             mark-for-masquerade chain, the hairpin-connections set, one ClusterIP masquerade rule,
             "dnat ip addr . port to numgen ... map" (#135800, #136499, 1.36); 1.37 adds the plain
             DNAT of a one-endpoint Service (#140723) and cuts comments to 128 bytes (#139516). No
             kube-proxy test output of either release is stored: their goldens are the lab's own
             rendering, reviewed against that source.
  1.38       1.37's rules, with KubeProxyNFTablesLocalhostNodePorts on unless the configuration turns it off
             (#142490, READ in CHANGELOG-1.38.md's v1.38.0-alpha.2); no other nftables change is named there
             (INFERRED: no 1.38 tree is stored).
  1.29 (alpha: "firewall"/"firewall-allow" sets, a "forward" chain dropping ct state invalid,
  one endpoints-check chain) is not reproduced.

On purpose, this differs from a live kube-proxy in ways the kernel does not see:
- Service ports are written in the caller's order (kube-proxy walks a Go map), nodeport-ips in
  node_ips order (GetNodeIPs returns a Go map's values).
- Always the first sync of a fresh node: no "delete chain" of stale chains, no partial syncs.
- IPv4 only: addresses of the other family are ignored, as kube-proxy's IPv4 proxier ignores them;
  a Service whose ClusterIP is IPv6 (or headless) yields nothing. Addresses are canonical
  ("172.30.0.041" -> "172.30.0.41"), as kube-proxy 1.30+ writes them (TestBadIPs).
- Topology-aware routing (zone and node hints) as in every mode (endpoints.py); ProxyTerminatingEndpoints is GA.
- The caller leaves out LoadBalancer IPs with ipMode Proxy, as kube-proxy leaves them out.
- Localhost NodePorts are not served by rules in any release. With 1.37's KubeProxyNFTablesLocalhostNodePorts
  gate (#138427, alpha, off unless config.nft_localhost_nodeports; beta and on unless turned off in 1.38,
  #142490) kube-proxy rejects them in
  nodeport-endpoints-check through the localhost-nodeport-reject-ports map, and, when nodePortAddresses names
  a loopback CIDR itself, serves TCP ones with a userspace proxy: NftRules.localhost_nodeports lists its
  listeners (lab/install/localhost_proxy.py runs them). setupNFTables also adds and at once deletes the map
  (gate off) and the chains and counters of every protocol it does not reject; those add+delete pairs leave
  nothing behind and are not written here.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

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
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort
from lab.render.kubeproxy.versions import Release
from lab.render.kubeproxy.view import ServiceView

OLDEST_MINOR = 30
NEWEST_MINOR = 38
NFTABLES_VERSIONS = tuple(f"1.{minor}" for minor in range(OLDEST_MINOR, NEWEST_MINOR + 1))
DEFAULT_VERSION = "1.33"

FAMILY = "ip"
# kube-proxy's IPv6 proxier writes the same rules in its own `ip6 kube-proxy` table (not `inet`: KEP-3866): the
# proxier substitutes ipX ("ip"/"ip6") and ipvX_addr ("ipv4_addr"/"ipv6_addr") into each rule and set type, which
# the transaction does here for rules written in the IPv4 table's words: the address matches, and 1.36+'s
# `dnat ip addr . port to numgen ...` (nft refuses `dnat ip` in an ip6 table: "conflicting protocols specified: ip6
# vs. ip"; INFERRED that kube-proxy writes ipX there too, as in every rule, no IPv6 golden of 1.36 here).
TABLE_FAMILY = {"IPv4": "ip", "IPv6": "ip6"}
_IP_MATCH = re.compile(r"\bip (saddr|daddr|addr)\b")
TABLE = "kube-proxy"

# Fixed chain, set and map names (const block of proxier.go).
SERVICES = "services"
SERVICE_IPS = "service-ips"
SERVICE_NODEPORTS = "service-nodeports"
NODEPORT_IPS = "nodeport-ips"
CLUSTER_IPS = "cluster-ips"
SERVICE_ENDPOINTS_CHECK = "service-endpoints-check"
NODEPORT_ENDPOINTS_CHECK = "nodeport-endpoints-check"
NO_ENDPOINT_SERVICES = "no-endpoint-services"
NO_ENDPOINT_NODEPORTS = "no-endpoint-nodeports"
REJECT_CHAIN = "reject-chain"
CLUSTER_IPS_CHECK = "cluster-ips-check"
FIREWALL_IPS = "firewall-ips"
FIREWALL_CHECK = "firewall-check"
MARK_MASQ = "mark-for-masquerade"
MASQUERADING = "masquerading"
HAIRPIN = "hairpin-connections"

# Per-service prefixes; each is followed by servicePortChainNameBase / ...EndpointChainNameBase.
SERVICE_PREFIX = "service-"
LOCAL_PREFIX = "local-"
EXTERNAL_PREFIX = "external-"
FIREWALL_PREFIX = "firewall-"
ENDPOINT_PREFIX = "endpoint-"
AFFINITY_PREFIX = "affinity-"
# The service chain's rule that sends a client its affinity set knows to its endpoint (written in
# _write_balancing as `ip saddr @affinity-* goto endpoint-*`), as nft's trace prints it in each family's table:
# the IPv6 proxier's reads `ip6 saddr @affinity-*` (_Tx._words).
AFFINITY_LOOKUP = AffinityLookup(TABLE, tuple(f"{ip} saddr @{AFFINITY_PREFIX}" for ip in TABLE_FAMILY.values()))

# knftables.NameLengthMax (256) minus the longest prefix kube-proxy reserves (16).
_NAME_BASE_MAX = 256 - 16

_IP_PORT_PROTO = "ipv4_addr . inet_proto . inet_service : verdict"
_PORT_PROTO = "inet_proto . inet_service : verdict"
_NO_LOCALHOST = "ip daddr != 127.0.0.0/8"
# The IPv6 proxier's noLocalhost: setupNFTables in pkg/proxy/nftables/proxier.go (kubernetes/kubernetes
# 01d7de5464ba38091b53e0a4d5077ddde9553c08).
_NO_LOCALHOST_V6 = "ip6 daddr != ::1"
_LOCALHOST = "ip daddr 127.0.0.0/8"

# 1.37's KubeProxyNFTablesLocalhostNodePorts gate (#138427): the protocols whose localhost NodePorts kube-proxy
# rejects and counts, metrics.LocalhostNodePortRejectableProtocols without its userspace proxy (read in a review of
# v1.37.0: TCP, UDP and SCTP) and metrics.LocalhostNodePortRejectedProtocols with it (UDP and SCTP, read in the
# pull request's metrics.go: the proxy serves TCP only); each through its own chain and named counter.
LOCALHOST_REJECTS = "localhost-nodeport-reject-ports"
_REJECTABLE = ("tcp", "udp", "sctp")
_UNSERVED = ("udp", "sctp")


def _localhost_reject_chain(proto: str) -> str:
    return f"localhost-nodeport-reject-{proto}"


@dataclass(frozen=True)
class BaseChain:
    """One of kube-proxy's "${type}-${hook}" base chains; priorities are written as numbers, as
    knftables does (ParsePriority: dstnat = -100, srcnat = 100, filter = 0)."""

    name: str
    type: str
    hook: str
    priority: int


# 1.30-1.33 (#122614 moved filtering before DNAT, at dstnat-10; the post-DNAT output chain serves
# cluster-ips-check, #122692).
_BASE_CHAINS_1_30 = (
    BaseChain("filter-prerouting", "filter", "prerouting", -110),
    BaseChain("filter-input", "filter", "input", -110),
    BaseChain("filter-forward", "filter", "forward", -110),
    BaseChain("filter-output", "filter", "output", -110),
    BaseChain("filter-output-post-dnat", "filter", "output", -90),
    BaseChain("nat-prerouting", "nat", "prerouting", -100),
    BaseChain("nat-output", "nat", "output", -100),
    BaseChain("nat-postrouting", "nat", "postrouting", 100),
)

# 1.34+ (#132456): only the firewall check stays before DNAT; the rest runs at "filter" priority
# so that locally-originated traffic has already been short-circuited (DNATed) when checked.
_BASE_CHAINS_1_34 = (
    BaseChain("filter-prerouting-pre-dnat", "filter", "prerouting", -110),
    BaseChain("filter-output-pre-dnat", "filter", "output", -110),
    BaseChain("filter-forward", "filter", "forward", 0),
    BaseChain("filter-input", "filter", "input", 0),
    BaseChain("filter-output", "filter", "output", 0),
    BaseChain("nat-prerouting", "nat", "prerouting", -100),
    BaseChain("nat-output", "nat", "output", -100),
    BaseChain("nat-postrouting", "nat", "postrouting", 100),
)


@dataclass(frozen=True)
class JumpChain:
    """nftablesJumpChains: a top-level chain and the base chain that jumps to it."""

    dst: str
    src: str
    match: str = ""


def _jump_chains(prerouting: str, output_pre_dnat: str, output_post_dnat: str) -> tuple[JumpChain, ...]:
    """The same list in every supported version; only the base chains it hangs from were renamed."""
    new = "ct state new"
    return (
        # reject is only valid in input/forward/output hooks on kernels before 5.9, so the
        # endpoint checks cannot run in prerouting like the firewall check does.
        JumpChain(NODEPORT_ENDPOINTS_CHECK, "filter-input", new),
        JumpChain(SERVICE_ENDPOINTS_CHECK, "filter-input", new),
        JumpChain(SERVICE_ENDPOINTS_CHECK, "filter-forward", new),
        JumpChain(SERVICE_ENDPOINTS_CHECK, "filter-output", new),
        # loadBalancerSourceRanges must see the LoadBalancer IP, i.e. run before DNAT.
        JumpChain(FIREWALL_CHECK, prerouting, new),
        JumpChain(FIREWALL_CHECK, output_pre_dnat, new),
        JumpChain(SERVICES, "nat-output"),
        JumpChain(SERVICES, "nat-prerouting"),
        JumpChain(MASQUERADING, "nat-postrouting"),
        # Only ClusterIP traffic that was not DNATed is left to reject/drop.
        JumpChain(CLUSTER_IPS_CHECK, "filter-forward", new),
        JumpChain(CLUSTER_IPS_CHECK, output_post_dnat, new),
    )


def _base_chains(release: Release) -> tuple[BaseChain, ...]:
    return _BASE_CHAINS_1_34 if release.nft_pre_dnat_chains else _BASE_CHAINS_1_30


def _jumps(release: Release) -> tuple[JumpChain, ...]:
    if release.nft_pre_dnat_chains:
        return _jump_chains("filter-prerouting-pre-dnat", "filter-output-pre-dnat", "filter-output")
    return _jump_chains("filter-prerouting", "filter-output", "filter-output-post-dnat")


@dataclass(frozen=True)
class LocalhostNodePort:
    """One listener of 1.37's userspace proxy for localhost NodePorts (localnodeportproxy.NodePortSpec): TCP on
    127.0.0.1:node_port, each connection handed to one of `endpoints` ("IP:port", the Service's cluster endpoints,
    its local ones with externalTrafficPolicy Local), picked at random or, with ClientIP affinity, the one pinned
    for `affinity_timeout` seconds since it was last used."""

    service: str  # kube-proxy's ServicePortName, for reports
    node_port: int
    endpoints: tuple[str, ...]
    affinity_timeout: int = 0


@dataclass(frozen=True)
class NftRules:
    """The transaction of one fresh-node sync, one nft command per line, in kube-proxy's order, and the listeners of
    the localhost NodePort proxy that sync hands to it."""

    version: str
    commands: tuple[str, ...]
    localhost_nodeports: tuple[LocalhostNodePort, ...] = ()
    # Why the rules that mark for masquerade or choose an endpoint were written (because.py).
    because: tuple[Because, ...] = ()

    def script(self) -> str:
        """The exact `nft -f` input (knftables writes no trailing blank line)."""
        return "".join(f"{command}\n" for command in self.commands)


def check_nftables_version(version: str) -> str | None:
    """None when supported, else what to tell the user."""
    if version in NFTABLES_VERSIONS:
        return None
    return (
        f"kube-proxy {version}'s nftables mode is not reproduced (alpha in 1.29, beta in 1.31); "
        f"supported: {', '.join(NFTABLES_VERSIONS)}"
    )


def render_nftables(
    services: Sequence[ServicePort],
    config: ProxyConfig,
    node_ips: Sequence[str] = (),
    version: str = DEFAULT_VERSION,
) -> NftRules:
    """Render the first nftables sync of kube-proxy `version` ("1.30".."1.38") on a fresh node.

    node_ips are the node's own addresses; the first IPv4 one is the node IP kube-proxy was given
    (the primary IP that serves NodePorts by default, and that lets the node through
    loadBalancerSourceRanges). config.node_port_addresses picks other NodePort addresses.
    """
    if problem := check_nftables_version(version):
        raise ValueError(problem)
    release = Release.of(version)
    node = _Node.build(config, node_ips, release)
    tx = _Tx(family=TABLE_FAMILY[config.family])
    _write_setup(tx, node, release)
    # syncProxyRules' activeChains: per-service chains are added and flushed once per transaction.
    active: set[str] = set()
    listeners: list[LocalhostNodePort] = []
    for view in filter(None, (_ServiceView.build(port, release, config.family) for port in services)):
        plan = _Plan.build(view, release)
        _write_service(tx, node, release, plan, active)
        listeners += _localhost_listener(node, plan)
    return NftRules(
        version=version, commands=tuple(tx.commands), localhost_nodeports=tuple(listeners), because=tuple(tx.because)
    )


def _localhost_listener(node: _Node, plan: _Plan) -> list[LocalhostNodePort]:
    """The proxy's listener for a TCP NodePort (SyncNodePorts skips one without endpoints: nothing listens)."""
    port = plan.svc.port
    endpoints = plan.local if plan.svc.external_local else plan.cluster
    if not (node.localhost_proxy and port.node_port and port.protocol == "TCP" and endpoints):
        return []
    addresses = tuple(ep.address for ep in endpoints)
    return [LocalhostNodePort(port.port_name_string, port.node_port, addresses, port.affinity_timeout)]


# --- inputs ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Node(NodeBase):
    """What NewProxier and the flags fix for every sync."""

    nodeport_ips: tuple[str, ...] | None  # None: every local address ("fib daddr type local")
    localhost_proxy: bool  # 1.37's userspace proxy serves TCP localhost NodePorts
    localhost_rejects: tuple[str, ...]  # the protocols whose localhost NodePorts are rejected (gate on)

    @classmethod
    def build(cls, config: ProxyConfig, node_ips: Sequence[str], release: Release) -> _Node:
        base = NodeBase.build(config, node_ips)
        # The gate's localhost NodePorts are IPv4's (127.0.0.0/8): the IPv6 proxier serves none on ::1.
        wanted = config.nft_localhost_nodeports
        on = release.nft_localhost_nodeports_by_default if wanted is None else wanted
        gate = on and release.nft_localhost_nodeports_gate and config.family == "IPv4"
        # useLocalhostNodePortProxy: the gate, and a loopback CIDR named in nodePortAddresses itself.
        proxy = gate and base.explicit_loopback
        rejects = (_UNSERVED if proxy else _REJECTABLE) if gate else ()
        return cls(**base.facts(), nodeport_ips=_nodeport_ips(base), localhost_proxy=proxy, localhost_rejects=rejects)

    @property
    def detector(self) -> str | None:
        """The ClusterCIDR local-traffic detector's CIDR; None is the no-op detector."""
        cidr = self.config.cluster_cidr
        return cidr.strip() if cidr else None


def _nodeport_ips(base: NodeBase) -> tuple[str, ...] | None:
    """NodePortAddresses for IPv4: the node IPs that accept NodePorts, or None for all of them.

    nftables mode defaults to the primary node IP (#122724); an explicit list keeps the node's
    addresses inside its IPv4 CIDRs (keywords resolved: node.py), and a list without IPv4 CIDRs, or
    with 0.0.0.0/0, means all.
    Loopback addresses are skipped: nftables kube-proxy never serves localhost NodePorts.
    """
    if not base.config.node_port_addresses:
        chosen = [base.primary_ip] if base.primary_ip is not None else []
    elif base.node_ports_everywhere:
        return None
    else:
        chosen = base.node_port_addresses()
    return tuple(dict.fromkeys(str(ip) for ip in chosen if not ip.is_loopback))


class _ServiceView(ServiceView):
    """The nftables proxier's chain names, and its reading of eTP=Local."""

    @property
    def external_local(self) -> bool:
        # ExternalPolicyLocal is only ever true for a Service that can be reached from outside.
        return super().external_local and self.externally_accessible

    @property
    def chain_base(self) -> str:
        return service_chain_base(self.port.namespace, self.port.name, self.proto, self.port.port_name)

    def endpoint_base(self, ep: Endpoint) -> str:
        return endpoint_chain_base(self.port.namespace, self.port.name, self.proto, self.port.port_name, ep)


@dataclass(frozen=True)
class _Plan:
    """CategorizeEndpoints (pkg/proxy/topology.go) and the chain choices of syncProxyRules."""

    svc: _ServiceView
    cluster: tuple[Endpoint, ...]  # balanced over in service-*
    local: tuple[Endpoint, ...]  # balanced over in local-*
    reachable: tuple[Endpoint, ...]  # the ones with an endpoint-* chain
    has_endpoints: bool  # any usable endpoint on any node

    @classmethod
    def build(cls, svc: _ServiceView, release: Release) -> _Plan:
        chosen = categorize(svc, release)
        return cls(svc, chosen.cluster, chosen.local, chosen.reachable, chosen.has_endpoints)

    @property
    def uses_cluster_chain(self) -> bool:
        return bool(self.cluster)

    @property
    def uses_local_chain(self) -> bool:
        return bool(self.local)

    @property
    def has_internal_endpoints(self) -> bool:
        return self.has_endpoints and (bool(self.local) or not self.svc.internal_local)

    @property
    def has_external_endpoints(self) -> bool:
        return self.has_endpoints and (bool(self.local) or not self.svc.external_local)

    @property
    def uses_external_chain(self) -> bool:
        # Even without usable external endpoints: the chain short-circuits local traffic.
        return self.has_endpoints and self.svc.externally_accessible

    @property
    def uses_firewall_chain(self) -> bool:
        # Unlike iptables, written whether or not there are endpoints.
        return bool(self.svc.lb_ips) and bool(self.svc.source_ranges)

    @property
    def cluster_chain(self) -> str:
        return SERVICE_PREFIX + self.svc.chain_base

    @property
    def local_chain(self) -> str:
        return LOCAL_PREFIX + self.svc.chain_base

    @property
    def external_chain(self) -> str:
        return EXTERNAL_PREFIX + self.svc.chain_base

    @property
    def firewall_chain(self) -> str:
        return FIREWALL_PREFIX + self.svc.chain_base

    @property
    def internal_chain(self) -> str:
        return self.local_chain if self.svc.internal_local else self.cluster_chain

    @property
    def external_policy_chain(self) -> str:
        return self.local_chain if self.svc.external_local else self.cluster_chain

    def verdicts(self) -> tuple[str, str]:
        """(internal, external) verdicts for no-endpoint-* elements: reject when nothing serves
        the Service anywhere, drop when only this node's Local policy has nothing."""
        if not self.has_endpoints:
            reject = f"goto {REJECT_CHAIN}"
            return reject, reject
        return "drop", "drop"


# --- chain names (servicePortChainNameBase, servicePortEndpointChainNameBase) -----------------------


def service_chain_base(namespace: str, name: str, proto: str, port_name: str) -> str:
    """The base of service-/local-/external-/firewall- names, "HASH8-ns/svc/proto/port": readable,
    and unique thanks to the hash. Kubernetes names use only [a-z0-9-], so "/" can separate them."""
    return _hash_and_truncate(f"{namespace}/{name}/{proto.lower()}/{port_name}")


def endpoint_chain_base(namespace: str, name: str, proto: str, port_name: str, ep: Endpoint) -> str:
    """The base of endpoint-/affinity- names, "HASH8-ns/svc/proto/port__IP/port"; the ":" of an IPv6
    address (not allowed in a chain name) becomes "."."""
    ip = ep.ip.replace(":", ".")
    return _hash_and_truncate(f"{namespace}/{name}/{proto.lower()}/{port_name}__{ip}/{ep.port}")


def _hash_and_truncate(name: str) -> str:
    """hashAndTruncate: the first 8 base32 characters of sha256(name), then the name itself, cut to
    fit knftables' limit with "..." (the hash keeps cut names unique)."""
    full = f"{_hash8(name)}-{name}"
    return full if len(full) <= _NAME_BASE_MAX else full[: _NAME_BASE_MAX - 3] + "..."


def _hash8(text: str) -> str:
    return base64.b32encode(hashlib.sha256(text.encode()).digest()).decode()[:8]


# --- the transaction ---------------------------------------------------------------------------------


@dataclass
class _Tx:
    """A knftables Transaction: operations rendered the way knftables' writeOperation does."""

    commands: list[str] = field(default_factory=list)
    family: str = FAMILY  # the table's: "ip", or "ip6" for the IPv6 proxier
    because: list[Because] = field(default_factory=list)  # why its rules that mark or choose were written

    def why(self, kind: str, chain: str, says: tuple[str, ...], setting: Setting | None, choice: str = "") -> None:
        """The rule of `chain` just added does `kind` because of `setting`; `says`: how the kernel's trace shows it."""
        self.because.append(Because(kind, TABLE, chain, says, setting, choice))

    def _emit(self, verb: str, kind: str, rest: str) -> None:
        self.commands.append(f"{verb} {kind} {self.family} {TABLE}{rest}")

    def _words(self, text: str) -> str:
        """The rule or set type in the table's family's words (ipX, ipvX_addr)."""
        if self.family == FAMILY:
            return text
        return _IP_MATCH.sub(r"ip6 \1", text).replace("ipv4_addr", "ipv6_addr")

    def add_table(self, comment: str) -> None:
        self._emit("add", "table", f" {{ comment {_q(comment)} ; }}")

    def add_chain(self, name: str, comment: str | None = None) -> None:
        props = f" {{ comment {_q(comment)} ; }}" if comment else ""
        self._emit("add", "chain", f" {name}{props}")

    def add_base_chain(self, chain: BaseChain) -> None:
        props = f" {{ type {chain.type} hook {chain.hook} priority {chain.priority} ; }}"
        self._emit("add", "chain", f" {chain.name}{props}")

    def add_counter(self, name: str) -> None:
        self._emit("add", "counter", f" {name}")

    def flush(self, kind: str, name: str) -> None:
        self._emit("flush", kind, f" {name}")

    def delete(self, kind: str, name: str) -> None:
        self._emit("delete", kind, f" {name}")

    def add_rule(self, chain: str, *parts: str | Iterable[str], comment: str | None = None) -> None:
        rule = self._words(_concat(parts))
        self._emit("add", "rule", f" {chain} {rule}" + (f" comment {_q(comment)}" if comment else ""))

    def add_set(
        self, kind: str, name: str, type_: str, *, flags: str = "", timeout: int = 0, comment: str = ""
    ) -> None:
        props = [f"type {self._words(type_)} ;"]
        props += [f"flags {flags} ;"] if flags else []
        props += [f"timeout {timeout}s ;"] if timeout else []
        props += [f"comment {_q(comment)} ;"] if comment else []
        self._emit("add", kind, f" {name} {{ {' '.join(props)} }}")

    def add_element(self, name: str, key: Sequence[str], value: str = "", comment: str | None = None) -> None:
        text = " . ".join(key)
        text += f" comment {_q(comment)}" if comment else ""
        text += f" : {value}" if value else ""
        self._emit("add", "element", f" {name} {{ {text} }}")

    def ensure_chain(self, name: str, created: set[str]) -> None:
        """ensureChain: add the chain and flush it, once per transaction, so that leftovers of an
        earlier kube-proxy are gone but rules added earlier in this transaction are not."""
        if name in created:
            return
        created.add(name)
        self.add_chain(name)
        self.flush("chain", name)


def _write_setup(tx: _Tx, node: _Node, release: Release) -> None:
    """setupNFTables: the table, base chains, jumps and every fixed chain, set, map and rule."""
    tx.add_table("rules for kube-proxy")
    # Once per kube-proxy process: add+delete every base chain so that an old chain with other
    # properties (e.g. priority) is recreated instead of failing the transaction.
    for chain in _base_chains(release):
        tx.add_chain(chain.name)
        tx.delete("chain", chain.name)
    for chain in _base_chains(release):
        tx.add_base_chain(chain)
        tx.flush("chain", chain.name)
    setup_chains: set[str] = set()
    for jump in _jumps(release):
        tx.ensure_chain(jump.dst, setup_chains)
        tx.add_rule(jump.src, jump.match, "jump", jump.dst)
    top_level = (SERVICES, CLUSTER_IPS_CHECK, MASQUERADING)
    for name in top_level if release.nft_masquerade_rework else (*top_level, MARK_MASQ):
        tx.ensure_chain(name, setup_chains)
    _write_masquerading(tx, node, release)
    _write_cluster_ips_check(tx, node)
    _write_nodeport_ips(tx, node)
    _write_no_endpoint_handling(tx, node)
    _write_localhost_rejects(tx, node, setup_chains)
    tx.add_set("map", FIREWALL_IPS, _IP_PORT_PROTO, comment="destinations that are subject to LoadBalancerSourceRanges")
    tx.ensure_chain(FIREWALL_CHECK, setup_chains)  # already there: a no-op, as in kube-proxy
    tx.add_rule(FIREWALL_CHECK, "ip daddr . meta l4proto . th dport vmap", "@", FIREWALL_IPS)
    _write_dispatch(tx, node, release)
    # Every sync rebuilds the sets and maps from scratch (1.31+: only what changed, but on a fresh
    # node nothing can be read back, so everything is flushed and added).
    flushed = (
        (CLUSTER_IPS, SERVICE_IPS, FIREWALL_IPS, NO_ENDPOINT_SERVICES, NO_ENDPOINT_NODEPORTS, SERVICE_NODEPORTS)
        if release.nft_element_storage
        else (CLUSTER_IPS, FIREWALL_IPS, NO_ENDPOINT_SERVICES, NO_ENDPOINT_NODEPORTS, SERVICE_IPS, SERVICE_NODEPORTS)
    )
    flushed += (HAIRPIN,) if release.nft_masquerade_rework else ()
    for name in flushed + ((LOCALHOST_REJECTS,) if node.localhost_rejects else ()):
        tx.flush("set" if name in (CLUSTER_IPS, HAIRPIN) else "map", name)


def _write_masquerading(tx: _Tx, node: _Node, release: Release) -> None:
    """Mark in PREROUTING/OUTPUT, masquerade in POSTROUTING; the mark is cleared first so that a
    packet re-entering the stack (e.g. after VXLAN encapsulation) is not masqueraded twice. From
    1.36 a hairpin connection (a local endpoint reaching itself through the Service) is recognised
    in POSTROUTING by the hairpin-connections set instead of being marked in its endpoint chain."""
    if release.nft_masquerade_rework:
        hairpin_type = "ipv4_addr . ipv4_addr . inet_proto . inet_service"
        tx.add_set("set", HAIRPIN, hairpin_type, comment="service hairpin connections")
        marked = ("mark and", node.mark, "!= 0 mark set mark xor", node.mark, "masquerade fully-random")
        tx.add_rule(MASQUERADING, *marked)
        hairpin = ("ct status dnat ip saddr . ip daddr . meta l4proto . th dport", "@", HAIRPIN)
        tx.add_rule(MASQUERADING, *hairpin, "masquerade fully-random")
        tx.why(MARK, MASQUERADING, (f"@{HAIRPIN}",), hairpin_masquerade(None))
        return
    tx.add_rule(MARK_MASQ, "mark set mark or", node.mark)
    tx.add_rule(MASQUERADING, "mark and", node.mark, "== 0 return")
    tx.add_rule(MASQUERADING, "mark set mark xor", node.mark)
    tx.add_rule(MASQUERADING, "masquerade fully-random")


def _write_cluster_ips_check(tx: _Tx, node: _Node) -> None:
    """Traffic to a ClusterIP that no service-ips element caught (wrong port) is rejected; traffic
    to an unallocated address of a known ServiceCIDR is dropped."""
    tx.add_set("set", CLUSTER_IPS, "ipv4_addr", comment="Active ClusterIPs")
    reject = "Reject traffic to invalid ports of ClusterIPs"
    tx.add_rule(CLUSTER_IPS_CHECK, "ip daddr", "@", CLUSTER_IPS, "reject", comment=reject)
    # Each family's proxier drops to its own family's ServiceCIDRs.
    cidrs = [str(cidr) for cidr in node.config.service_cidrs if (":" in cidr) == (node.config.family == "IPv6")]
    if cidrs:
        drop = ("ip daddr {", ",".join(cidrs), "} drop")
        tx.add_rule(CLUSTER_IPS_CHECK, *drop, comment="Drop traffic to unallocated ClusterIPs")


def _write_nodeport_ips(tx: _Tx, node: _Node) -> None:
    """nodeport-ips exists only when NodePorts are limited to some addresses; add+delete makes
    sure it is gone otherwise (a bare delete fails when the set does not exist)."""
    tx.add_set("set", NODEPORT_IPS, "ipv4_addr", comment="IPs that accept NodePort traffic")
    if node.nodeport_ips is None:
        tx.delete("set", NODEPORT_IPS)
        return
    tx.flush("set", NODEPORT_IPS)
    for ip in node.nodeport_ips:
        tx.add_element(NODEPORT_IPS, [ip])


def _write_no_endpoint_handling(tx: _Tx, node: _Node) -> None:
    """Services without (usable) endpoints: checked in the filter hooks, after the nat hooks had
    their chance, through verdict maps filled per Service."""
    comment = "vmap to drop or reject packets to services with no endpoints"
    tx.add_set("map", NO_ENDPOINT_SERVICES, _IP_PORT_PROTO, comment=comment)
    comment = "vmap to drop or reject packets to service nodeports with no endpoints"
    tx.add_set("map", NO_ENDPOINT_NODEPORTS, _PORT_PROTO, comment=comment)
    tx.add_chain(REJECT_CHAIN, "helper for @no-endpoint-services / @no-endpoint-nodeports")
    tx.flush("chain", REJECT_CHAIN)
    tx.add_rule(REJECT_CHAIN, "reject")
    tx.add_rule(SERVICE_ENDPOINTS_CHECK, "ip daddr . meta l4proto . th dport vmap", "@", NO_ENDPOINT_SERVICES)
    lookup = ("meta l4proto . th dport vmap", "@", NO_ENDPOINT_NODEPORTS)
    tx.add_rule(NODEPORT_ENDPOINTS_CHECK, _nodeport_match(node), *lookup)


def _write_localhost_rejects(tx: _Tx, node: _Node, created: set[str]) -> None:
    """1.37's gate on: localhost NodePorts of the rejected protocols are counted and rejected in the filter input
    hook (they were never DNATed: no rule catches 127/8)."""
    if not node.localhost_rejects:
        return
    tx.add_set("map", LOCALHOST_REJECTS, _PORT_PROTO, comment="localhost NodePorts rejected by kube-proxy")
    for proto in node.localhost_rejects:
        counter = f"localhost-nodeport-rejected-{proto}"  # metrics.LocalhostNodePortRejectedCounterName
        tx.add_counter(counter)
        tx.ensure_chain(_localhost_reject_chain(proto), created)
        tx.add_rule(_localhost_reject_chain(proto), "counter name", _q(counter), "reject")
    tx.add_rule(NODEPORT_ENDPOINTS_CHECK, _LOCALHOST, "meta l4proto . th dport vmap", "@", LOCALHOST_REJECTS)


def _nodeport_match(node: _Node, *, local: bool = False) -> str:
    """Which destinations are NodePort addresses: the nodeport-ips set, or (all addresses) any
    local address but 127/8, which nftables kube-proxy never serves."""
    if node.nodeport_ips is not None:
        return f"ip daddr @{NODEPORT_IPS}"
    no_localhost = _NO_LOCALHOST if node.config.family == "IPv4" else _NO_LOCALHOST_V6
    return f"fib daddr type local {no_localhost}" if local else no_localhost


def _write_dispatch(tx: _Tx, node: _Node, release: Release) -> None:
    """The services chain: one vmap lookup for service IPs, one for NodePorts; from 1.36 the
    ClusterIP masquerade rule for every Service before them."""
    tx.add_set("map", SERVICE_IPS, _IP_PORT_PROTO, comment="ClusterIP, ExternalIP and LoadBalancer IP traffic")
    tx.add_set("map", SERVICE_NODEPORTS, _PORT_PROTO, comment="NodePort traffic")
    if release.nft_masquerade_rework:
        cluster_ips = ("ip daddr", "@", CLUSTER_IPS)
        if node.config.masquerade_all:
            tx.add_rule(SERVICES, *cluster_ips, _mark(node, release), comment="masquerade all clusterIP traffic")
            tx.why(MARK, SERVICES, _MARK_SAYS[True], masquerade_all())
        elif node.detector:
            comment = "masquerade clusterIP traffic from outside cluster"
            tx.add_rule(SERVICES, *cluster_ips, "ip saddr !=", node.detector, _mark(node, release), comment=comment)
            tx.why(MARK, SERVICES, _MARK_SAYS[True], local_detector(node.detector))
    tx.add_rule(SERVICES, "ip daddr . meta l4proto . th dport vmap", "@", SERVICE_IPS)
    tx.add_rule(SERVICES, _nodeport_match(node, local=True), "meta l4proto . th dport vmap", "@", SERVICE_NODEPORTS)


# --- one Service port ------------------------------------------------------------------------------


def _write_service(tx: _Tx, node: _Node, release: Release, plan: _Plan, created: set[str]) -> None:
    """One iteration of syncProxyRules' service loop, in its order."""
    svc = plan.svc
    for ep in plan.reachable:
        if _has_endpoint_chain(release, plan):
            tx.ensure_chain(ENDPOINT_PREFIX + svc.endpoint_base(ep), created)
        if release.nft_masquerade_rework and ep.is_local:
            tx.add_element(HAIRPIN, [ep.ip, ep.ip, svc.proto, str(ep.port)])
    if plan.uses_cluster_chain:
        tx.ensure_chain(plan.cluster_chain, created)
    if plan.uses_local_chain:
        tx.ensure_chain(plan.local_chain, created)
    if plan.uses_external_chain:
        tx.ensure_chain(plan.external_chain, created)
    _write_service_elements(tx, node, release, plan, created)
    if plan.has_internal_endpoints and not release.nft_masquerade_rework:
        _write_internal_masquerade(tx, node, release, plan)
    if plan.uses_external_chain:
        _write_external_chain(tx, node, release, plan)
    if plan.uses_firewall_chain and release.nft_element_storage:
        _write_firewall_rule(tx, node, plan)
    if svc.port.affinity_timeout:
        _write_affinity_sets(tx, plan)
    if plan.uses_cluster_chain:
        _write_balancing(tx, release, plan, plan.cluster_chain, plan.cluster)
    if plan.uses_local_chain:
        _write_balancing(tx, release, plan, plan.local_chain, plan.local)
    if _has_endpoint_chain(release, plan):
        for ep in plan.reachable:
            _write_endpoint_chain(tx, release, plan, ep)


def _has_endpoint_chain(release: Release, plan: _Plan) -> bool:
    """Every used endpoint has an endpoint-* chain until 1.36; from then only with ClientIP affinity,
    which needs one to remember the client in."""
    return not release.nft_masquerade_rework or bool(plan.svc.port.affinity_timeout)


# How the kernel's trace shows a rule that marks for masquerade: inlined from 1.36 (True), a jump before.
_MARK_SAYS = {True: ("meta mark set meta mark |",), False: (f"jump {MARK_MASQ}",)}


def _mark(node: _Node, release: Release) -> str:
    """Mark a packet for masquerading: a jump to mark-for-masquerade, inlined from 1.36."""
    return f"mark set mark or {node.mark}" if release.nft_masquerade_rework else f"jump {MARK_MASQ}"


def _key(ip: str, plan: _Plan) -> list[str]:
    return [ip, plan.svc.proto, str(plan.svc.port.port)]


def _write_service_elements(tx: _Tx, node: _Node, release: Release, plan: _Plan, created: set[str]) -> None:
    """Where the Service's addresses are caught (service-ips, service-nodeports, firewall-ips) and
    what happens when nothing can serve them (no-endpoint-services, no-endpoint-nodeports)."""
    svc, name = plan.svc, _comment(plan.svc.name, release)
    internal_verdict, external_verdict = plan.verdicts()
    tx.add_element(CLUSTER_IPS, [svc.cluster_ip])
    if plan.has_internal_endpoints:
        tx.add_element(SERVICE_IPS, _key(svc.cluster_ip, plan), f"goto {plan.internal_chain}")
    else:
        tx.add_element(NO_ENDPOINT_SERVICES, _key(svc.cluster_ip, plan), internal_verdict, name)

    for ip in svc.external_ips:
        if plan.has_endpoints:
            tx.add_element(SERVICE_IPS, _key(ip, plan), f"goto {plan.external_chain}")
        if not plan.has_external_endpoints:
            # Reject (nothing anywhere) or drop what the external chain did not short-circuit.
            tx.add_element(NO_ENDPOINT_SERVICES, _key(ip, plan), external_verdict, name)

    if plan.uses_firewall_chain:
        tx.ensure_chain(plan.firewall_chain, created)
        if not release.nft_element_storage:
            _write_firewall_rule(tx, node, plan)
    for ip in svc.lb_ips:
        if plan.has_endpoints:
            tx.add_element(SERVICE_IPS, _key(ip, plan), f"goto {plan.external_chain}")
        if plan.uses_firewall_chain:
            fw_comment = None if release.nft_element_storage else name
            tx.add_element(FIREWALL_IPS, _key(ip, plan), f"goto {plan.firewall_chain}", fw_comment)
    if not plan.has_external_endpoints:
        for ip in svc.lb_ips:
            tx.add_element(NO_ENDPOINT_SERVICES, _key(ip, plan), external_verdict, name)

    if node_port := svc.port.node_port:
        if svc.proto in node.localhost_rejects:
            goto = f"goto {_localhost_reject_chain(svc.proto)}"
            tx.add_element(LOCALHOST_REJECTS, [svc.proto, str(node_port)], goto)
        # NodePorts are not subject to loadBalancerSourceRanges.
        if plan.has_endpoints:
            tx.add_element(SERVICE_NODEPORTS, [svc.proto, str(node_port)], f"goto {plan.external_chain}")
        if not plan.has_external_endpoints:
            tx.add_element(NO_ENDPOINT_NODEPORTS, [svc.proto, str(node_port)], external_verdict, name)


def _comment(text: str, release: Release) -> str:
    """A comment as the release writes it: whole up to 1.36, whose nft then refuses one over 128 bytes."""
    limit = release.nft_comment_limit
    return text if limit is None else text.encode()[:limit].decode(errors="ignore")


def _write_internal_masquerade(tx: _Tx, node: _Node, release: Release, plan: _Plan) -> None:
    """Masquerade ClusterIP traffic from outside the pod network (the Service range may be routed
    to any node, whose reply must come back through it); everything with --masquerade-all; nothing
    without a local-traffic detector. Up to 1.35, in each Service's own chain."""
    svc = plan.svc
    port = (svc.proto, "dport", str(svc.port.port)) if release.nft_masquerade_matches_port else ()
    says = _MARK_SAYS[release.nft_masquerade_rework]
    if node.config.masquerade_all:
        tx.add_rule(plan.internal_chain, "ip daddr", svc.cluster_ip, port, _mark(node, release))
        tx.why(MARK, plan.internal_chain, says, masquerade_all())
    elif node.detector:
        not_local = ("ip saddr !=", node.detector)
        tx.add_rule(plan.internal_chain, "ip daddr", svc.cluster_ip, port, not_local, _mark(node, release))
        tx.why(MARK, plan.internal_chain, says, local_detector(node.detector))


def _write_external_chain(tx: _Tx, node: _Node, release: Release, plan: _Plan) -> None:
    """external-*: every NodePort, externalIP and LoadBalancer packet goes through here."""
    chain, says = plan.external_chain, _MARK_SAYS[release.nft_masquerade_rework]
    if not plan.svc.external_local:
        # Cluster policy may send the packet to another node: masquerade so the reply returns.
        tx.add_rule(chain, _mark(node, release), comment="masquerade" if release.nft_masquerade_rework else None)
        tx.why(MARK, chain, says, external_policy(plan.svc.name, "Cluster"))
    else:
        if node.detector:
            # Pods reaching an external address behave as if they went out to the LB and came
            # back: any endpoint, source kept. Needs the local-traffic detector.
            pods = ("ip saddr", node.detector)
            tx.add_rule(chain, pods, "goto", plan.cluster_chain, comment="short-circuit pod traffic")
        # The node itself picks a local address (often the LB IP) as source, which must be
        # masqueraded, and it may use any endpoint.
        tx.add_rule(chain, "fib saddr type local", _mark(node, release), comment="masquerade local traffic")
        tx.why(MARK, chain, ("fib saddr type local", *says), external_policy(plan.svc.name, "Local"))
        tx.add_rule(chain, "fib saddr type local goto", plan.cluster_chain, comment="short-circuit local traffic")
    if plan.has_external_endpoints:
        tx.add_rule(chain, "goto", plan.external_policy_chain)


def _write_firewall_rule(tx: _Tx, node: _Node, plan: _Plan) -> None:
    """firewall-*: loadBalancerSourceRanges. A node reaching its own VIP-style LB loops back with
    the LB IP as source, so when the node IP is allowed the LB IPs are too."""
    sources = [str(cidr) for cidr in plan.svc.source_cidrs]
    if node.primary_in(plan.svc.source_cidrs):
        sources += plan.svc.lb_ips
    tx.add_rule(plan.firewall_chain, "ip saddr != {", " , ".join(sources), "} drop")


def _write_affinity_sets(tx: _Tx, plan: _Plan) -> None:
    """ClientIP affinity: one set of recent client addresses per endpoint. "dynamic" because the
    kernel adds it anyway and a later add with other flags would fail."""
    for ep in plan.reachable:
        name = AFFINITY_PREFIX + plan.svc.endpoint_base(ep)
        tx.add_set("set", name, "ipv4_addr", flags="dynamic,timeout", timeout=plan.svc.port.affinity_timeout)


def _write_balancing(tx: _Tx, release: Release, plan: _Plan, chain: str, endpoints: Sequence[Endpoint]) -> None:
    """service-* / local-*: affinity hits first, then one random pick among the endpoints' chains;
    from 1.36, without affinity, a DNAT straight to the endpoint the random pick maps to (1.37: to
    the only endpoint, without a map)."""
    svc = plan.svc
    local = chain == plan.local_chain
    chosen_from = local_policy(svc.name, chain == plan.internal_chain) if local else hinted(svc, release)
    if not _has_endpoint_chain(release, plan):
        if len(endpoints) == 1 and release.nft_single_endpoint_dnat:
            tx.add_rule(chain, "meta l4proto", svc.proto, "dnat to", endpoints[0].address)
            tx.why(CHOICE, chain, ("dnat to",), chosen_from, at_random(1))
            return
        picks = " , ".join(f"{i} : {ep.ip} . {ep.port}" for i, ep in enumerate(endpoints))
        dnat = ("meta l4proto", svc.proto, "dnat ip addr . port to")
        tx.add_rule(chain, *dnat, f"numgen random mod {len(endpoints)} map {{", picks, "}")
        tx.why(CHOICE, chain, ("numgen random",), chosen_from, at_random(len(endpoints)))
        return
    if svc.port.affinity_timeout:
        affinity = session_affinity(svc.name, svc.port.affinity_timeout)
        for ep in endpoints:
            base = svc.endpoint_base(ep)
            tx.add_rule(chain, "ip saddr", "@", AFFINITY_PREFIX + base, "goto", ENDPOINT_PREFIX + base)
            tx.why(CHOICE, chain, (f"@{AFFINITY_PREFIX}{base}",), affinity, "by the client's affinity")
    picks = " , ".join(f"{i} : goto {ENDPOINT_PREFIX}{svc.endpoint_base(ep)}" for i, ep in enumerate(endpoints))
    tx.add_rule(chain, f"numgen random mod {len(endpoints)} vmap {{", picks, "}")
    tx.why(CHOICE, chain, ("numgen random",), chosen_from, at_random(len(endpoints)))


def _write_endpoint_chain(tx: _Tx, release: Release, plan: _Plan, ep: Endpoint) -> None:
    """endpoint-*: masquerade hairpin traffic (a pod reaching itself; from 1.36 the hairpin set's
    job), remember affinity, DNAT."""
    base = plan.svc.endpoint_base(ep)
    chain = ENDPOINT_PREFIX + base
    if not release.nft_masquerade_rework:
        tx.add_rule(chain, "ip saddr", ep.ip, "jump", MARK_MASQ)
        tx.why(MARK, chain, (f"jump {MARK_MASQ}",), hairpin_masquerade(plan.svc.name))
    if plan.svc.port.affinity_timeout:
        tx.add_rule(chain, "update", "@", AFFINITY_PREFIX + base, "{ ip saddr }")
    tx.add_rule(chain, "meta l4proto", plan.svc.proto, "dnat to", ep.address)


# --- helpers -----------------------------------------------------------------------------------------


def _concat(parts: Iterable[str | Iterable[str]]) -> str:
    """knftables.Concat: words joined by single spaces, nothing after "@", empty words dropped."""
    words: list[str] = []
    for part in parts:
        words += [part] if isinstance(part, str) else list(part)
    out = ""
    for word in words:
        if not word:
            continue
        out += word if not out or out.endswith("@") else " " + word
    return out


def _q(text: str) -> str:
    """Go's %q for the plain ASCII comments kube-proxy writes."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
