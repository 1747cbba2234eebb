"""The scenario file's schema: what a user may write, checked field by field."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lab.describe.families import Address, one_network
from lab.describe.families import addresses as _addresses
from lab.describe.families import networks as _networks
from lab.describe.families import one_address as _address
from lab.describe.ipv4 import address as _ipv4_address
from lab.describe.ipv4 import network as _network
from lab.describe.k8s import Manifest, Port
from lab.describe.names import Labels
from lab.describe.names import LabName as Name

# What came back to the client (lab/probe/client.py): an answer, a RST to the SYN (or ICMP port unreachable),
# a RST once established, another ICMP error (net/host unreachable, time exceeded...), nothing, or a TCP
# handshake with nothing behind it (accepted: a socket that never reads, as kube-proxy's held NodePorts up to 1.23).
# MTUs a scenario may set: IPv4's smallest datagram every host must take (RFC 791) up to jumbo frames.
MIN_MTU, MAX_MTU = 576, 9000
MAX_PAYLOAD = 65507  # the most data one UDP datagram over IPv4 carries (65535 less the IP and UDP headers)
Outcome = Literal["delivered", "refused", "reset", "unreachable", "dropped", "accepted"]


def _axis_value(value: Any) -> Any:
    """A matrix or `when` value as the matrix holds it: a boolean, or text (a whole number written unquoted, as
    text). A decimal number is left for the schema to refuse: YAML reads 1.30 as 1.3, which must not be guessed."""
    return value if isinstance(value, bool | float) else str(value)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, strict=True)


class Conntrack(Strict):
    """kube-proxy's `conntrack` configuration (KubeProxyConntrackConfiguration): what it writes to the node's
    netfilter sysctls on start. Unset timeouts leave the kernel's value, as kube-proxy does with 0."""

    tcp_be_liberal: bool = Field(False, alias="tcpBeLiberal")
    udp_timeout: int | None = Field(None, alias="udpTimeout", ge=1, le=86400)  # seconds
    udp_stream_timeout: int | None = Field(None, alias="udpStreamTimeout", ge=1, le=86400)  # seconds


# The schedulers kube-proxy's configuration validation accepts for ipvs.scheduler (pkg/proxy/apis/config/
# validation: validateIPVSSchedulerMethod), each an ip_vs_<name> kernel module.
IpvsScheduler = Literal["rr", "wrr", "lc", "wlc", "lblc", "lblcr", "sh", "dh", "sed", "nq"]


class Ipvs(Strict):
    """kube-proxy's `ipvs` configuration (KubeProxyIPVSConfiguration) that changes what it writes."""

    scheduler: IpvsScheduler = "rr"
    strict_arp: bool = Field(False, alias="strictARP")


class Iptables(Strict):
    """kube-proxy's `iptables` configuration (KubeProxyIPTablesConfiguration) that changes what it writes."""

    # iptables.localhostNodePorts (--iptables-localhost-nodeports, kubernetes#108250, 1.26): false leaves NodePorts
    # on 127.0.0.0/8 unserved and route_localnet alone.
    localhost_nodeports: bool = Field(True, alias="localhostNodePorts")


# The words nodePortAddresses may hold besides CIDRs (pkg/proxy/apis/config types.go: NodePortAddressesPrimary, and
# from kubernetes#138427 in 1.37 NodePortAddressesLocalhost and NodePortAddressesAll), spelt as kube-proxy spells them.
NODE_PORT_KEYWORDS = ("primary", "localhost", "all")

# The kube-proxy feature gates the lab models (KubeProxyConfiguration.featureGates): what each one changes is render's
# (lab/render/kubeproxy/versions.py), which releases have it is describe's (lab/describe/releases.py).
FeatureGate = Literal["AllowServiceExternalIPs", "KubeProxyNFTablesLocalhostNodePorts"]


# The Debian releases whose nft and iptables the lab fetches from Debian's archive and runs on this machine
# (lab/vm/debtools.py).
DebianRelease = Literal["bullseye", "bookworm", "trixie"]


