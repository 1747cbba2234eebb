"""What a later ipvs sync changes of what the kernel holds besides the virtual servers: kube-ipvs0's addresses
and the ipsets' members, each by its difference, as kube-proxy changes them (what stays is never away for a
moment)."""

from __future__ import annotations

from collections.abc import Sequence


def address_changes(wanted: Sequence[str], bound: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(added, deleted) on kube-ipvs0: each Service's address bound if missing (syncService's EnsureAddressBind),
    then those no Service has any more unbound (getLegacyBindAddr, cleanLegacyService), openshift/sdn
    vendor/k8s.io/kubernetes/pkg/proxy/ipvs/proxier.go at 1b01a9ce. A Service's address never leaves on the way:
    while it is away its packets are routed past IPVS, and conntrack confirms an un-NATed entry that outlives
    the sync."""
    added = tuple(a for a in wanted if a not in bound)
    deleted = tuple(sorted(set(bound) - set(wanted)))
    return added, deleted


def set_lines(text: str) -> list[str]:
    """kube-proxy's set list as ipset restore reads it: its comment lines (ipset knows no comments) left out."""
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def set_changes(text: str, members: Sequence[str]) -> tuple[str, ...]:
    """A later sync's sets, as kube-proxy's syncIPSetEntries changes them (kubernetes/kubernetes
    pkg/proxy/ipvs/ipset.go at 02df552b): each set created if missing, the members a set of kube-proxy's has
    and should not deleted, then the missing ones added; a member kept is never absent on the way (a flush and
    refill would empty the set for a moment). `members`: the kernel's, as `ipset save` prints them. As ipset
    restore lines, for `ipset restore -exist`: the creates, then the changes."""
    lines = set_lines(text)
    creates = [line for line in lines if line.startswith("create ")]
    ours = {line.split()[1] for line in creates}
    wanted = [line for line in lines if line.startswith("add ")]
    has = set(members)
    stale = [f"del {line.removeprefix('add ')}" for line in sorted(has - set(wanted)) if line.split()[1] in ours]
    return (*creates, *stale, *(line for line in wanted if line not in has))
