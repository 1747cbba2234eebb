"""The resolved model of one scenario variant: every name bound to an address.

Everything the later stages need is here and already checked; no stage after
`describe` reads the scenario file again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from lab.describe.families import Family, endpoint, family_of
from lab.describe.refs import ObjectRef
from lab.describe.releases import gate_default
from lab.describe.schema import Outcome

Axis = str | bool


def axis_text(value: Axis) -> str:
    """A matrix value as the scenario file spells it (YAML booleans are lower case)."""
    return str(value).lower() if isinstance(value, bool) else value


def variant_label(values: Iterable[tuple[str, Axis]]) -> str:
    """A variant's matrix values, as every report names it: "proxyMode=ipvs, kubeVersion=1.30" ("" for none)."""
    return ", ".join(f"{axis}={axis_text(value)}" for axis, value in values)


def of_family(family: Family, *values: str) -> str:
    """The value of this family among one object's per-family values ("" when it has none)."""
    return next((v for v in values if v and family_of(v) == family), "")


DEFAULT_MTU = 1500  # a link's MTU where the scenario sets none, as Ethernet's
TUNNEL_NAME = "tunl0"  # how reports name a node's tunnel address (node1/tunl0), whatever device carries it
FLANNEL_DEVICE = "flannel.1"  # flannel's VXLAN device (flannel.<VNI>, VNI 1 by default), its name in reports too


def tunnel_name(cni: str) -> str:
    """How reports name a node's tunnel address: flannel's device by its own name, routed-tunnel's as tunl0."""
    return FLANNEL_DEVICE if cni == "flannel" else TUNNEL_NAME


@dataclass(frozen=True)
class NodeSpec:
    name: str
    ip: str
    pod_cidr: str
    bridge_ip: str  # cni0's address: the pods' gateway ("" with cni routed-tunnel: no bridge)
    labels: tuple[tuple[str, str], ...] = ()
    tunnel_ip: str = ""  # cni routed-tunnel and flannel: the tunnel device's own address, the pod block's first
    mtu: int = DEFAULT_MTU  # the node's link to the underlay (eth0 and the underlay's port to it)
    # Dual-stack: the secondary family's node IP, pod block (spec.podCIDRs[1]) and cni0 address ("" single-stack).
    # ip, pod_cidr and bridge_ip are the primary family's, whichever it is (IPv6 in an IPv6-only cluster).
    secondary_ip: str = ""
    secondary_pod_cidr: str = ""
    secondary_bridge_ip: str = ""
    stand_in: bool = False  # not built: its pods are addresses in the stand-in namespace (Topology.stand_ins)

    @property
    def addresses(self) -> tuple[str, ...]:
        """The node's own interface addresses (kube-proxy's ipvs NodePorts listen on each), every family's."""
        own = (self.ip, self.bridge_ip, self.tunnel_ip, self.secondary_ip, self.secondary_bridge_ip)
        return tuple(a for a in own if a)

    def ip_of(self, family: Family) -> str:
        """The node IP of this family ("" for none): what that family's kube-proxy proxier is given."""
        return of_family(family, self.ip, self.secondary_ip)

    def pod_cidr_of(self, family: Family) -> str:
        return of_family(family, self.pod_cidr, self.secondary_pod_cidr)


@dataclass(frozen=True)
class PortSpec:
    port: int
    protocol: Literal["TCP", "UDP"]
    name: str | None = None


@dataclass(frozen=True)
class PodSpec:
    name: str  # how the lab names it: its name, or NAMESPACE/NAME when a pod of another namespace has that name
    namespace: str
    node: str
    ip: str
    labels: tuple[tuple[str, str], ...]
    ports: tuple[PortSpec, ...]
    host_network: bool = False
    ready: bool = True
    terminating: bool = False  # deleted, still shutting down (its endpoints stay, serving as readiness says)
    owner: str = ""  # "Deployment/NAME" or "ReplicaSet/NAME" for a replica
    secondary_ip: str = ""  # dual-stack: status.podIPs[1], the secondary family's ("" single-stack)

    @property
    def ips(self) -> tuple[str, ...]:
        """status.podIPs: every family's address, the primary first."""
        return (self.ip, self.secondary_ip) if self.secondary_ip else (self.ip,)

    @property
    def kube_name(self) -> str:
        """Its name in Kubernetes (metadata.name)."""
        return ObjectRef.parse(self.name).name