class ToolReleases(Strict):
    """Which Debian release's nft and iptables a writer of the node's rules runs; unset, this machine's own."""

    nft: DebianRelease | None = None
    # iptables and ip6tables (-save, -restore) of the writer's backend: iptables-nft, or iptables-legacy.
    iptables: DebianRelease | None = None


class HostTools(ToolReleases):
    # The node's other writers (the host's firewall, Docker, the CNI, ip-masq-agent): an nftables script loaded with
    # their nft on every node before kube-proxy's first sync; the iptables backend they write in (unset,
    # cluster.iptablesBackend, kube-proxy's); rules (iptables-restore's input) they add to that backend's tables
    # before kube-proxy's first sync, and keep there.
    nftables: str = ""
    iptables_backend: Literal["nft", "legacy"] | None = Field(None, alias="iptablesBackend")
    iptables_rules: str = Field("", alias="iptablesRules")


class Tools(Strict):
    """The tools inside kube-proxy's image and those of the node's other writers: each runs its own."""

    kube_proxy: ToolReleases = Field(ToolReleases(), alias="kubeProxy")
    host: HostTools = HostTools()


class Cluster(Strict):
    proxy_mode: Literal["iptables", "ipvs", "nftables"] = Field("iptables", alias="proxyMode")
    kube_version: str = Field("1.31", alias="kubeVersion")
    # The backend kube-proxy's iptables writes in; `wrapper`: the one its image's iptables-wrapper chooses from the
    # node's rules when kube-proxy starts (lab/describe/resolve/iptables_wrapper.py).
    iptables_backend: Literal["nft", "legacy", "wrapper"] = Field("nft", alias="iptablesBackend")
    cluster_cidr: str = Field("10.244.0.0/16", alias="clusterCIDR")
    kube_proxy_cluster_cidr: bool = Field(True, alias="kubeProxyClusterCIDR")
    service_cidr: str = Field("10.96.0.0/16", alias="serviceCIDR")
    # flannel: cni0 as `bridge`, the other nodes' blocks through flannel's VXLAN device flannel.1, flannel's chains.
    cni: Literal["bridge", "routed-tunnel", "flannel"] = "bridge"
    tunnel: Literal["auto", "ipip", "vxlan"] = "auto"
    # cni routed-tunnel: the tunnel device's MTU (the kernel's own otherwise: the node's link less the
    # encapsulation, 1480 for ipip and 1450 for VXLAN on a 1500 link); the pods' interfaces stay at 1500.
    tunnel_mtu: int | None = Field(None, alias="tunnelMTU", ge=MIN_MTU, le=MAX_MTU)
    # cni routed-tunnel: the IP pool's natOutgoing (Calico's IPPool holding clusterCIDR): Felix masquerades what
    # pods send out of the pool; unset, true, as the default pool calico-node makes.
    nat_outgoing: bool | None = Field(None, alias="natOutgoing")
    ipvs_bind_load_balancer_ips: bool = Field(True, alias="ipvsBindLoadBalancerIPs")
    hairpin_mode: Literal["hairpin-veth", "promiscuous-bridge", "none"] = Field("hairpin-veth", alias="hairpinMode")
    underlay: str = "192.168.56.0/24"
    br_netfilter: bool = Field(True, alias="brNetfilter")
    conntrack: Conntrack = Conntrack()
    # kube-proxy's --masquerade-all (iptables.masqueradeAll): SNAT every packet to a Service address.
    masquerade_all: bool = Field(False, alias="masqueradeAll")
    # kube-proxy's --iptables-masquerade-bit (iptables.masqueradeBit; in nftables mode nftables.masqueradeBit): the
    # bit of the packet mark that says "masquerade", within 0-31 as its validation requires.
    masquerade_bit: int = Field(14, alias="masqueradeBit", ge=0, le=31)
    # kube-proxy's nodePortAddresses: the CIDRs whose local addresses take NodePorts (empty: kube-proxy's default),
    # and the keywords of NODE_PORT_KEYWORDS (which release takes which: lab/describe/releases.py).
    node_port_addresses: list[str] = Field([], alias="nodePortAddresses")
    ipvs: Ipvs = Ipvs()
    iptables: Iptables = Iptables()
    feature_gates: dict[FeatureGate, bool] = Field({}, alias="featureGates")
    tools: Tools = Tools()

    # One network, or one per family separated by a comma (the first the primary family), as kube-proxy's
    # --cluster-cidr and kube-apiserver's --service-cluster-ip-range take them; the three give the same families.
    _cidrs = field_validator("cluster_cidr", "service_cidr", "underlay")(_networks)

    @field_validator("node_port_addresses")
    @classmethod
    def _node_port_cidrs(cls, value: list[str]) -> list[str]:
        # kube-proxy's validation (validateKubeProxyNodePortAddress): each entry a CIDR or a keyword, written exactly
        # (`Localhost` is neither), and a keyword at most once (kubernetes#138427's review asked for that error).
        canonical = []
        for entry in value:
            if entry in NODE_PORT_KEYWORDS:
                canonical.append(entry)
                continue
            try:
                canonical.append(one_network(entry))  # either family: each proxier keeps its own family's CIDRs
            except ValueError as exc:
                words = ", ".join(NODE_PORT_KEYWORDS)
                raise ValueError(f"{exc}; or one of the keywords {words} (lower case)") from None
        for keyword in NODE_PORT_KEYWORDS:
            if value.count(keyword) > 1:
                raise ValueError(f"the keyword {keyword!r} is listed {value.count(keyword)} times: list it once")
        return canonical

    @field_validator("kube_version", mode="before")
    @classmethod
    def _version_as_text(cls, value: Any) -> Any:
        # YAML reads 1.30 as the float 1.3; insist on quoting rather than guess.
        if isinstance(value, float):
            raise ValueError(f'write the version in quotes ("1.30", not 1.30): YAML reads {value!r} as a number')
        return value

    @field_validator("kube_version")
    @classmethod
    def _minor_version(cls, value: str) -> str:
        if not re.fullmatch(r"1\.[0-9]+", value):
            raise ValueError(f'expected a Kubernetes release as 1.MINOR, e.g. "1.31", not {value!r}')
        return value


