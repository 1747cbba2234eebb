"""What a later ipvs sync changes of what the kernel holds besides the virtual servers: kube-ipvs0's addresses
and the ipsets' members, each by its difference, as kube-proxy changes them (what stays is never away for a
moment)."""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import ip_interface

from lab.render.kubeproxy.addresses import Family
from lab.render.kubeproxy.kernel_state import KernelState

_VERSIONS: dict[Family, int] = {"IPv4": 4, "IPv6": 6}


def family_state(state: KernelState, family: Family) -> KernelState:
    """What the ipvs proxier of `family` sees of what a dual-stack node's one IPVS table and one kube-ipvs0 hold: its
    own family's addresses (GetLocalAddresses keeps isValidForSet's family, S1.27 to S1.30 netlink_linux.go;
    getLegacyBindAddr skips the other family's, S1.20 to S1.26) and its own family's virtual servers'
    real servers (cleanLegacyService's "Not our family"; each proxier's graceful termination manager holds only
    the real servers it weighted down). openshift/sdn vendor/k8s.io/kubernetes/pkg/proxy/ipvs/ at
    64fa36f66f2b314c0c770b641c3b681fe4425354 (1.20) and 70cefcddca885822c5e7214eaf9f0da33eccb26b (1.30).
    ipvsadm writes an IPv6 virtual server's address in brackets. The sets' members stay whole: each proxier's
    sets have names of their own (KUBE-6-... for IPv6), and set_changes reads only its own sets'."""
    version = _VERSIONS[family]
    return KernelState(
        conntrack=state.conntrack,
        real_servers=tuple(s for s in state.real_servers if s.service.startswith("[") == (family == "IPv6")),
        bound_addresses=tuple(a for a in state.bound_addresses if ip_interface(a).version == version),
        set_members=state.set_members,
    )


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
