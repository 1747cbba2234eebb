"""The nodes and pods of a kubectl dump as the lab builds them: a node's address, podCIDR and labels; a pod's
node, address and container ports; which CNI the cluster runs, from its pods."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from lab.describe.families import Family, family_of
from lab.describe.kubectl import ipfields
from lab.describe.kubectl.objects import Obj

ZONE_LABEL = "topology.kubernetes.io/zone"
FAMILIES: tuple[Family, Family] = ("IPv4", "IPv6")
_TOPOLOGY_LABELS = (ZONE_LABEL, "topology.kubernetes.io/region")

# CNIs by the label or name prefix of their node agent's pods in kube-system (or a namespace of their own, below),
# and how the lab builds them. The lab has three pod networks: `bridge` (cni0 per node, routes between nodes),
# `routed-tunnel` (Calico's) and `flannel` (cni0, its vxlan backend and its iptables rules).
_CNIS = (
    ("calico-node", "Calico", "routed-tunnel", ""),
    ("kube-flannel", "flannel", "flannel", "flannel.1 and its chains, as its ConfigMap kube-flannel-cfg says"),
    ("kindnet", "kindnet", "bridge", ""),
    ("cilium", "Cilium", None, "its eBPF datapath (and kube-proxy replacement) is not reproduced"),
    ("weave-net", "Weave Net", None, "its overlay is not reproduced"),
    ("antrea-agent", "Antrea", None, "its Open vSwitch datapath is not reproduced"),
    ("kube-router", "kube-router", None, "its datapath is not reproduced"),
    ("aws-node", "the AWS VPC CNI", None, "pods take VPC addresses, not their node's podCIDR"),
)
# The CNIs whose agent masquerades pods' traffic out of the pod network as ip-masq-agent does: kindnet's chain
# KIND-MASQ-AGENT (kubernetes-sigs/kind images/kindnetd/cmd/kindnetd/masq.go at
# 128196ceac83e3d21ec909230ed49fd87b8ea5e4: from nat POSTROUTING for a destination not LOCAL, RETURN for the pod
# subnet, MASQUERADE the rest), built as the scenario's ipMasqAgent.
_MASQUERADING = ("kindnet",)
# Where the CNIs' pods run: kube-system, and kube-flannel, where flannel's current manifests put its DaemonSet
# kube-flannel-ds (flannel-io/flannel's Documentation/kube-flannel.yml at d01746e88e76, of 2020, still has
# kube-system), and calico-system, where the Tigera operator runs Calico's calico-node DaemonSet (projectcalico/calico
# node/tests/k8st/test_base.py at 94bd1d5b0e04459d4d1c83653e0335a9201248b8 reads it there).
_CNI_NAMESPACES = ("kube-system", "kube-flannel", "calico-system")


@dataclass(frozen=True)
class Node:
    obj: Obj
    name: str
    addresses: dict[Family, str]  # its InternalIP of each family (else its first address of it)
    pod_cidrs: dict[Family, str]  # spec.podCIDRs by family, in the node's order (the cluster's primary first)
    labels: dict[str, str]

    @property
    def zone(self) -> str:
        return self.labels.get(ZONE_LABEL, "")

    def ip_of(self, family: Family) -> str:
        return self.addresses[family]

    def pod_cidr_of(self, family: Family) -> str | None:
        return self.pod_cidrs.get(family)


@dataclass(frozen=True)
class Pod:
    obj: Obj
    namespace: str
    name: str
    node: str
    ips: dict[Family, str]  # status.podIPs by family
    host_network: bool
    running: bool
    ports: tuple[dict[str, Any], ...]  # container ports: (container, name, containerPort, protocol)

    def ip_of(self, family: Family) -> str | None:
        return self.ips.get(family)


@dataclass
class Cni:
    value: str = "bridge"
    notes: list[str] = field(default_factory=list)
    # Its agent masquerades what leaves the pod network, as ip-masq-agent does (kindnet's KIND-MASQ-AGENT).
    masquerades: bool = False


def read_node(obj: Obj, notes: list[str]) -> Node | None:
    """A node with its address and podCIDR of each family, or None (said in `notes`) when it has no address."""
    # An InternalIP or ExternalIP is an address (kubelet's, or the cloud's); a Hostname or DNS entry is a name.
    addresses = [
        (a.get("type"), ipfields.address(obj, (*path, "address"), a.get("address"), notes))
        for path, a in obj.each(("status", "addresses"))
        if isinstance(a, dict) and a.get("type") in ("InternalIP", "ExternalIP")
    ]
    ips: dict[Family, str] = {}
    for family in FAMILIES:
        of_family = [(kind, a) for kind, a in addresses if family_of(a) == family]
        ip = next((a for kind, a in of_family if kind == "InternalIP"), None) or next((a for _, a in of_family), None)
        if ip is not None:
            ips[family] = ip
    if not ips:
        notes.append(obj.note(("status", "addresses"), "no IP address: the node is left out"))
        return None
    cidrs = obj.each(("spec", "podCIDRs")) or [(("spec", "podCIDR"), obj.get(("spec", "podCIDR"), str))]
    pod_cidrs: dict[Family, str] = {}
    for path, cidr in cidrs:
        if cidr is not None:
            net = ipfields.network(obj, path, cidr, notes)
            pod_cidrs.setdefault(FAMILIES[":" in net], net)
    labels = {k: v for k, v in obj.get(("metadata", "labels"), dict, {}).items() if isinstance(v, str)}
    return Node(obj, obj.name, ips, pod_cidrs, labels)


def read_pod(obj: Obj, notes: list[str]) -> Pod:
    listed = [((*path, "ip"), p.get("ip")) for path, p in obj.each(("status", "podIPs")) if isinstance(p, dict)]
    ips: dict[Family, str] = {}
    for k, (path, text) in enumerate([(("status", "podIP"), obj.get(("status", "podIP"), str)), *listed]):
        if text is not None:  # a pod not yet given an address (Pending) has none
            ip = ipfields.address(obj, path, text, notes)
            if k or not listed:  # podIP is podIPs[0] where both are given (the API server keeps them so)
                ips.setdefault("IPv6" if ":" in ip else "IPv4", ip)
    ports = []
    for cpath, container in obj.each(("spec", "containers")):
        if not isinstance(container, dict):
            raise obj.error(cpath, "expected a container (a mapping)")
        for ppath, _ in obj.each((*cpath, "ports")):
            number = obj.get((*ppath, "containerPort"), int)
            if number is None:
                raise obj.error((*ppath, "containerPort"), "missing: expected a port number")
            ports.append(
                {
                    "container": obj.get((*cpath, "name"), str, "main"),
                    "name": obj.get((*ppath, "name"), str),
                    "containerPort": number,
                    "protocol": obj.get((*ppath, "protocol"), str, "TCP"),
                }
            )
    return Pod(
        obj,
        obj.namespace or "default",
        obj.name,
        obj.get(("spec", "nodeName"), str, ""),
        ips,
        obj.get(("spec", "hostNetwork"), bool, False),
        obj.get(("status", "phase"), str, "") == "Running",
        tuple(ports),
    )


def detect_cni(pods: list[Obj]) -> Cni:
    """Which CNI the cluster's pods of kube-system (or kube-flannel, calico-system) say it runs, and what of it the
    lab does not reproduce."""
    cni = Cni()
    seen = set()
    for obj in pods:
        if obj.namespace not in _CNI_NAMESPACES:
            continue
        labels = obj.get(("metadata", "labels"), dict, {})
        marks = {obj.name, *(v for v in labels.values() if isinstance(v, str))}
        for mark, title, value, caveat in _CNIS:
            if title in seen or not any(m == mark or m.startswith(mark + "-") for m in marks):
                continue
            seen.add(title)
            if value is not None:
                cni.value = value
            cni.masquerades = cni.masquerades or title in _MASQUERADING
            how = f"built as cni: {value}" if value else "the lab builds cni: bridge instead"
            cni.notes.append(obj.note((), f"the cluster runs {title}: {how}" + (f"; {caveat}" if caveat else "")))
    if not seen:
        cni.notes.append(
            "lab import: no CNI recognised among the pods of kube-system, kube-flannel and calico-system: the lab "
            "builds cni: bridge"
        )
    return cni


def topology_labels(node: Node) -> dict[str, str]:
    return {k: v for k, v in node.labels.items() if k in _TOPOLOGY_LABELS}


def pod_ip_problem(ip: str, pod_cidr: str, cni: str) -> str | None:
    """Why the lab cannot give a pod this address on a node of this podCIDR, of the same family (None when it
    can)."""
    net = ipaddress.ip_network(pod_cidr)
    address = ipaddress.ip_address(ip)
    if address not in net:
        if cni == "routed-tunnel":  # calico-ipam's blocks; host-local IPAM alone takes the node's podCIDR
            why = "Calico's IPAM gives it from its pool's blocks, and the lab builds each node's podCIDR as its block"
        else:
            why = "a CNI with its own address blocks?"
        return f"{ip} is outside its node's podCIDR {pod_cidr} ({why})"
    reserved = {net.network_address, net.broadcast_address}
    if cni in ("bridge", "flannel"):
        reserved.add(net.network_address + 1)  # cni0's
    if address in reserved:
        return f"{ip} is an address the lab's {cni} CNI keeps for itself in {pod_cidr}"
    return None


def is_ipv4(text: str) -> bool:
    return family_of(text) == "IPv4"