@dataclass(frozen=True)
class RouteSpec:
    to: str  # a CIDR
    via: tuple[str, ...]  # next hops (addresses on the underlay); more than one is a multipath (ECMP) route


@dataclass(frozen=True)
class ExternalSpec:
    name: str
    ip: str
    network: str = ""  # a router's own LAN (hosts `behind` it live there)
    lan_ip: str = ""  # the router's address in `network`: its LAN hosts' gateway
    routes: tuple[RouteSpec, ...] = ()
    masquerade: bool = False  # a router that SNATs what it forwards from its LAN to its underlay address
    behind: str = ""  # the router this host sits behind ("" = on the underlay)
    secondary_ip: str = ""  # dual-stack underlay: its address of the secondary family ("" for none)

    def ip_of(self, family: Family) -> str:
        return of_family(family, self.ip, self.secondary_ip)

    @property
    def is_router(self) -> bool:
        return bool(self.network or self.routes)


@dataclass(frozen=True)
class FrontendSpec:
    """One VIP:port a load balancer listens on, and the NodePort (and health check) behind it."""

    service: str  # namespace/name
    vip: str
    port: int
    protocol: Literal["TCP", "UDP"]
    node_port: int
    health_check_node_port: int  # Local: kube-proxy's per-Service health check; 0: kube-proxy's healthz (10256)
    behind_egress: bool = False  # the VIP is reached through the egress gateway: sources are public addresses


@dataclass(frozen=True)
class LoadBalancerSpec:
    """An external L4 load balancer, in the fabric (the underlay's router), as a cloud provides one."""

    name: str
    address: str  # its own address: the source of its health checks, and of traffic with source=snat
    source: Literal["preserve", "snat"]
    forward: Literal["nodePort", "vip"]  # DNAT to a node's NodePort, or route the VIP unchanged to a node
    pool: tuple[str, ...]  # backend nodes, in order of preference
    health_check: bool
    avoid_source_backend: bool  # never pick a backend whose address is the packet's source
    frontends: tuple[FrontendSpec, ...]


@dataclass(frozen=True)
class AnnouncementSpec:
    """A LoadBalancer VIP inside the underlay, announced on it by one node's speaker (MetalLB's layer 2 mode): the
    speaker answers ARP for the VIP with the node's MAC, and the packet enters that node unchanged."""

    balancer: str  # the `loadBalancers` entry's name
    service: str  # namespace/name
    vip: str
    announcer: str  # the node whose speaker answers; "" when no node may announce (nobody answers)
    how: str  # why that node: pinned, or MetalLB's election among which candidates


@dataclass(frozen=True)
class EgressSpec:
    """An egress gateway in the fabric: traffic from the cluster to `destinations` leaves with a public address."""

    destinations: tuple[str, ...]
    address: str  # for every node without its own ("" = none)
    node_addresses: tuple[tuple[str, str], ...] = ()  # (node, its public address): an elastic IP per node

    def address_of(self, node: str) -> str:
        return dict(self.node_addresses).get(node, self.address)


@dataclass(frozen=True)
class MasqAgentSpec:
    """ip-masq-agent: nat IP-MASQ-AGENT on these nodes, RETURN for non-masquerade CIDRs, MASQUERADE the rest."""

    non_masquerade_cidrs: tuple[str, ...]
    nodes: tuple[str, ...]


ZONE_LABEL = "topology.kubernetes.io/zone"
# The Service annotations that turn topology-aware routing on (the second one deprecated in 1.27).
TOPOLOGY_MODE = "service.kubernetes.io/topology-mode"
TOPOLOGY_AWARE_HINTS = "service.kubernetes.io/topology-aware-hints"


