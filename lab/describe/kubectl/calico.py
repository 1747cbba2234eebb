"""Calico's IP pools as lab import reads them: IPPool objects of crd.projectcalico.org/v1 (`kubectl get
ippools.crd.projectcalico.org -o yaml`) or projectcalico.org/v3 (through Calico's API server). The lab builds one
pool, the cluster's pod network (clusterCIDR), with the natOutgoing of the pools that hold it; everything else a
pool says that the lab does not build is said in the notes.

The fields as projectcalico/calico at v3.31.0 (94bd1d5b0e04459d4d1c83653e0335a9201248b8) defines them,
api/pkg/apis/projectcalico/v3/ippool.go: natOutgoing false, ipipMode and vxlanMode Never when unset; allowedUses
(Workload and Tunnel when unset; a pool only for LoadBalancer addresses holds no pod). calico-node's default pool
(node/pkg/lifecycle/startup/startup.go) has natOutgoing true unless CALICO_IPV4POOL_NAT_OUTGOING says false."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from lab.describe.kubectl import ipfields
from lab.describe.kubectl.objects import Obj

KIND = "IPPool"
_API_GROUPS = ("crd.projectcalico.org/", "projectcalico.org/")
_MODES = ("Always", "CrossSubnet", "Never")
_READ = ("cidr", "natOutgoing", "ipipMode", "vxlanMode", "allowedUses")  # the pool's fields the lab builds from


@dataclass(frozen=True)
class IPPool:
    obj: Obj
    cidr: str
    nat_outgoing: bool
    ipip_mode: str
    vxlan_mode: str


def read_pool(obj: Obj, notes: list[str]) -> IPPool:
    cidr = ipfields.network(obj, ("spec", "cidr"), obj.get(("spec", "cidr"), str), notes)
    modes = {}
    for field in ("ipipMode", "vxlanMode"):
        mode = obj.get(("spec", field), str, "Never")
        if mode not in _MODES:
            raise obj.error(("spec", field), f"expected one of {', '.join(_MODES)}, got {mode[:60]!r}")
        modes[field] = mode
    return IPPool(obj, cidr, obj.get(("spec", "natOutgoing"), bool, False), modes["ipipMode"], modes["vxlanMode"])


def _holds_pods(pool: IPPool, notes: list[str]) -> bool:
    """A pool pods take addresses from: not one for LoadBalancer addresses only."""
    uses = [use for _, use in pool.obj.each(("spec", "allowedUses"))]
    if uses and "Workload" not in uses:
        notes.append(pool.obj.note(("spec", "allowedUses"), f"{', '.join(map(str, uses))}: holds no pod: not modelled"))
        return False
    return True


def _say_unread(obj: Obj, notes: list[str]) -> None:
    """The pool's other fields (disabled, nodeSelector, blockSize, ...): the lab builds every node's podCIDR as its
    block of the one pool, so what they choose is not modelled; said, not silently dropped."""
    for field in obj.get(("spec",), dict, {}):
        if field not in _READ:
            notes.append(obj.note(("spec", field), f"not modelled (the lab builds the pool from {', '.join(_READ)})"))


def calico_fields(objs: list[Obj], cluster_cidr: str, notes: list[str]) -> dict[str, Any]:
    """The scenario's cluster fields that Calico's pools set (natOutgoing), each said in `notes`, as is what the lab
    does not build of them. Pools holding the pod network that disagree on natOutgoing are refused: the lab builds
    one pool."""
    network = ipaddress.ip_network(cluster_cidr)
    holding: list[IPPool] = []
    for obj in objs:
        if not obj.get(("apiVersion",), str, "").startswith(_API_GROUPS):
            notes.append(obj.note(("apiVersion",), "not read: not Calico's IPPool (crd.projectcalico.org)"))
            continue
        pool = read_pool(obj, notes)
        _say_unread(obj, notes)
        net = ipaddress.ip_network(pool.cidr)
        if net.version != network.version:
            notes.append(obj.note(("spec", "cidr"), f"{pool.cidr}: the lab builds Calico for IPv4 only: not modelled"))
        elif not net.overlaps(network):  # type: ignore[arg-type]
            notes.append(
                obj.note(
                    ("spec", "cidr"),
                    f"{pool.cidr} is outside the pod network {cluster_cidr}, the one pool the lab builds: not modelled "
                    "(Felix leaves pods' traffic to it unmasqueraded; the lab masquerades it with natOutgoing)",
                )
            )
        elif _holds_pods(pool, notes):
            holding.append(pool)
    if not holding:
        notes.append(
            "lab import: no Calico IPPool of the pod network in the input (kubectl get ippools.crd.projectcalico.org "
            f"-o yaml gives them): natOutgoing true for {cluster_cidr}, as the default pool calico-node makes"
        )
        return {}
    first = holding[0]
    for other in holding[1:]:
        if other.nat_outgoing != first.nat_outgoing:
            where = f"{first.obj.src.file} at line {first.obj.src.line_of((*first.obj.path, 'spec'))}"
            raise other.obj.error(
                ("spec", "natOutgoing"),
                f"{str(other.nat_outgoing).lower()}, but {first.obj.ident} ({where}) says "
                f"{str(first.nat_outgoing).lower()}: the lab builds the pod network as one pool with one natOutgoing",
            )
    for pool in holding:
        notes.append(pool.obj.note(("spec",), _pool_said(pool, cluster_cidr)))
    return {"natOutgoing": first.nat_outgoing}


def _pool_said(pool: IPPool, cluster_cidr: str) -> str:
    """How the lab built the pool: its natOutgoing, and how its traffic crosses between nodes."""
    if pool.nat_outgoing:
        nat = "natOutgoing true: Felix's cali-nat-outgoing masquerades what pods send out of the pools"
    else:
        nat = "natOutgoing false: pods' traffic out of the pools keeps their addresses"
    modes = {"ipipMode": pool.ipip_mode, "vxlanMode": pool.vxlan_mode}
    always = [field for field, mode in modes.items() if mode == "Always"]
    if always:
        crossing = f"{always[0]} Always: the lab's tunnel (ipip where the kernel has it, else VXLAN: the same sources)"
    else:
        said = ", ".join(f"{field} {mode}" for field, mode in modes.items())
        crossing = (
            f"{said}: Calico routes between the nodes of one subnet without encapsulation, the lab through its tunnel: "
            "a source masqueraded between nodes is the node's tunnel address in the lab, the node's own on the cluster"
        )
    return f"{pool.cidr} built as the pool of cni: routed-tunnel ({cluster_cidr}); {nat}; {crossing}"