class Node(Strict):
    name: Name
    ip: str  # one address per family of the cluster, comma-separated, as kubelet's --node-ip takes them
    pod_cidr: str = Field(alias="podCIDR")
    labels: Labels = {}
    # The MTU of the node's link to the underlay (its eth0 and the underlay's port to it, as a NIC and its
    # switch port are set alike); 1500 otherwise.
    mtu: int | None = Field(None, ge=MIN_MTU, le=MAX_MTU)
    # A node of a sliced import that is not built: its pods' addresses answer from one stand-in namespace
    # (docs/scenarios.md, "Stand-in nodes").
    stand_in: bool = Field(False, alias="standIn")

    _ip = field_validator("ip")(_addresses)
    _cidr = field_validator("pod_cidr")(_networks)  # as spec.podCIDRs, comma-separated


class Route(Strict):
    to: str
    via: list[str] = Field(min_length=1)

    _to = field_validator("to")(_network)


class ExternalHost(Strict):
    name: Name
    ip: str
    network: str | None = None  # a router's own LAN: it takes the first address, `behind` hosts live there
    routes: list[Route] = []
    masquerade: bool = False
    behind: str | None = None

    _ip = field_validator("ip")(_addresses)

    @field_validator("network")
    @classmethod
    def _lan(cls, value: str | None) -> str | None:
        return _network(value) if value is not None else None