@dataclass(frozen=True)
class Hints:
    """An endpoint's topology hints: the zones and nodes it is meant for."""

    zones: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class EndpointSpec:
    """One EndpointSlice endpoint: ready = serving and not terminating (the slice's conditions)."""

    pod: str
    node: str
    ip: str
    port: int
    ready: bool
    serving: bool = True
    terminating: bool = False
    zone: str = ""  # its node's topology.kubernetes.io/zone, or the hand-written slice's zone
    # As written in a hand-written slice; None: the EndpointSlice controller of the release decides (render).
    hints: Hints | None = None


@dataclass(frozen=True)
class ServicePortSpec:
    name: str
    port: int
    protocol: Literal["TCP", "UDP"]
    node_port: int
    endpoints: tuple[EndpointSpec, ...]


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    namespace: str
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"]
    cluster_ip: str
    ports: tuple[ServicePortSpec, ...]
    external_ips: tuple[str, ...] = ()
    load_balancer_source_ranges: tuple[str, ...] = ()
    external_policy: Literal["Cluster", "Local"] = "Cluster"
    internal_policy: Literal["Cluster", "Local"] = "Cluster"
    health_check_node_port: int = 0
    affinity_timeout: int = 0
    ingress_ips: tuple[str, ...] = ()  # every status.loadBalancer.ingress IP (also ipMode Proxy): what the LB serves
    # Those of them with ipMode: Proxy, which a proxy answers: whether kube-proxy still programs them is its
    # release's business (render: Release.honours_ip_mode).
    proxy_ingress_ips: tuple[str, ...] = ()
    traffic_distribution: str = ""  # spec.trafficDistribution
    # The topology annotations as written (service.kubernetes.io/topology-mode, .../topology-aware-hints): which
    # one kube-proxy reads, and which values it takes, is its release's business (render).
    topology_annotations: tuple[tuple[str, str], ...] = ()
    # As the API server stores them (lab/describe/families.py): the policy, and the families in order, the first
    # cluster_ip's. kube-proxy runs a proxier per family; each programs the Service in its own family only.
    ip_family_policy: Literal["SingleStack", "PreferDualStack", "RequireDualStack"] = "SingleStack"
    ip_families: tuple[Family, ...] = ("IPv4",)
    secondary_cluster_ip: str = ""  # spec.clusterIPs[1]: the ipFamilies[1] address of a dual-stack Service

    @property
    def cluster_ips(self) -> tuple[str, ...]:
        """spec.clusterIPs: one per family of ip_families, in its order. external_ips, ingress_ips and the ports'
        endpoints hold every family's addresses mixed; each family's proxier takes its own, as kube-proxy's do."""
        return (self.cluster_ip, self.secondary_cluster_ip) if self.secondary_cluster_ip else (self.cluster_ip,)

    def cluster_ip_of(self, family: Family) -> str:
        return of_family(family, *self.cluster_ips)

    def port(self, ref: int | str) -> ServicePortSpec | None:
        return next((p for p in self.ports if ref in (p.port, p.name)), None)


ENTRY = "entry"  # in an expectation: the node the connection entered the cluster through


def entry_suffix(name: str | None) -> str | None:
    """What follows ENTRY in a name relative to the entry node ("" for `entry`, "/eth0" for `entry/eth0`); None
    for any other name."""
    if name and (name == ENTRY or name.startswith(ENTRY + "/")):
        return name[len(ENTRY) :]
    return None


@dataclass(frozen=True)
class Expected:
    outcome: Outcome
    backends: tuple[str, ...] = ()  # any of these pods may answer
    node: str | None = None  # a node, or "entry"
    source: str | None = None  # the name the user wrote ("node2", "node1/cni0", "client", or an IP)
    source_ip: str | None = None  # None when the source is relative to the entry node
    # Relative to the entry node, resolved per attempt: the source when the backend runs on the entry
    # node, and when it runs elsewhere ("entry", "entry/tunl0", or any absolute name).
    source_local: str | None = None
    source_remote: str | None = None
    entries: tuple[str, ...] = ()  # nodes that must each be entered by at least one attempt
    same_backend: bool = False  # every attempt must reach the same backend
    affinity: bool | None = None  # every attempt after the first did / did not follow the ClientIP affinity
    also: tuple[Outcome, ...] = ()  # other outcomes accepted (a kernel timer decides which one comes)
    kernel: str = ""  # the kernel condition that chose this expectation, with the release: "5.10.0-26-amd64 <6.1"
    observe: bool = False  # `expect: observe`: every outcome passes; the probe records what happened

    @property
    def outcomes(self) -> tuple[Outcome, ...]:
        return (self.outcome, *self.also)

    @property
    def relative(self) -> bool:
        names = (self.node, self.source, self.source_local, self.source_remote)
        return bool(self.entries) or any(entry_suffix(n) is not None for n in names)


