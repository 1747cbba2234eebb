"""kube-proxy's whole sync on one node as one pure function, the way its syncProxyRules computes everything
before it writes: from the topology it ran (`before`), the one it is told (`after`) and what install read of
the node's kernel, the plan of what to write, delete and keep — the rules (iptables-restore text or nftables
transaction), ipvs' virtual-server changes, kube-ipvs0's addresses and the sets' members by their
differences, the real servers its graceful termination deletes or keeps at weight 0, and the conntrack
entries its cleanup deletes, each with the reason kube-proxy of that release would log. install applies the
plan as it is; it decides nothing.

A dual-stack node's two proxiers are planned alike: each family's rules, and each one's conntrack cleanup.

The kernel state a plan is made of is read when the sync starts; the 1.32+ reconciler's UDP entries are listed
after the rules are written (`listed_after_rules`), as kube-proxy's syncProxyRules ends with the cleanup
(conntrack.CleanStaleEntries, which lists the table then): an entry a datagram confirmed un-NATed while the
rules changed is the reconciler's to delete in the same sync."""

from __future__ import annotations

from dataclasses import dataclass, replace

from lab.describe.families import Family
from lab.describe.topology import Topology
from lab.render.dataplane import NodeDataplane, ipvs_dataplane, ipvs_rules, node_dataplane
from lab.render.kubeproxy.adapter import service_ports
from lab.render.kubeproxy.conntrack import Cleanup, ConntrackDeletion, cleanup, combined, deletions
from lab.render.kubeproxy.graceful import RealServerDecision, graceful_terminations
from lab.render.kubeproxy.ipvs import IpvsRules
from lab.render.kubeproxy.ipvs_resync import address_changes, family_state, set_changes
from lab.render.kubeproxy.kernel_state import KernelState, Reads
from lab.render.kubeproxy.versions import Release


@dataclass(frozen=True)
class SyncPlan:
    """What one node's kube-proxy writes, deletes and keeps in a sync, in the order it does it: addresses and
    set members (ipvs), the rules, the virtual servers, the graceful termination check, then conntrack."""

    dataplane: NodeDataplane  # the rules, transaction or ipvsadm lines as render wrote them
    addresses_added: tuple[str, ...] = ()  # on kube-ipvs0
    addresses_deleted: tuple[str, ...] = ()
    set_changes: tuple[str, ...] = ()  # ipset restore lines for `ipset restore -exist`: creates, del, add
    real_servers: tuple[RealServerDecision, ...] = ()  # left at weight 0: deleted or kept
    cleanup: Cleanup = Cleanup()  # the conntrack cleanup's decisions (why: kube-proxy's log lines)
    conntrack: tuple[ConntrackDeletion, ...] = ()  # the deletions they come to
    # ipvs on a dual-stack node: the secondary family's proxier's own addresses, set members, virtual servers and
    # graceful terminations (its dataplane is this plan's dataplane.other_family); the conntrack parts are here.
    other_family: SyncPlan | None = None


def reads(topo: Topology) -> Reads:
    """What a node's kube-proxy looks at in the kernel when it syncs: the 1.32+ reconciler the UDP conntrack
    entries, ipvs mode its real servers, kube-ipvs0's addresses and the sets' members."""
    release = Release.of(topo.cluster.kube_version)
    return Reads(conntrack=release.conntrack_reconciler, ipvs=topo.cluster.proxy_mode == "ipvs")


def sync(before: Topology, after: Topology, node: str, state: KernelState, restart: bool = False) -> SyncPlan:
    """kube-proxy's sync on `node` after running `before`, told `after` (restart: a new kube-proxy process, whose
    first sync knows nothing before for its conntrack cleanup), given what the node's kernel holds."""
    release = Release.of(after.cluster.kube_version)
    decided = combined(
        [
            cleanup(service_ports(before, node, f), service_ports(after, node, f), release, restart=restart, family=f)
            for f in after.cluster.families
        ]
    )
    conntrack = deletions(decided, state.conntrack)
    if after.cluster.proxy_mode != "ipvs":
        return SyncPlan(node_dataplane(after, node, before), cleanup=decided, conntrack=conntrack)
    primary, *others = after.cluster.families
    plan = _ipvs_sync(before, after, node, state, primary)
    if not others:
        return replace(plan, cleanup=decided, conntrack=conntrack)
    other = _ipvs_sync(before, after, node, state, others[0])
    both = replace(plan.dataplane, other_family=other.dataplane)
    return replace(plan, dataplane=both, other_family=other, cleanup=decided, conntrack=conntrack)


def listed_after_rules(plan: SyncPlan, state: KernelState) -> SyncPlan:
    """The plan with its conntrack deletions decided from the entries listed once its rules were written."""
    return replace(plan, conntrack=deletions(plan.cleanup, state.conntrack))


def _ipvs_sync(before: Topology, after: Topology, node: str, state: KernelState, family: Family) -> SyncPlan:
    """The sync of the ipvs proxier of one family on the node."""
    old, new = ipvs_rules(before, node, family), ipvs_rules(after, node, family)
    return ipvs_proxier_sync(ipvs_dataplane(after, node, new, old, family), old, new, state)


def ipvs_proxier_sync(plane: NodeDataplane, old: IpvsRules, new: IpvsRules, state: KernelState) -> SyncPlan:
    """One ipvs proxier's sync from `old` to `new`, `plane` being what it writes (ipvs_dataplane), decided from what
    it sees of the node's kernel: its own family's part of it (family_state)."""
    seen = family_state(state, plane.family)
    added, deleted = address_changes(plane.dummy_addresses, seen.bound_addresses)
    return SyncPlan(
        plane,
        addresses_added=added,
        addresses_deleted=deleted,
        set_changes=set_changes(plane.ipsets, seen.set_members),
        real_servers=graceful_terminations(seen.real_servers, old, new),
    )