class LoadBalancer(Strict):
    name: Name = "lb"
    # external: an L4 load balancer in the fabric; layer2: no such host, a node's speaker answers ARP for the VIP
    # on the underlay (MetalLB's L2 mode, kube-vip's ARP mode).
    mode: Literal["external", "layer2"] = "external"
    services: list[str] | None = None  # "name" or "namespace/name"; None: every LoadBalancer Service left over
    announcer: str | None = None  # layer2: the node whose speaker answers (default: MetalLB's election)
    address: str | None = None
    source: Literal["preserve", "snat"] = "preserve"
    forward: Literal["nodePort", "vip"] = "nodePort"
    nodes: list[str] | None = None
    health_check: bool = Field(True, alias="healthCheck")
    avoid_source_backend: bool = Field(False, alias="avoidSourceBackend")

    @field_validator("address")
    @classmethod
    def _own(cls, value: str | None) -> str | None:
        return _ipv4_address(value) if value is not None else None  # load balancers are IPv4 only yet


class EgressGateway(Strict):
    destinations: list[str] = Field(min_length=1)
    address: str | None = None
    node_addresses: dict[str, str] = Field({}, alias="nodeAddresses")

    @field_validator("destinations")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        return [_network(v) for v in value]

    @field_validator("address")
    @classmethod
    def _gateway(cls, value: str | None) -> str | None:
        return _ipv4_address(value) if value is not None else None  # egress gateways are IPv4 only yet

    @field_validator("node_addresses")
    @classmethod
    def _elastic(cls, value: dict[str, str]) -> dict[str, str]:
        return {node: _ipv4_address(address) for node, address in value.items()}


class IpMasqAgent(Strict):
    non_masquerade_cidrs: list[str] = Field(alias="nonMasqueradeCIDRs")
    nodes: list[str] | None = None

    @field_validator("non_masquerade_cidrs")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        return [_network(v) for v in value]


class Target(Strict):
    """Where a probe goes: a Service (by name and port, through one of its frontends) or an address."""

    service: str | None = None
    namespace: str = "default"
    port: Port | str
    via: Literal["clusterIP", "nodePort", "externalIP", "loadBalancer"] = "clusterIP"
    node: str | None = None
    address: Address | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Target:
        kinds = [k for k in ("service", "address") if getattr(self, k)]
        if self.node and not self.service:
            kinds.append("node")
        if len(kinds) != 1:
            raise ValueError("give exactly one of `service`, `address` or `node` (a node's own IP)")
        if self.via == "nodePort" and self.service and not self.node:
            raise ValueError("`via: nodePort` needs `node`: which node's address to send to")
        if not self.service and not isinstance(self.port, int):
            raise ValueError("a literal address needs a numeric `port`")
        return self


class SourceByPlacement(Strict):
    """The source a backend sees, depending on whether it runs on the node the connection entered through."""

    local: str
    remote: str