@dataclass(frozen=True)
class StepSpec:
    """Done to the running cluster before a probe: `argv` on `nodes`; a change to the workload, after which the
    cluster runs `pods` and `services` (kube-proxy's next sync on every node sees it); or a restart of
    kube-proxy on every node."""

    text: str  # what the step does, for reports and errors
    argv: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    timeout: float = 0  # with argv: seconds the command may run on each node before it is killed
    origin: str = ""  # "FILE:LINE" of the step, for errors at run time
    pods: tuple[PodSpec, ...] | None = None
    services: tuple[ServiceSpec, ...] | None = None
    restart: bool = False

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class ProbeSpec:
    name: str
    source: str  # an actor: pod, node or external host
    target: str  # human description, e.g. "svc web:80 via nodePort on node2"
    dst_ip: str
    dst_port: int
    protocol: Literal["TCP", "UDP"]
    expected: Expected
    why: str = ""
    question: str = ""  # "source" or "fate": what the run's summary line answers ("": none asked)
    attempts: int = 1  # connections to send (each from a new source port); every one is judged
    pause_ms: int = 0  # between attempts
    before: tuple[StepSpec, ...] = ()  # run in order before the probe; what they change stays for later probes
    source_port: int = 0  # 0: a new port per attempt; else every attempt from this port (one flow)
    craft: str = ""  # a crafted segment on the established connection: a name in lab/probe/craft.py CRAFTS
    source_address: str = ""  # the SYN or datagram is sent from this address, not the actor's own (spoofed)
    keep_every: int = 0  # ms: the connection stays open, exchanging every keep_every ms (0: closed after)
    flow: str = ""  # the probe whose kept flow this one checks (source and destination are that probe's)
    size: int = 0  # bytes of data: one TCP request on the established connection, or one datagram (0: the default)
    # `attempts` not given, on a probe of new connections: send more until every endpoint the load balancing that
    # picked the first one's chose among has been reached (lab/judge/attempts.py), so that no verdict is the draw's.
    every_choice: bool = False

    @property
    def destination(self) -> str:
        """Where the probe goes, as a socket's address is written ("[fd00::a]:80" for IPv6)."""
        return endpoint(self.dst_ip, self.dst_port)

    @property
    def family(self) -> Family:
        """The family the probe travels in: its destination's (a probe's `family:` chose that address)."""
        return family_of(self.dst_ip) or "IPv4"


