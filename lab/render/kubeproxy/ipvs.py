"""kube-proxy's ipvs mode (Kubernetes 1.19 to 1.38) as a pure function.

`render_ipvs()` reproduces a full syncProxyRules() of pkg/proxy/ipvs/proxier.go: the addresses bound
on kube-ipvs0, the ipsets and their entries, the iptables rules written around the sets, the IPVS
virtual and real servers, and the sysctls NewProxier sets. Sources, all read for this module:

- openshift/sdn vendor/k8s.io/kubernetes/pkg/proxy/ipvs/{proxier.go,ipset.go} (and ipset/ipset.go,
  util/ipset/ipset.go before 1.28) at
  S1.18 0074a5aed70a01ac17c8378c1f59e87656a2b585 (1.18.6), S1.20 64fa36f66f2b314c0c770b641c3b681fe4425354
  (1.20.0-rc.0), S1.21 c4cad7601bc82b4c4008e308ba1fe2c2d8e8e3ba, S1.22 13c5e88318dcc04025d72801bae824ebe3a023ed,
  S1.23 f975443204687593ba365b0693780a8ab5e22cd8, S1.24 b5350c6ed8d2c18d07b580ea40c69446bbc02c07,
  S1.25 d6625537987ad282d392d2d33e2f2185dfb3fd51, S1.26 caa7f35b07372e606862dddf578efd85d9c7b513,
  S1.27 b9b36390392871e34e0531df361e95545db7a967, S1.28 612c2bb6603f7519a0ef74c781534dc32184a13a,
  S1.29 a2631315346a0fda2b4975eb9e33211136cdc574, S1.30 70cefcddca885822c5e7214eaf9f0da33eccb26b (1.30.3);
- kubernetes/kubernetes pkg/proxy/ipvs/proxier.go of the 1.31+ era (contextual logging, nodeName;
  commit not recorded; the version whose NewProxier takes a context and nodeName): sync logic, sets, chains and rules
  identical to S1.30, so 1.31-1.35 render as 1.30. kube-proxy's own tests at
  531be81208e2274ef42e72525a26610a9622bcdf (tests/unit/test_ipvs_render.py) agree, their IPv6 ones
  (TestNodePortIPv6, TestIPv6Proxier, TestDismissLocalhostRuleExist's "ipv6 rule") included.
- 1.36-1.37 render as 1.35 too (INFERRED): their changelogs name no ipvs rule change, only when it syncs
  (#135631 periodic full resync again, 1.36; #138571 no full resync above 1000 endpoints, 1.37), how fast it
  lists addresses (#138927, 1.37) and the KubeProxyIPVS gate that starts the mode's deprecation (#139397,
  KEP-5495, 1.37; on by default, so the mode still runs). 1.38 too (INFERRED): CHANGELOG-1.38.md, read up to
  v1.38.0-alpha.2 (kubernetes/kubernetes@0411cc704533ed25a1bfc6e21a3195d9c6a2f0f2), names no ipvs change.
- 1.19 has no vendored copy: S1.18 and S1.20 have identical writeIptablesRules, syncEndpoint and
  acceptIPVSTraffic (diffed), so 1.19 renders as 1.20 (inferred, not read).

Version differences (minor version m), each from the diff of consecutive S-commits (each a property of
versions.Release):
- m <= 20: route_localnet=1 is set (NewProxier; gone in S1.21).
- m <= 21: the NodePort virtual servers include loopback addresses such as 127.0.0.1 (S1.22
  skips loopback, #101023).
- m <= 24: LoadBalancer source ranges are checked in nat KUBE-FIREWALL, which ends in
  "-j KUBE-MARK-DROP" (kubelet's chain); m >= 25 in filter KUBE-PROXY-FIREWALL /
  KUBE-SOURCE-RANGES-FIREWALL ending in "-j DROP".
- m >= 21: KUBE-HEALTH-CHECK-NODE-PORT set, filter KUBE-NODE-PORT chain and its INPUT jump.
- m <= 22: two "kubernetes forwarding conntrack pod source/destination rule"s; one
  "kubernetes forwarding conntrack rule" from 1.23.
- m <= 22: the SCTP NodePort masquerade rule precedes the SCTP "-LOCAL" RETURN; 1.23 swaps them.
- m >= 26: "-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN", KUBE-IPVS-IPS and KUBE-IPVS-FILTER
  (+ KUBE-HEALTH-CHECK-NODE-PORT RETURN from 1.28, + KUBE-EXTERNAL-IP-LOCAL RETURN in S1.30 only).
- m >= 28: externalIPs and LoadBalancer IPs already on another interface are not bound.
- m >= 29: KUBE-IPVS-OUT-FILTER drops node-originated traffic to LB IPs whose source ranges
  exclude the node IP (-m ipvs).
- Real servers: m <= 21 ready endpoints (eTP=Local: local ready ones, possibly none);
  22-23 also internalTrafficPolicy=Local (whole service filtered to local endpoints unless
  eTP=Local); m >= 24 CategorizeEndpoints: Local policy uses local endpoints, or all
  cluster endpoints when there are none (#97081); serving+terminating fallback from 1.26
  (ProxyTerminatingEndpoints beta).

On purpose, this differs from a live kube-proxy in ways the kernel does not see:
- Services, addresses and endpoints come out in the caller's order, real servers sorted by
  "IP:port"; kube-proxy walks Go maps and sets.
- It renders the steady state of a full sync: no stale entries to delete, no graceful
  termination (terminating real servers at weight 0; the install stage does it). The sockets kube-proxy up to 1.23
  held on NodePorts and externalIPs are ports.py's.
- One proxier, of config.family: the other family's addresses are ignored, as each of kube-proxy's proxiers
  ignores them. A dual-stack node runs both on one IPVS table and one kube-ipvs0 (NewDualStackProxier): each
  proxier's sets, rules and virtual servers are its own, and each deletes only its own family's virtual servers
  and kube-ipvs0 addresses (lab/render/kubeproxy/sync.py).
- No "mh" source-hash scheduler flags. Topology-aware routing picks the real servers as in every mode
  (endpoints.py).
- 1.20 on a fresh node wrote every nat chain declaration as ":KUBE-POSTROUTING" and the filter one as
  ":KUBE-FORWARD" (createAndLinkeKubeChain used the wrong variable until 1.21); harmless because
  EnsureChain had created the chains, and not reproduced here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from lab.render.kubeproxy import xtables
from lab.render.kubeproxy.addresses import Family, host_port
from lab.render.kubeproxy.because import (
    CHOICE,
    MARK,
    Because,
    Setting,
    external_policy,
    hairpin_masquerade,
    local_detector,
    masquerade_all,
)
from lab.render.kubeproxy.endpoints import categorize
from lab.render.kubeproxy.node import NodeBase
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort
from lab.render.kubeproxy.versions import Release
from lab.render.kubeproxy.view import ServiceView, unique
from lab.render.kubeproxy.xtables import KUBE_FIREWALL, KUBE_FORWARD, KUBE_MARK_DROP, KUBE_MARK_MASQ, KUBE_POSTROUTING

IPVS_VERSIONS = tuple(f"1.{minor}" for minor in range(19, 39))
DEFAULT_VERSION = "1.31"

DUMMY_DEVICE = "kube-ipvs0"

# Chains (pkg/proxy/ipvs/proxier.go).
KUBE_SERVICES = "KUBE-SERVICES"
KUBE_NODE_PORT = "KUBE-NODE-PORT"
KUBE_LOAD_BALANCER = "KUBE-LOAD-BALANCER"
KUBE_PROXY_FIREWALL = "KUBE-PROXY-FIREWALL"
KUBE_SOURCE_RANGES_FIREWALL = "KUBE-SOURCE-RANGES-FIREWALL"
KUBE_IPVS_FILTER = "KUBE-IPVS-FILTER"
KUBE_IPVS_OUT_FILTER = "KUBE-IPVS-OUT-FILTER"

# ipsets (pkg/proxy/ipvs/ipset.go): name -> (type, comment). The comment only appears in the
# iptables rules that match the set; kube-proxy does not pass it to "ipset create".
LOOP_BACK = "KUBE-LOOP-BACK"
CLUSTER_IP = "KUBE-CLUSTER-IP"
EXTERNAL_IP = "KUBE-EXTERNAL-IP"
EXTERNAL_IP_LOCAL = "KUBE-EXTERNAL-IP-LOCAL"
LOAD_BALANCER = "KUBE-LOAD-BALANCER"
LOAD_BALANCER_FW = "KUBE-LOAD-BALANCER-FW"
LOAD_BALANCER_LOCAL = "KUBE-LOAD-BALANCER-LOCAL"
LOAD_BALANCER_SOURCE_IP = "KUBE-LOAD-BALANCER-SOURCE-IP"
LOAD_BALANCER_SOURCE_CIDR = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
NODE_PORT_TCP = "KUBE-NODE-PORT-TCP"
NODE_PORT_LOCAL_TCP = "KUBE-NODE-PORT-LOCAL-TCP"
NODE_PORT_UDP = "KUBE-NODE-PORT-UDP"
NODE_PORT_LOCAL_UDP = "KUBE-NODE-PORT-LOCAL-UDP"
NODE_PORT_SCTP = "KUBE-NODE-PORT-SCTP-HASH"
NODE_PORT_LOCAL_SCTP = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
HEALTH_CHECK_NODE_PORT = "KUBE-HEALTH-CHECK-NODE-PORT"
IPVS_IPS = "KUBE-IPVS-IPS"

HASH_IP = "hash:ip"
HASH_IP_PORT = "hash:ip,port"
HASH_IP_PORT_IP = "hash:ip,port,ip"
HASH_IP_PORT_NET = "hash:ip,port,net"
BITMAP_PORT = "bitmap:port"

# ipsetInfo, in kube-proxy's order.
IPSET_INFO: dict[str, tuple[str, str]] = {
    LOOP_BACK: (HASH_IP_PORT_IP, "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"),
    CLUSTER_IP: (HASH_IP_PORT, "Kubernetes service cluster ip + port for masquerade purpose"),
    EXTERNAL_IP: (HASH_IP_PORT, "Kubernetes service external ip + port for masquerade and filter purpose"),
    EXTERNAL_IP_LOCAL: (HASH_IP_PORT, "Kubernetes service external ip + port with externalTrafficPolicy=local"),
    LOAD_BALANCER: (HASH_IP_PORT, "Kubernetes service lb portal"),
    LOAD_BALANCER_FW: (HASH_IP_PORT, "Kubernetes service load balancer ip + port for load balancer with sourceRange"),
    LOAD_BALANCER_LOCAL: (
        HASH_IP_PORT,
        "Kubernetes service load balancer ip + port with externalTrafficPolicy=local",
    ),
    LOAD_BALANCER_SOURCE_IP: (
        HASH_IP_PORT_IP,
        "Kubernetes service load balancer ip + port + source IP for packet filter purpose",
    ),
    LOAD_BALANCER_SOURCE_CIDR: (
        HASH_IP_PORT_NET,
        "Kubernetes service load balancer ip + port + source cidr for packet filter purpose",
    ),
    NODE_PORT_TCP: (BITMAP_PORT, "Kubernetes nodeport TCP port for masquerade purpose"),
    NODE_PORT_LOCAL_TCP: (BITMAP_PORT, "Kubernetes nodeport TCP port with externalTrafficPolicy=local"),
    NODE_PORT_UDP: (BITMAP_PORT, "Kubernetes nodeport UDP port for masquerade purpose"),
    NODE_PORT_LOCAL_UDP: (BITMAP_PORT, "Kubernetes nodeport UDP port with externalTrafficPolicy=local"),
    NODE_PORT_SCTP: (HASH_IP_PORT, "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"),
    NODE_PORT_LOCAL_SCTP: (
        HASH_IP_PORT,
        "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'",
    ),
    HEALTH_CHECK_NODE_PORT: (BITMAP_PORT, "Kubernetes health check node port"),
    IPVS_IPS: (HASH_IP, "Addresses on the ipvs interface"),
}

_NODE_PORT_SETS = {"tcp": NODE_PORT_TCP, "udp": NODE_PORT_UDP, "sctp": NODE_PORT_SCTP}
_NODE_PORT_LOCAL_SETS = {"tcp": NODE_PORT_LOCAL_TCP, "udp": NODE_PORT_LOCAL_UDP, "sctp": NODE_PORT_LOCAL_SCTP}
_IPVSADM_PROTOCOL = {"TCP": "-t", "UDP": "-u", "SCTP": "--sctp-service"}
# writeIptablesRules' "Dismiss connects to localhost early" source, per proxier family (S1.26 to S1.30 proxier.go
# loAddr; kube-proxy's TestDismissLocalhostRuleExist "ipv6 rule" at 531be81208e2274ef42e72525a26610a9622bcdf).
_LOOPBACK = {"IPv4": "127.0.0.0/8", "IPv6": "::1/128"}
_SET_FAMILY = {"IPv4": "inet", "IPv6": "inet6"}  # ipset's family of the proxier's hash sets
_SET_NAME_MAX = 31  # ipset's longest set name


def set_name(name: str, family: Family) -> str:
    """The name the proxier of `family` gives one of ipsetInfo's sets: the IPv6 proxier's "KUBE-" becomes "KUBE-6-"
    (so both families' sets coexist on a dual-stack node), cut to ipset's 31 characters (KUBE-LOAD-BALANCER-
    SOURCE-CIDR becomes KUBE-6-LOAD-BALANCER-SOURCE-CID); the IPv4 names stay as they were. NewIPSet in
    openshift/sdn vendor/k8s.io/kubernetes/pkg/proxy/ipvs/ipset.go at 64fa36f66f2b314c0c770b641c3b681fe4425354
    (1.20) and 70cefcddca885822c5e7214eaf9f0da33eccb26b (1.30), called with isIPv6 from NewProxier's ipFamily."""
    if family == "IPv4":
        return name
    return name.replace("KUBE-", "KUBE-6-", 1)[:_SET_NAME_MAX]


def ipvsadm_flag(protocol: str) -> str:
    """ipvsadm's option naming a virtual server of this protocol ("TCP" → "-t")."""
    return _IPVSADM_PROTOCOL[protocol]


def sync_lines(old: IpvsRules, new: IpvsRules) -> list[str]:
    """What kube-proxy's sync changes in IPVS going from `old` to `new`, as ipvsadm-restore lines: it diffs, so
    an unchanged real server keeps its connections. A real server that leaves is deleted at once for UDP and
    SCTP, whose connections die on their next packet (expire_nodest_conn=1); a TCP one is kept at weight 0
    while it has connections, the graceful termination of pkg/proxy/ipvs/graceful_termination.go (its check
    that deletes it once they are gone runs at each later sync here, every minute in kube-proxy). Virtual
    servers that leave are deleted with their real servers."""
    before = {vs.service_address: vs for vs in old.virtual_servers}
    after = {vs.service_address: vs for vs in new.virtual_servers}
    lines = [f"-D {address}" for address in before if address not in after]
    for address, vs in after.items():
        if address not in before:
            lines += vs.ipvsadm_lines()
            continue
        had = {rs.text for rs in before[address].real_servers}
        has = {rs.text for rs in vs.real_servers}
        for rs in before[address].real_servers:
            if rs.text in has:
                continue
            if vs.protocol == "TCP":
                lines.append(f"-e {address} -r {rs.text} -m -w 0")
            else:
                lines.append(f"-d {address} -r {rs.text}")
        lines += [f"-a {address} -r {rs.text} -m -w {rs.weight}" for rs in vs.real_servers if rs.text not in had]
    return lines


def check_ipvs_version(version: str) -> str | None:
    """None when the version is reproduced, else what to tell the user."""
    if version in IPVS_VERSIONS:
        return None
    return f"kube-proxy ipvs mode {version} is not reproduced; supported: {', '.join(IPVS_VERSIONS)}"


@dataclass(frozen=True)
class IpSet:
    """One ipset as kube-proxy creates it, with its entries in Entry.String() form."""

    name: str  # as the proxier names it (set_name): KUBE-6-... for the IPv6 proxier's
    set_type: str
    comment: str
    entries: tuple[str, ...] = ()
    family: str = "inet"  # the proxier's: inet, or inet6 for the IPv6 proxier's sets

    def create_line(self) -> str:
        """createSet(): hash types get family/hashsize/maxelem defaults, bitmap:port the full range."""
        if self.set_type == BITMAP_PORT:
            return f"create {self.name} {self.set_type} range 0-65535"
        return f"create {self.name} {self.set_type} family {self.family} hashsize 1024 maxelem 65536"


@dataclass(frozen=True)
class RealServer:
    address: str
    port: int
    weight: int = 1

    @property
    def text(self) -> str:
        return host_port(self.address, self.port)


@dataclass(frozen=True)
class VirtualServer:
    """An IPVS service: address, port, protocol ("TCP"/"UDP"/"SCTP"), scheduler, persistence timeout."""

    protocol: str
    address: str
    port: int
    scheduler: str
    timeout: int = 0  # ClientIP affinity: FlagPersistent with this timeout; 0 = not persistent
    real_servers: tuple[RealServer, ...] = ()

    @property
    def service_address(self) -> str:
        """ipvsadm's service option and address, e.g. "-t 10.96.0.1:443"."""
        return f"{ipvsadm_flag(self.protocol)} {host_port(self.address, self.port)}"

    def ipvsadm_lines(self) -> list[str]:
        persistent = f" -p {self.timeout}" if self.timeout else ""
        lines = [f"-A {self.service_address} -s {self.scheduler}{persistent}"]
        # Masquerading ("-m") with weight 1: kube-proxy's RealServer (no ConnectionFlags, so NAT).
        lines += [f"-a {self.service_address} -r {rs.text} -m -w {rs.weight}" for rs in self.real_servers]
        return lines


@dataclass(frozen=True)
class IpvsRules(xtables.XtablesPayload):
    """Everything one of kube-proxy's ipvs proxiers (of ProxyConfig.family) puts into one node's kernel."""

    table_order = ("nat", "filter")

    version: str
    # The /32s (the IPv6 proxier's /128s) bound on kube-ipvs0.
    dummy_addresses: tuple[str, ...]
    ipsets: tuple[IpSet, ...]
    virtual_servers: tuple[VirtualServer, ...]
    # What syncProxyRules writes with iptables-restore --noflush (chain declarations and rules).
    nat_chains: tuple[str, ...]
    nat_rules: tuple[str, ...]
    filter_chains: tuple[str, ...]
    filter_rules: tuple[str, ...]
    # Rules kube-proxy keeps in built-in chains with `iptables -C`/`-I` (prepend).
    jump_rules: tuple[xtables.JumpRule, ...]
    # kubelet's KUBE-MARK-DROP / filter KUBE-FIREWALL, for versions whose kube-proxy relied on them.
    kubelet: xtables.KubeletRules | None
    # NewProxier's sysctls, "net/ipv4/vs/conntrack" -> 1.
    sysctls: dict[str, int] = field(hash=False)
    # The addresses that got NodePort virtual servers.
    node_port_addresses: tuple[str, ...] = ()
    # Why the rules that mark for masquerade were written, and how each virtual server chooses (because.py).
    because: tuple[Because, ...] = ()

    def ipset(self, name: str) -> IpSet:
        """A set by ipsetInfo's name (KUBE-CLUSTER-IP finds the IPv6 proxier's KUBE-6-CLUSTER-IP too)."""
        return next(s for s in self.ipsets if s.name in (name, set_name(name, "IPv6")))

    def ipset_restore(self) -> str:
        """Input for `ipset restore`: every set kube-proxy creates, then their entries.

        kube-proxy runs `ipset create NAME TYPE ... -exist` and `ipset add NAME ENTRY -exist` one
        by one; this is the same content for an empty namespace. Each set's comment (the one its
        iptables rules carry) is written above it as a "#" line, which ipset restore skips.
        """
        lines = []
        for s in self.ipsets:
            lines += [f"# {s.name}: {s.comment}", s.create_line()]
        for s in self.ipsets:
            lines += [f"add {s.name} {entry}" for entry in s.entries]
        return "\n".join(lines) + "\n"

    def iptables_restore(self) -> str:
        """One iptables-restore input (without --noflush) for an empty network namespace.

        Built-in chains with policy ACCEPT and the jumps into kube-proxy's chains, then
        kube-proxy's ipvs-mode chains and rules for this version. The ipsets must exist first
        (load ipset_restore()): every "-m set" match names one.

        For versions up to 1.24 kube-proxy's nat KUBE-FIREWALL ends in "-j KUBE-MARK-DROP", a
        chain only kubelet fills, and the marked packets are dropped by kubelet's filter
        KUBE-FIREWALL from INPUT and OUTPUT. Those kubelet rules (xtables.KubeletRules) are
        included, so the namespace behaves like such a node. From 1.25 kube-proxy relies on no
        kubelet rule and none is written.
        """
        return xtables.restore_text(self.tables, self.jump_rules, self.kubelet)

    def ipvsadm_restore(self) -> str:
        """Input for `ipvsadm-restore` (the `ipvsadm-save -n` format): each -A, then its -a lines."""
        lines = [line for vs in self.virtual_servers for line in vs.ipvsadm_lines()]
        return "\n".join(lines) + ("\n" if lines else "")


def render_ipvs(
    services: Sequence[ServicePort],
    config: ProxyConfig,
    node_ips: Sequence[str] = (),
    version: str = DEFAULT_VERSION,
    *,
    kernel: tuple[int, int] = (6, 1),
) -> IpvsRules:
    """Render kube-proxy's ipvs mode for one node.

    node_ips: every address on the node's interfaces other than kube-ipvs0, the node IP
    (--node-ip, used for loadBalancerSourceRanges) first. Include 127.0.0.1: a real node has it
    on lo, and kube-proxy up to 1.21 makes NodePort virtual servers on it.
    kernel: the running kernel's (major, minor), which decides conn_reuse_mode.
    """
    if problem := check_ipvs_version(version):
        raise ValueError(problem)
    release = Release.of(version)
    node = _Node.build(config, node_ips)
    views = [view for port in services if (view := _ServiceView.build(port, release, config.family)) is not None]
    state = _State(release, node, views)
    for view in views:
        state.add_service(view)
    # KUBE-IPVS-IPS is set to exactly the addresses wanted on kube-ipvs0.
    state.sets[IPVS_IPS] = dict(state.bound)
    tables = _write_iptables_rules(state)
    return IpvsRules(
        version=version,
        dummy_addresses=tuple(f"{ip}/{32 if config.family == 'IPv4' else 128}" for ip in state.bound),
        ipsets=tuple(
            IpSet(set_name(name, config.family), *IPSET_INFO[name], tuple(state.sets[name]), _SET_FAMILY[config.family])
            for name in _set_names(release)
        ),
        virtual_servers=tuple(state.virtual_servers.values()),
        nat_chains=_nat_chains(release),
        nat_rules=tuple(tables.nat),
        filter_chains=_filter_chains(release),
        filter_rules=tuple(tables.filter),
        jump_rules=_jump_rules(release),
        kubelet=xtables.kubelet_rules(version, family=config.family) if release.kubelet_mark_drop else None,
        sysctls=_sysctls(release, config, kernel),
        node_port_addresses=tuple(state.node_port_ips),
        because=(*tables.because, *map(_chooses, state.virtual_servers.values())),
    )


def _chooses(server: VirtualServer) -> Because:
    """How a virtual server picks its real server: the kernel's scheduler (a persistent one keeps a client's)."""
    count = len(server.real_servers)
    how = f"by the {server.scheduler} scheduler among {count} real server{'s' * (count != 1)}"
    how += f", a client kept on its own for {server.timeout} s (persistence)" if server.timeout else ""
    return Because(CHOICE, "ipvs", server.service_address, (), None, how)


def _jump_rules(release: Release) -> tuple[xtables.JumpRule, ...]:
    """iptablesJumpChain, in order; each is ensured with iptables -I (prepend)."""
    rules = [
        xtables.JumpRule("nat", "OUTPUT", KUBE_SERVICES, "kubernetes service portals"),
        xtables.JumpRule("nat", "PREROUTING", KUBE_SERVICES, "kubernetes service portals"),
        xtables.JumpRule("nat", "POSTROUTING", KUBE_POSTROUTING, "kubernetes postrouting rules"),
        xtables.JumpRule("filter", "FORWARD", KUBE_FORWARD, "kubernetes forwarding rules"),
    ]
    if release.health_check_accept_rules:
        rules.append(xtables.JumpRule("filter", "INPUT", KUBE_NODE_PORT, "kubernetes health check rules"))
    if not release.kubelet_mark_drop:
        rules.append(xtables.JumpRule("filter", "INPUT", KUBE_PROXY_FIREWALL, "kube-proxy firewall rules"))
        rules.append(xtables.JumpRule("filter", "FORWARD", KUBE_PROXY_FIREWALL, "kube-proxy firewall rules"))
    if release.ipvs_filter:
        rules.append(xtables.JumpRule("filter", "INPUT", KUBE_IPVS_FILTER, "kubernetes ipvs access filter"))
    if release.ipvs_out_filter:
        rules.append(xtables.JumpRule("filter", "OUTPUT", KUBE_IPVS_OUT_FILTER, "kubernetes ipvs access filter"))
    return tuple(rules)


def _nat_chains(release: Release) -> tuple[str, ...]:
    """iptablesChains (nat part), in the order their declarations are written."""
    firewall = (KUBE_FIREWALL,) if release.kubelet_mark_drop else ()
    return (KUBE_SERVICES, KUBE_POSTROUTING, *firewall, KUBE_NODE_PORT, KUBE_LOAD_BALANCER, KUBE_MARK_MASQ)


def _filter_chains(release: Release) -> tuple[str, ...]:
    chains = [KUBE_FORWARD]
    if release.health_check_accept_rules:
        chains.append(KUBE_NODE_PORT)
    if not release.kubelet_mark_drop:
        chains += [KUBE_PROXY_FIREWALL, KUBE_SOURCE_RANGES_FIREWALL]
    if release.ipvs_filter:
        chains.append(KUBE_IPVS_FILTER)
    if release.ipvs_out_filter:
        chains.append(KUBE_IPVS_OUT_FILTER)
    return tuple(chains)


def _set_names(release: Release) -> tuple[str, ...]:
    """ipsetInfo: every set kube-proxy creates (empty or not) on each sync."""
    names = list(IPSET_INFO)
    if not release.health_check_accept_rules:
        names.remove(HEALTH_CHECK_NODE_PORT)
    if not release.ipvs_filter:
        names.remove(IPVS_IPS)
    return tuple(names)


def _set_jumps(release: Release) -> tuple[tuple[str, str, str, str, str, str], ...]:
    """ipsetWithIptablesChain: (set, table, from chain, target, match type, "-p" protocol)."""
    rows = [
        (LOOP_BACK, "nat", KUBE_POSTROUTING, "MASQUERADE", "dst,dst,src", ""),
        (LOAD_BALANCER, "nat", KUBE_SERVICES, KUBE_LOAD_BALANCER, "dst,dst", ""),
    ]
    if release.kubelet_mark_drop:
        rows += [
            (LOAD_BALANCER_FW, "nat", KUBE_LOAD_BALANCER, KUBE_FIREWALL, "dst,dst", ""),
            (LOAD_BALANCER_SOURCE_CIDR, "nat", KUBE_FIREWALL, "RETURN", "dst,dst,src", ""),
            (LOAD_BALANCER_SOURCE_IP, "nat", KUBE_FIREWALL, "RETURN", "dst,dst,src", ""),
        ]
    rows += [
        (LOAD_BALANCER_LOCAL, "nat", KUBE_LOAD_BALANCER, "RETURN", "dst,dst", ""),
        (NODE_PORT_LOCAL_TCP, "nat", KUBE_NODE_PORT, "RETURN", "dst", "tcp"),
        (NODE_PORT_TCP, "nat", KUBE_NODE_PORT, KUBE_MARK_MASQ, "dst", "tcp"),
        (NODE_PORT_LOCAL_UDP, "nat", KUBE_NODE_PORT, "RETURN", "dst", "udp"),
        (NODE_PORT_UDP, "nat", KUBE_NODE_PORT, KUBE_MARK_MASQ, "dst", "udp"),
    ]
    sctp_local = (NODE_PORT_LOCAL_SCTP, "nat", KUBE_NODE_PORT, "RETURN", "dst,dst", "sctp")
    sctp = (NODE_PORT_SCTP, "nat", KUBE_NODE_PORT, KUBE_MARK_MASQ, "dst,dst", "sctp")
    rows += [sctp_local, sctp] if release.ipvs_sctp_local_first else [sctp, sctp_local]
    if not release.kubelet_mark_drop:
        rows += [
            (LOAD_BALANCER_FW, "filter", KUBE_PROXY_FIREWALL, KUBE_SOURCE_RANGES_FIREWALL, "dst,dst", ""),
            (LOAD_BALANCER_SOURCE_CIDR, "filter", KUBE_SOURCE_RANGES_FIREWALL, "RETURN", "dst,dst,src", ""),
            (LOAD_BALANCER_SOURCE_IP, "filter", KUBE_SOURCE_RANGES_FIREWALL, "RETURN", "dst,dst,src", ""),
        ]
    return tuple(rows)


def _ipvs_filter_returns(release: Release) -> tuple[tuple[str, str], ...]:
    """KUBE-IPVS-FILTER's RETURN rules: (set, match type)."""
    rows = [(LOAD_BALANCER, "dst,dst"), (CLUSTER_IP, "dst,dst"), (EXTERNAL_IP, "dst,dst")]
    if release.ipvs_filter_external_local:
        rows.append((EXTERNAL_IP_LOCAL, "dst,dst"))
    if release.ipvs_filter_health_check:
        rows.append((HEALTH_CHECK_NODE_PORT, "dst"))
    return tuple(rows)


def _sysctls(release: Release, config: ProxyConfig, kernel: tuple[int, int]) -> dict[str, int]:
    """What NewProxier ensures (EnsureSysctl), in its order."""
    sysctls = {}
    # Set by the proxier of either family (S1.20 NewProxier sets it before it knows its family): an IPv6-only
    # node's kube-proxy up to 1.20 sets IPv4's route_localnet too.
    if release.ipvs_route_localnet:
        sysctls["net/ipv4/conf/all/route_localnet"] = 1
    sysctls["net/ipv4/vs/conntrack"] = 1
    # conn_reuse_mode=0 needs kernel >= 4.1; from 1.22 kernels >= 5.9 keep their default.
    if kernel >= (4, 1) and not (release.ipvs_conn_reuse_fixed_kernel and kernel >= (5, 9)):
        sysctls["net/ipv4/vs/conn_reuse_mode"] = 0
    sysctls["net/ipv4/vs/expire_nodest_conn"] = 1
    sysctls["net/ipv4/vs/expire_quiescent_template"] = 1
    sysctls["net/ipv4/ip_forward"] = 1
    if config.ipvs_strict_arp:
        sysctls["net/ipv4/conf/all/arp_ignore"] = 1
        sysctls["net/ipv4/conf/all/arp_announce"] = 2
    return sysctls


class _Node(NodeBase):
    @property
    def interface_addresses(self) -> set[str]:
        """GetAllLocalAddresses(Except): the node's addresses without loopback (isValidForSet)."""
        return {str(ip) for ip in self.addresses if not ip.is_loopback}


class _ServiceView(ServiceView):
    """The ipvs proxier binds each external and LB IP once, and names set entries "IP,proto:port"."""

    @classmethod
    def build(cls, port: ServicePort, release: Release, family: Family = "IPv4") -> _ServiceView | None:
        view = super().build(port, release, family)
        if view is None:
            return None
        return replace(view, external_ips=tuple(unique(view.external_ips)), lb_ips=tuple(unique(view.lb_ips)))

    def entry(self, ip: str, port: int | None = None) -> str:
        """hash:ip,port Entry.String(): "IP,proto:port"."""
        return f"{ip},{self.proto}:{self.port.port if port is None else port}"


class _State:
    """The sets, bound addresses and virtual servers one sync accumulates."""

    def __init__(self, release: Release, node: _Node, views: Sequence[_ServiceView]) -> None:
        self.release = release
        self.node = node
        self.sets: dict[str, dict[str, None]] = {name: {} for name in IPSET_INFO}
        self.bound: dict[str, None] = {}
        self.virtual_servers: dict[tuple[str, str, int], VirtualServer] = {}
        self.out_filter_entries: list[tuple[str, str, int]] = []
        self.node_port_ips = self._node_port_ips(views)

    def _node_port_ips(self, views: Sequence[_ServiceView]) -> list[str]:
        """The node IPs that get NodePort virtual servers."""
        node, release = self.node, self.release
        ips = node.node_port_addresses()
        if not release.ipvs_loopback_node_port:
            ips = [ip for ip in ips if not ip.is_loopback]
        if release.ipvs_nodeport_skips_bound:
            # 1.23-1.27 take the node's addresses minus those kube-ipvs0 held at the start of the
            # sync; in the steady state that is everything this sync binds.
            bound = {ip for view in views for ip in (view.cluster_ip, *view.external_ips, *view.lb_ips)}
            ips = [ip for ip in ips if str(ip) not in bound]
        return [str(ip) for ip in ips]

    def add(self, set_name: str, entry: str) -> None:
        self.sets[set_name][entry] = None

    def add_service(self, svc: _ServiceView) -> None:
        release = self.release
        for ep in svc.endpoints:
            # Hairpin: every local endpoint kube-proxy knows (<= 1.20 only ready ones: family_endpoints).
            if ep.is_local:
                self.add(LOOP_BACK, f"{ep.ip},{svc.proto}:{ep.port},{ep.ip}")

        self.add(CLUSTER_IP, svc.entry(svc.cluster_ip))
        self._virtual_server(svc, svc.cluster_ip, svc.port.port, bind=True, local=False)

        for ip in svc.external_ips:
            self.add(EXTERNAL_IP_LOCAL if svc.external_local else EXTERNAL_IP, svc.entry(ip))
            self._virtual_server(svc, ip, svc.port.port, bind=self._should_bind(ip), local=True)

        for ip in svc.lb_ips:
            self._load_balancer_ip(svc, ip)

        if svc.port.node_port and not self._node_port(svc):
            return  # kube-proxy "continue"s: without node IPs the health check port is skipped too
        if svc.health_check_node_port and release.health_check_accept_rules:
            self.add(HEALTH_CHECK_NODE_PORT, str(svc.health_check_node_port))

    def _should_bind(self, ip: str) -> bool:
        # >= 1.28: "We must not add the address to the dummy device if it exist on another interface".
        return not (self.release.ipvs_bind_only_foreign and ip in self.node.interface_addresses)

    def _load_balancer_ip(self, svc: _ServiceView, ip: str) -> None:
        entry = svc.entry(ip)
        self.add(LOAD_BALANCER, entry)
        if svc.external_local:
            self.add(LOAD_BALANCER_LOCAL, entry)
        if svc.source_cidrs:
            self.add(LOAD_BALANCER_FW, entry)
            for cidr in svc.source_cidrs:
                self.add(LOAD_BALANCER_SOURCE_CIDR, f"{entry},{cidr}")
            if self.node.primary_in(svc.source_cidrs):
                # The node reaching the LB IP often loops back with the LB IP as source.
                self.add(LOAD_BALANCER_SOURCE_IP, f"{entry},{ip}")
            else:
                self.out_filter_entries.append((ip, svc.proto, svc.port.port))
        self._virtual_server(svc, ip, svc.port.port, bind=self._should_bind(ip), local=True)

    def _node_port(self, svc: _ServiceView) -> bool:
        ips = self.node_port_ips
        if not ips:
            return False
        node_port = svc.port.node_port
        # TCP/UDP: bitmap:port of the port; SCTP: hash:ip,port of every node IP.
        entries = [svc.entry(ip, node_port) for ip in ips] if svc.proto == "sctp" else [str(node_port)]
        for entry in entries:
            self.add(_NODE_PORT_SETS[svc.proto], entry)
            if svc.external_local:
                self.add(_NODE_PORT_LOCAL_SETS[svc.proto], entry)
        for ip in ips:
            self._virtual_server(svc, ip, node_port, bind=False, local=True)
        return True

    def _virtual_server(self, svc: _ServiceView, ip: str, port: int, *, bind: bool, local: bool) -> None:
        key = (svc.port.protocol, ip, port)
        if key not in self.virtual_servers:
            servers = tuple(RealServer(ep.ip, ep.port) for ep in self._real_servers(svc, external=local))
            self.virtual_servers[key] = VirtualServer(
                svc.port.protocol,
                ip,
                port,
                self.node.config.ipvs_scheduler,
                timeout=svc.port.affinity_timeout,
                real_servers=servers,
            )
        if bind:
            self.bound[ip] = None

    def _real_servers(self, svc: _ServiceView, *, external: bool) -> tuple[Endpoint, ...]:
        """syncEndpoint(): the endpoints one virtual server balances to."""
        release = self.release
        chosen = categorize(svc, release)
        only_local = svc.external_local if external else svc.internal_local
        if release.endpoint_selection == "ready":
            # No internalTrafficPolicy yet (alpha, off): only eTP=Local narrows, to local ready endpoints.
            only_local = external and svc.external_local
        if not only_local:
            return chosen.cluster
        if release.endpoint_selection == "categorized":
            # #97081: with no local endpoint, fall back to the cluster-wide ones.
            return chosen.local or chosen.cluster
        return chosen.local


@dataclass
class _Tables:
    nat: list[str] = field(default_factory=list)
    filter: list[str] = field(default_factory=list)
    because: list[Because] = field(default_factory=list)  # why its rules that mark for masquerade were written

    def add(self, table: str, *parts: str | Iterable[str]) -> None:
        getattr(self, table).append(" ".join(xtables.flatten(parts)))

    def why(self, chain: str, says: tuple[str, ...], setting: Setting) -> None:
        """The nat rule of `chain` just written marks for masquerade (or masquerades) because of `setting`."""
        self.because.append(Because(MARK, "nat", chain, says, setting))


def _set_masquerade(name: str, target: str) -> Setting | None:
    """Why a rule matching ipset `name` marks for masquerade (or masquerades: the hairpin set), if it does."""
    if name == LOOP_BACK and target == "MASQUERADE":
        return hairpin_masquerade(None)
    return _external_cluster(name) if target == KUBE_MARK_MASQ else None


def _external_cluster(name: str) -> Setting:
    """externalTrafficPolicy Cluster, of every Service whose address or NodePort is in ipset `name`."""
    return external_policy("", "Cluster", f"the Services in ipset {name}")


def _write_iptables_rules(state: _State) -> _Tables:
    """writeIptablesRules(), in kube-proxy's order."""
    release, node = state.release, state.node
    config = node.config
    out = _Tables()

    def nonempty(name: str) -> bool:
        return bool(state.sets[name])

    def match_set(name: str, match_type: str) -> tuple[str, ...]:
        # Every rule names the set as this proxier's family calls it (ipsetList[...].Name).
        return ("-m", "set", "--match-set", set_name(name, config.family), match_type)

    def set_match(name: str, match_type: str) -> tuple[str, ...]:
        return ("-m", "comment", "--comment", xtables.quoted(IPSET_INFO[name][1]), *match_set(name, match_type))

    if release.ipvs_filter:
        # Dismiss connections to localhost early: 127.0.0.0/8, or ::1/128 in the IPv6 proxier.
        out.add("nat", "-A", KUBE_SERVICES, "-s", _LOOPBACK[config.family], "-j", "RETURN")

    for name, table, chain, target, match_type, proto in _set_jumps(release):
        if nonempty(name):
            protocol = ("-p", proto) if proto else ()
            out.add(table, "-A", chain, protocol, set_match(name, match_type), "-j", target)
            if table == "nat" and (setting := _set_masquerade(name, target)):
                out.why(chain, (f"--match-set {set_name(name, config.family)} ", f"-j {target}"), setting)

    cluster_ips = (f"--match-set {set_name(CLUSTER_IP, config.family)} ", f"-j {KUBE_MARK_MASQ}")
    if nonempty(CLUSTER_IP):
        if config.masquerade_all:
            out.add("nat", "-A", KUBE_SERVICES, set_match(CLUSTER_IP, "dst,dst"), "-j", KUBE_MARK_MASQ)
            out.why(KUBE_SERVICES, cluster_ips, masquerade_all())
        elif config.cluster_cidr:
            # Off-cluster traffic to a VIP may be routed to any node: masquerade it.
            masq = ("!", "-s", config.cluster_cidr, "-j", KUBE_MARK_MASQ)
            out.add("nat", "-A", KUBE_SERVICES, set_match(CLUSTER_IP, "dst,dst"), masq)
            out.why(KUBE_SERVICES, cluster_ips, local_detector(config.cluster_cidr))
        else:
            # No local-traffic detector: masquerade node traffic that left with a VIP as source.
            out.add("nat", "-A", KUBE_SERVICES, set_match(CLUSTER_IP, "src,dst"), "-j", KUBE_MARK_MASQ)

    def external_ip_rules(match: tuple[str, ...]) -> None:
        # Off-machine traffic (not bridged in, not from a local address), and traffic to local addresses.
        physdev = ("-m", "physdev", "!", "--physdev-is-in", "-m", "addrtype", "!", "--src-type", "LOCAL")
        out.add("nat", match, physdev, "-j", "ACCEPT")
        out.add("nat", match, "-m", "addrtype", "--dst-type", "LOCAL", "-j", "ACCEPT")

    if nonempty(EXTERNAL_IP):
        match = ("-A", KUBE_SERVICES, *set_match(EXTERNAL_IP, "dst,dst"))
        out.add("nat", match, "-j", KUBE_MARK_MASQ)
        external = set_name(EXTERNAL_IP, config.family)
        out.why(KUBE_SERVICES, (f"--match-set {external} ", f"-j {KUBE_MARK_MASQ}"), _external_cluster(external))
        external_ip_rules(match)
    if nonempty(EXTERNAL_IP_LOCAL):
        external_ip_rules(("-A", KUBE_SERVICES, *set_match(EXTERNAL_IP_LOCAL, "dst,dst")))

    out.add("nat", "-A", KUBE_SERVICES, "-m", "addrtype", "--dst-type", "LOCAL", "-j", KUBE_NODE_PORT)
    out.add("nat", "-A", KUBE_LOAD_BALANCER, "-j", KUBE_MARK_MASQ)
    if nonempty(LOAD_BALANCER):
        balancers = _external_cluster(set_name(LOAD_BALANCER, config.family))
        out.why(KUBE_LOAD_BALANCER, (f"-j {KUBE_MARK_MASQ}",), balancers)
    if release.kubelet_mark_drop:
        out.add("nat", "-A", KUBE_FIREWALL, "-j", KUBE_MARK_DROP)
    else:
        out.add("filter", "-A", KUBE_SOURCE_RANGES_FIREWALL, "-j", "DROP")

    if release.ipvs_out_filter:
        for ip, proto, port in state.out_filter_entries:
            ipvs = ("-m", "ipvs", "--vaddr", ip, "--vproto", proto, "--vport", str(port))
            out.add("filter", "-A", KUBE_IPVS_OUT_FILTER, "-s", ip, ipvs, "-j", "DROP")

    # acceptIPVSTraffic: these must stay last in KUBE-SERVICES.
    for name in (CLUSTER_IP, LOAD_BALANCER):
        if nonempty(name):
            out.add("nat", "-A", KUBE_SERVICES, match_set(name, "dst,dst"), "-j", "ACCEPT")

    out.filter += xtables.forward_accept_rules(node.mark, release)

    if release.health_check_accept_rules:
        out.add("filter", "-A", KUBE_NODE_PORT, set_match(HEALTH_CHECK_NODE_PORT, "dst"), "-j", "ACCEPT")

    if release.ipvs_filter:
        # No reaching host ports through a VIP (issue 72236).
        for name, match_type in _ipvs_filter_returns(release):
            out.add("filter", "-A", KUBE_IPVS_FILTER, match_set(name, match_type), "-j", "RETURN")
        new = ("-m", "conntrack", "--ctstate", "NEW")
        out.add("filter", "-A", KUBE_IPVS_FILTER, new, match_set(IPVS_IPS, "dst"), "-j", "REJECT")

    out.nat += [*xtables.postrouting_rules(node.mark, config.random_fully), xtables.mark_masq_rule(node.mark)]
    return out
