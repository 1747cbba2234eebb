"""The cluster's Service ranges as `kubectl get servicecidrs -o yaml` gives them (networking.k8s.io ServiceCIDR):
what kube-proxy's ServiceCIDR watch delivers, and what the nftables proxier drops unallocated traffic to from 1.33
(lab/render/kubeproxy/versions.py, Release.knows_service_cidrs). The API server makes the default one, named
"kubernetes", from its --service-cluster-ip-range; an administrator may add more.

A ServiceCIDR's spec.cidrs holds one or two CIDRs, at most one per family (ValidateServiceCIDR, kubernetes/
kubernetes pkg/apis/networking/validation/validation.go): the import refuses what the API server refuses. The
lab's serviceCIDR holds one network per family: of several ServiceCIDRs of a family, the one holding every
ClusterIP of it is taken (the default one first), else the smallest network holding them all, and the import says
which."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from lab.describe.families import Family, family_of
from lab.describe.kubectl.addresses import covering
from lab.describe.kubectl.ipfields import network
from lab.describe.kubectl.objects import Obj

KIND = "ServiceCIDR"
DEFAULT_NAME = "kubernetes"  # the API server's own, from --service-cluster-ip-range
_BITS: dict[Family, int] = {"IPv4": 32, "IPv6": 128}


@dataclass(frozen=True)
class ServiceRange:
    obj: Obj
    cidr: str


def read_service_ranges(objs: list[Obj], notes: list[str]) -> dict[Family, list[ServiceRange]]:
    """Every ServiceCIDR's networks by family, the default one first."""
    ranges: dict[Family, list[ServiceRange]] = {}
    for obj in sorted(objs, key=lambda o: o.name != DEFAULT_NAME):
        items = obj.each(("spec", "cidrs"))
        if not 1 <= len(items) <= 2:
            said = "none" if not items else f"{len(items)}"
            raise obj.error(("spec", "cidrs"), f"expected one or two CIDRs (one of each family), got {said}")
        seen: set[Family] = set()
        for path, value in items:
            cidr = network(obj, path, value, notes)
            family = family_of(cidr)
            assert family is not None  # network() read it as one
            if family in seen:
                raise obj.error(path, f"a second {family} CIDR: a ServiceCIDR holds at most one of each family")
            seen.add(family)
            ranges.setdefault(family, []).append(ServiceRange(obj, cidr))
    return ranges


def service_range(family: Family, ranges: list[ServiceRange], cluster_ips: list[str], notes: list[str]) -> str:
    """The scenario's serviceCIDR of `family` from the cluster's ServiceCIDRs of it: the one holding every
    ClusterIP of the family, else the smallest network holding them all and the ClusterIPs (the lab's
    serviceCIDR is one network per family)."""
    holding = next((r for r in ranges if _holds(r.cidr, cluster_ips)), None)
    if holding and len(ranges) == 1:
        return holding.cidr
    others = ", ".join(f"{r.obj.name} {r.cidr}" for r in ranges if r is not holding)
    if holding:
        notes.append(
            f"lab import: {family} ServiceCIDR(s) {others} left out: serviceCIDR is {holding.obj.name}'s "
            f"{holding.cidr}, which holds every {family} ClusterIP (the lab's serviceCIDR is one network per "
            "family), so where nftables kube-proxy drops traffic to their unallocated addresses the lab routes it on"
        )
        return holding.cidr
    chosen = str(covering([*cluster_ips, *(r.cidr for r in ranges)], _BITS[family]))
    notes.append(
        f"lab import: no {family} ServiceCIDR holds every {family} ClusterIP: serviceCIDR is {chosen}, the smallest "
        f"network holding them all ({others}), so nftables kube-proxy's drop of unallocated addresses covers more "
        "in the lab than in the cluster"
    )
    return chosen


def _holds(cidr: str, addresses: list[str]) -> bool:
    net = ipaddress.ip_network(cidr)
    return all(ipaddress.ip_address(a) in net for a in addresses)