@dataclass(frozen=True)
class ClusterSpec:
    proxy_mode: str
    kube_version: str
    iptables_backend: Literal["nft", "legacy"]
    cluster_cidr: str
    kube_proxy_cluster_cidr: bool
    service_cidr: str
    hairpin_mode: str
    underlay: str
    gateway_ip: str
    br_netfilter: bool
    cni: Literal["bridge", "routed-tunnel", "flannel"] = "bridge"
    tunnel: Literal["auto", "ipip", "vxlan"] = "auto"  # routed-tunnel's device: auto = ipip if the kernel has it
    tunnel_mtu: int = 0  # routed-tunnel's device MTU (0: the kernel's, the link's less the encapsulation)
    nat_outgoing: bool = True  # routed-tunnel: its IP pool's natOutgoing (Felix's cali-nat-outgoing)
    ipvs_bind_lb_ips: bool = True  # False: kube-proxy (ipvs) leaves LB IPs off kube-ipvs0 (TKE's patch)
    # kube-proxy's conntrack configuration: tcpBeLiberal, and UDP timeouts in seconds (0: the kernel's own).
    tcp_be_liberal: bool = False
    udp_timeout: int = 0
    udp_stream_timeout: int = 0
    # kube-proxy's flags as a scenario sets them (KubeProxyConfiguration field names in the scenario).
    masquerade_all: bool = False
    masquerade_bit: int = 14
    node_port_addresses: tuple[str, ...] = ()  # CIDRs and keywords (primary, localhost, all) as written
    iptables_localhost_nodeports: bool = True
    # kube-proxy's featureGates as the scenario sets them, (gate, on) sorted by gate; which release knows which is
    # lab/describe/releases.py's, what each changes lab/render/kubeproxy/versions.py's.
    feature_gates: tuple[tuple[str, bool], ...] = ()
    ipvs_scheduler: str = "rr"
    ipvs_strict_arp: bool = False
    # Dual-stack: the secondary family's networks and gateway ("" single-stack); cluster_cidr, service_cidr,
    # underlay and gateway_ip are the primary family's, whichever it is.
    secondary_cluster_cidr: str = ""
    secondary_service_cidr: str = ""
    secondary_underlay: str = ""
    secondary_gateway_ip: str = ""
    # cluster.tools: (role, tool, Debian release) of each writer that runs a release's own tool ("kubeProxy" or
    # "host"; "nft", "iptables-nft" or "iptables-legacy"), and the nftables script the host's writer loads before
    # kube-proxy's first sync ("" for none); the iptables backend the host's writers write in, and the rules
    # (iptables-restore's input) the host adds to it ("" for none).
    tools: tuple[tuple[str, str, str], ...] = ()
    host_nftables: str = ""
    host_iptables_backend: str = "nft"
    host_iptables_rules: str = ""
    # iptablesBackend: wrapper: which backend kube-proxy's image's iptables-wrapper chose, and why ("" when the
    # scenario named the backend).
    iptables_backend_why: str = ""

    @property
    def families(self) -> tuple[Family, ...]:
        """The cluster's families, the primary first: ("IPv4",), ("IPv6",), or both in either order."""
        primary = family_of(self.cluster_cidr) or "IPv4"
        secondary = family_of(self.secondary_cluster_cidr) if self.secondary_cluster_cidr else None
        return (primary, secondary) if secondary else (primary,)

    def cluster_cidr_of(self, family: Family) -> str:
        return of_family(family, self.cluster_cidr, self.secondary_cluster_cidr)

    def service_cidr_of(self, family: Family) -> str:
        return of_family(family, self.service_cidr, self.secondary_service_cidr)

    @property
    def service_cidrs(self) -> tuple[str, ...]:
        """The Service CIDRs of every family, the primary first: the API server's --service-cluster-ip-range, which
        its default ServiceCIDR object ("kubernetes") holds and kube-proxy's ServiceCIDR watch delivers."""
        return tuple(cidr for cidr in (self.service_cidr, self.secondary_service_cidr) if cidr)

    def gate(self, name: str) -> bool:
        """Whether kube-proxy runs with the feature gate on: as set, else the release's default (an alpha gate off, a
        beta one on)."""
        return dict(self.feature_gates).get(name, gate_default(self.kube_version, name))


