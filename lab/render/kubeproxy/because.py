"""Why kube-proxy wrote a rule that changes or chooses a packet: the Kubernetes field or kube-proxy setting behind
it, kept beside the rules as the renderers write them (a renderer knows why it writes each rule, as kube-proxy's
comments say), so that a probe's diagnosis (lab/probe/diagnosis.py) can name the setting behind each rule its
packets met, and a what-if can change that one.

Only the rules that decide a packet's addresses are described: those that mark it for masquerade, and those that
choose its endpoint. How a rule reads in the kernel's own listing or trace (`says`) is the renderer's to say, since
the texts it writes are what the kernel shows back."""

from __future__ import annotations

from dataclasses import dataclass

MARK = "mark"  # the rule marks the packet for kube-proxy's masquerade in POSTROUTING
CHOICE = "choice"  # the rule chooses the packet's endpoint
MASQUERADES = "masquerades"  # the chain's masquerading rule does it unmarked: whatever reaches it, as it is written


@dataclass(frozen=True)
class Setting:
    """A Kubernetes field or kube-proxy setting and its value where it wrote a rule: `owner` is whose it is (a
    Service, `kube-proxy`, `kubelet`), `meaning` what it made kube-proxy do, in words."""

    name: str  # externalTrafficPolicy, internalTrafficPolicy, masqueradeAll, clusterCIDR, sessionAffinity
    value: str
    owner: str
    meaning: str = ""

    def __str__(self) -> str:
        return f"{self.name} {self.value}"


@dataclass(frozen=True)
class Because:
    """One rule a renderer wrote and why: where it stands (table, chain), the fragments its text shows in the
    kernel's listing or trace (every one of them), what it does (`kind`: MARK or CHOICE) and the setting behind it;
    a CHOICE says how it picks (`choice`: "at random among 3 endpoints")."""

    kind: str
    table: str
    chain: str
    says: tuple[str, ...]
    setting: Setting | None
    choice: str = ""

    def matches(self, table: str, chain: str, text: str) -> bool:
        """Whether the rule the kernel showed as `text` in `table` `chain` is this one."""
        return table == self.table and chain == self.chain and all(part in text for part in self.says)


def service_owner(port_name: str) -> str:
    """`Service default/web` for kube-proxy's port name `default/web:http` (or an unnamed port's `default/web`)."""
    return f"Service {port_name.rsplit(':', 1)[0] if '/' in port_name else port_name}"


def external_policy(port_name: str, value: str, owner: str = "") -> Setting:
    """The Service's externalTrafficPolicy as it wrote the masquerade of its external destinations; `owner` for a
    rule written for several Services at once (ipvs' ipset rules)."""
    meaning = (
        "kube-proxy masquerades what reaches the Service from outside, since its endpoint may be on another node"
        if value == "Cluster"
        else "kube-proxy masquerades the node's own traffic to the Service's external addresses"
    )
    return Setting("externalTrafficPolicy", value, owner or service_owner(port_name), meaning)


def local_policy(port_name: str, internal: bool) -> Setting:
    """The traffic policy that limits a Service's endpoints to the node's own."""
    name = "internalTrafficPolicy" if internal else "externalTrafficPolicy"
    return Setting(name, "Local", service_owner(port_name), "only the node's own endpoints are chosen")


def masquerade_all() -> Setting:
    return Setting("masqueradeAll", "true", "kube-proxy", "kube-proxy masquerades all traffic to a ClusterIP")


def local_detector(cidr: str) -> Setting:
    """kube-proxy's local-traffic detector (detectLocalMode ClusterCIDR): traffic from outside `cidr` is no pod's."""
    meaning = "kube-proxy's local-traffic detector: a ClusterIP packet from outside the pod network is masqueraded"
    return Setting("clusterCIDR", cidr, "kube-proxy", meaning)


def hairpin_masquerade(port_name: str | None) -> Setting:
    """The endpoint chain's first rule (nftables from 1.36: one rule for every Service, `port_name` None): an
    endpoint reaching itself through its Service is masqueraded, whatever the settings (kube-proxy writes it for
    every endpoint), so that the answer comes back through the node."""
    meaning = "kube-proxy masquerades an endpoint reaching itself through its Service, always"
    owner = service_owner(port_name) if port_name else "kube-proxy"
    return Setting("kube-proxy's hairpin masquerade", "(always written)", owner, meaning)


def session_affinity(port_name: str, timeout: int) -> Setting:
    meaning = f"a client goes back to the endpoint it had within {timeout} s"
    return Setting("sessionAffinity", "ClientIP", service_owner(port_name), meaning)


def at_random(count: int) -> str:
    return "the only endpoint" if count == 1 else f"at random among {count} endpoints"


def kubelet_hairpin_mode(mode: str) -> Setting:
    """kubelet's --hairpin-mode, which decides whether a pod's bridge port sends a frame back out of itself."""
    meaning = {
        "hairpin-veth": "the bridge sends a frame back out of the port it came in by",
        "promiscuous-bridge": "the bridge is promiscuous and hands the frame up to the node",
    }.get(mode, "the bridge never sends a frame back out of the port it came in by")
    return Setting("hairpinMode", mode, "kubelet", meaning)


def topology_hints(port_name: str, mode: str, where: str) -> Setting:
    """Topology-aware routing: the EndpointSlice's hints (`mode` "zone" or "node") left only the endpoints hinted
    for this node's zone or the node itself (`where`)."""
    meaning = f"only the endpoints whose {mode} hints name {where} are chosen"
    return Setting(f"topology hints ({mode})", where, service_owner(port_name), meaning)