class Conditional(Strict):
    """Applies to the variants whose matrix values match `when` (every variant when empty), and to the kernels
    its `kernel:` condition names (lab/describe/kernel_when.py: a list is a range)."""

    when: dict[str, str | bool | list[str]] = {}

    @field_validator("when", mode="before")
    @classmethod
    def _when_as_text(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        # A list is a range of kernels (`kernel: [">=5.10", "<6.1"]`), checked by resolve.
        return {k: v if isinstance(v, list) else _axis_value(v) for k, v in value.items()}


# `expect: observe` (or `outcome: observe`): no expectation yet; the probe records what the kernel did and passes
# whatever it was. What `lab import` writes for each probe, for the user to turn into expectations.
OBSERVE = "observe"


class Expectation(Conditional):
    # Several outcomes: any of them, where a kernel timer decides which one comes (e.g. dropped until a neighbour
    # entry fails, unreachable after); never `delivered`, whose details are judged.
    outcome: Outcome | list[Outcome] | Literal["observe"] = "delivered"

    @field_validator("outcome")
    @classmethod
    def _outcomes(cls, value: Outcome | list[Outcome]) -> Outcome | list[Outcome]:
        if isinstance(value, list):
            if not value or len(set(value)) != len(value) or "delivered" in value:
                raise ValueError("a list of outcomes names two or more failures, each once (not delivered)")
            return value[0] if len(value) == 1 else value
        return value

    backend: str | list[str] | None = None
    node: str | None = None
    source: str | SourceByPlacement | None = None
    entries: list[str] = []
    # Every attempt reaches the same backend (session affinity, a source-hashing scheduler); with attempts.
    same_backend: bool = Field(False, alias="sameBackend")
    # Every attempt after the first did (true) or did not (false: it had expired) follow the client's ClientIP
    # affinity, as the rule that looks the client up says; with attempts (and `pause` to outwait the timeout).
    affinity: bool | None = None


class Step(Conditional):
    """Something done to the cluster before a probe: a command on nodes, or a change kube-proxy syncs."""

    run: str | None = None  # a command line, run in each node's network namespace
    nodes: list[str] = []  # with run: where (default: every node)
    # With run: seconds the command may take on each node before its processes are killed and the run stops
    # (default: resolve.steps.DEFAULT_STEP_TIMEOUT).
    timeout: int | None = Field(None, ge=1, le=3600)
    delete: str | None = None  # "Service/[NAMESPACE/]NAME" or "Pod/[NAMESPACE/]NAME"
    scale: str | None = None  # "Deployment/[NAMESPACE/]NAME", with replicas
    replicas: int | None = Field(None, ge=0)
    set_pod: str | None = Field(None, alias="set")  # "Pod/[NAMESPACE/]NAME", with ready and/or terminating
    ready: bool | None = None
    terminating: bool | None = None
    restart: Literal["kube-proxy"] | None = None

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        actions = [a for a in (self.run, self.delete, self.scale, self.set_pod, self.restart) if a is not None]
        if len(actions) != 1:
            raise ValueError(
                "a step is one of `run: COMMAND` (with `nodes: [...]`), `delete: Service/NAME` or `delete: Pod/NAME`, "
                "`scale: Deployment/NAME` with `replicas: N`, `set: Pod/NAME` with `ready:` or `terminating:`, "
                "`restart: kube-proxy`"
            )
        if self.nodes and self.run is None:
            raise ValueError("`nodes` goes with `run`")
        if self.timeout is not None and self.run is None:
            raise ValueError("`timeout` goes with `run`: the time its command may take")
        if (self.replicas is None) != (self.scale is None):
            raise ValueError("`scale: Deployment/NAME` and `replicas: N` go together")
        if self.set_pod is not None and self.ready is None and self.terminating is None:
            raise ValueError("`set: Pod/NAME` needs `ready: true|false` or `terminating: true`")
        if self.set_pod is None and (self.ready is not None or self.terminating is not None):
            raise ValueError("`ready` and `terminating` go with `set: Pod/NAME`")
        if self.terminating is False:
            raise ValueError("a terminating pod does not stop terminating: `terminating: true` only")
        return self


class Probe(Strict):
    name: str
    source: str | None = Field(None, alias="from")
    to: Target | None = None
    protocol: Literal["TCP", "UDP"] | None = None
    expect: Expectation | list[Expectation]
    why: str = ""
    # What the run's summary line answers of this probe, from its evidence (lab/report/answer.py): `source`, which
    # address the backend saw and what rewrote it; `fate`, what became of the connection and what decided it.
    question: Literal["source", "fate"] | None = None

    @field_validator("expect", mode="before")
    @classmethod
    def _observe(cls, value: Any) -> Any:
        return {"outcome": OBSERVE} if value == OBSERVE else value

    attempts: int = Field(1, ge=1, le=64)
    # Milliseconds between attempts (to outwait a sessionAffinity timeout); with attempts.
    pause: int | None = Field(None, ge=1, le=60000)
    # A fixed source port: probes from the same actor and port to the same destination continue one flow (the
    # same conntrack entry while it lives), as a statsd or DNS client that keeps its socket does.
    source_port: int | None = Field(None, alias="sourcePort", ge=1, le=65535)
    # A crafted packet from the backend's side on the probe's connection (TCP) once it is established:
    # outOfWindow = a segment 1 GiB ahead of the client's window (kubernetes#74839); lateRetransmission = data
    # the client acknowledged long ago, behind its window; backendReset = a RST in the window.
    craft: Literal["outOfWindow", "lateRetransmission", "backendReset"] | None = None
    # Send the SYN or datagram from this address instead of the actor's own (a spoofed source, built with scapy):
    # one host stands for many sources; the captures tell whether a backend answered.
    source_address: str | None = Field(None, alias="sourceAddress")
    # Bytes of data the probe sends (TCP: one request on the established connection, DF set as the kernel sets
    # it for TCP; UDP: one datagram's payload), to find where a too-big packet dies (path MTU).
    size: int | None = Field(None, ge=1, le=MAX_PAYLOAD)
    # The family the probe travels in: to the Service's clusterIP, NodePort on the node's address, or external IP
    # of that family (a literal `to.address` says its own). None: the Service's primary family.
    family: Literal["IPv4", "IPv6"] | None = None
    # The probe's connection stays open after it and exchanges on its own every `every` ms (TCP: a request on the
    # established connection; UDP: a datagram from the same source port) while later steps and probes run.
    keep: bool = False
    every: int | None = Field(None, ge=20, le=10000)
    # Check the flow the earlier probe of this name kept: one more exchange on it, and what it met since.
    flow: str | None = None
    before: list[Step] = []

    @model_validator(mode="after")
    def _flow_or_target(self) -> Probe:
        if self.flow is not None:
            # Whatever was written, its default included: `keep: true` once compared equal to `attempts`' 1.
            given = [name for name, attribute in _FLOW_INHERITS if attribute in self.model_fields_set]
            if given:
                raise ValueError(
                    f"a probe with `flow:` checks the flow it names, from that probe's source to its target: "
                    f"leave out {', '.join(given)}"
                )
        elif self.source is None or self.to is None:
            raise ValueError("a probe needs `from:` and `to:` (or `flow: NAME` to check a flow an earlier probe kept)")
        if self.every is not None and not self.keep:
            raise ValueError("`every` goes with `keep: true`")
        if self.pause is not None and self.attempts == 1:
            raise ValueError("`pause` is the time between attempts: give attempts: N")
        if self.keep and self.attempts != 1:
            raise ValueError("`keep: true` keeps one connection: leave attempts out")
        if self.keep and self.craft:
            raise ValueError("`craft` acts on a connection of its own: it cannot be kept")
        if self.source_address is not None and (self.keep or self.craft):
            raise ValueError("`sourceAddress` sends one packet no socket owns: it cannot be kept or crafted on")
        if self.size is not None and (self.keep or self.craft or self.source_address is not None):
            raise ValueError("`size` sets the data of a plain probe: it goes without keep, craft or sourceAddress")
        return self

    @field_validator("source_address")
    @classmethod
    def _spoofed(cls, value: str | None) -> str | None:
        return _address(value) if value is not None else None


# What a flow check takes from the probe that kept the flow: (field as written, attribute).
_FLOW_INHERITS = (
    ("from", "source"),
    ("to", "to"),
    ("protocol", "protocol"),
    ("sourcePort", "source_port"),
    ("attempts", "attempts"),
    ("pause", "pause"),
    ("craft", "craft"),
    ("keep", "keep"),
    ("sourceAddress", "source_address"),
    ("size", "size"),
    ("family", "family"),
)


MatrixValue = str | bool


class ScenarioFile(Strict):
    name: Name
    description: str = ""
    cluster: Cluster = Cluster()
    nodes: list[Node] = Field(min_length=1)
    external_hosts: list[ExternalHost] = Field([], alias="externalHosts")
    load_balancers: list[LoadBalancer] = Field([], alias="loadBalancers")
    egress_gateway: EgressGateway | None = Field(None, alias="egressGateway")
    ip_masq_agent: IpMasqAgent | None = Field(None, alias="ipMasqAgent")
    workload: list[Manifest] = []
    probes: list[Probe] = Field(min_length=1)
    matrix: dict[str, list[MatrixValue]] = {}

    @field_validator("matrix", mode="before")
    @classmethod
    def _matrix_as_text(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {k: [_axis_value(v) for v in vs] if isinstance(vs, list) else vs for k, vs in value.items()}