@dataclass(frozen=True)
class Topology:
    scenario: str
    file: str
    variant: tuple[tuple[str, Axis], ...]
    cluster: ClusterSpec
    nodes: tuple[NodeSpec, ...]
    pods: tuple[PodSpec, ...]
    externals: tuple[ExternalSpec, ...]
    services: tuple[ServiceSpec, ...]
    probes: tuple[ProbeSpec, ...]
    description: str = ""
    lb_routes: tuple[tuple[str, str], ...] = field(default=())  # (VIP, node IP) the gateway forwards to
    load_balancers: tuple[LoadBalancerSpec, ...] = ()
    announcements: tuple[AnnouncementSpec, ...] = ()  # layer 2 load balancers' VIPs, each with its speaker's node
    egress: EgressSpec | None = None
    masq_agent: MasqAgentSpec | None = None
    # Replicas a later `scale:` step creates: built at the start (network up, backends listening, idle), in no
    # Service's endpoints until that step.
    pending_pods: tuple[PodSpec, ...] = ()
    warnings: tuple[str, ...] = ()  # what is allowed and likely unintended (a Service selecting no pod yet)
    # The release of the kernel the variant is described for (`uname -r`, read once by the pipeline); "" for none.
    kernel: str = ""
    # cluster.tools' commands as the runner fetched them (lab.api): (role, tool, the argv that runs it); the stages
    # never fetch (lab/install/tools.py: tool_command).
    tool_commands: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    # A sliced cluster's nodes that are not built: no namespace, no rules; their endpoints are addresses in
    # their podCIDRs, answered from one stand-in namespace (lab/realize/standins.py).
    stand_ins: tuple[NodeSpec, ...] = ()

    @property
    def has_actors(self) -> bool:
        """Whether the fabric runs more than a plain gateway (load balancers, egress gateway, routers)."""
        return bool(self.load_balancers or self.egress or any(e.is_router for e in self.externals))

    def node(self, name: str) -> NodeSpec:
        return next(n for n in self.nodes if n.name == name)

    @property
    def built_pods(self) -> tuple[PodSpec, ...]:
        """Every pod realize builds: those running at the start and those a later step creates."""
        return (*self.pods, *self.pending_pods)

    def pod(self, name: str) -> PodSpec:
        return next(p for p in self.built_pods if p.name == name)

    def pods_on(self, node: str) -> tuple[PodSpec, ...]:
        return tuple(p for p in self.built_pods if p.node == node)

    def address_of(self, name: str, family: Family | None = None) -> str | None:
        """The address a name stands for: one address_names gives, or a node's NODE/eth0; None for no such name. A
        dual-stack name stands for its address of `family` (a probe's), else for its primary one, the first given."""
        by_name: dict[str, list[str]] = {}
        for ip, n in self.address_names().items():
            by_name.setdefault(n, []).append(ip)
        by_name.update({f"{n.name}/eth0": [a for a in (n.ip, n.secondary_ip) if a] for n in self.nodes})
        addresses = by_name.get(name)
        if not addresses:
            return None
        return (of_family(family, *addresses) if family else "") or addresses[0]

    def address_names(self) -> dict[str, str]:
        """Address → the name a user would call it by, to report what a backend saw."""
        names: dict[str, str] = {self.cluster.gateway_ip: "gateway"}
        if self.cluster.secondary_gateway_ip:
            names[self.cluster.secondary_gateway_ip] = "gateway"
        for node in self.nodes:
            names[node.ip] = node.name
            if node.bridge_ip:
                names[node.bridge_ip] = f"{node.name}/cni0"
            if node.secondary_ip:
                names[node.secondary_ip] = node.name
            if node.secondary_bridge_ip:
                names[node.secondary_bridge_ip] = f"{node.name}/cni0"
            if node.tunnel_ip:
                names[node.tunnel_ip] = f"{node.name}/{tunnel_name(self.cluster.cni)}"
        for ext in self.externals:
            names[ext.ip] = ext.name
            if ext.secondary_ip:
                names[ext.secondary_ip] = ext.name
            if ext.lan_ip:
                names[ext.lan_ip] = f"{ext.name}/lan"
        for lb in self.load_balancers:
            names.setdefault(lb.address, lb.name)
        if self.egress:
            if self.egress.address:
                names.setdefault(self.egress.address, "egress")
            for node, address in self.egress.node_addresses:
                names.setdefault(address, f"{node}/public")
        for pod in self.built_pods:
            if not pod.host_network:
                names.update(dict.fromkeys(pod.ips, pod.name))
        return names

    @property
    def not_yet_built(self) -> str:
        """Why the kernel stages cannot run this variant yet ("" when they can). IPv6 and dual-stack clusters run
        in iptables, nftables and ipvs modes (describe refuses cni routed-tunnel with IPv6 at its field);
        kubelet's promiscuous-bridge dedup chain is written for IPv4 frames only (`ebtables -p IPv4`)."""
        if "IPv6" in self.cluster.families and self.cluster.hairpin_mode == "promiscuous-bridge":
            return (
                f"{self.file}: hairpinMode promiscuous-bridge with IPv6 is not built on the kernel yet: kubelet's"
                " dedup chain against the bridge's duplicate frames is modelled for IPv4 frames only; use"
                " hairpin-veth with an IPv6 or dual-stack cluster"
            )
        return ""

    @property
    def variant_label(self) -> str:
        return variant_label(self.variant) or "default"
