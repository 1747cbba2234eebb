"""install: a node's rendered dataplane loaded with the real tools, in the order kube-proxy needs them (its first
sync), and a later sync's plan (lab/render/kubeproxy/sync.py) applied as it is, from the kernel state read
before it (lab/install/kernel_state.py). Nothing here decides what kube-proxy does."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from lab.describe.resolve.restore_text import tables_named
from lab.describe.topology import Topology
from lab.install.conntrack import delete_entries
from lab.install.host_rules import HostRules
from lab.install.kernel_state import read_state
from lab.install.sync_failure import committed_tables, failed_sync, sync_failed, xtables_refusal
from lab.install.tools import (
    Command,
    InstallError,
    Xtables,
    ip_batch,
    ipset_apply,
    ipset_restore_all,
    iptables_restore,
    ipvsadm_restore,
    nft_apply,
    run_command,
    tool_command,
    xtables,
)
from lab.realize.build import Realized
from lab.realize.enter import write_sysctls
from lab.realize.terminate import deferred
from lab.render.dataplane import IPVS_DEVICE, NodeDataplane
from lab.render.kubeproxy.kernel_state import KernelState, Reads
from lab.render.kubeproxy.nftables import TABLE, TABLE_FAMILY
from lab.render.kubeproxy.sync import SyncPlan

T = TypeVar("T")


@dataclass(frozen=True)
class Writers:
    """Who writes a node's rules, and with what: kube-proxy's nft and iptables (a Debian release's where
    cluster.tools names one, else this machine's), and the node's other writers' rules, added again to the tables
    kube-proxy's restore replaced (None: no other writer)."""

    nft: Command = ("nft",)
    xt: Xtables = Xtables()
    host: HostRules | None = None

    @classmethod
    def of(cls, topo: Topology) -> Writers:
        """A cluster's: its kube-proxy's tools and its host's rules, as cluster.tools names them."""
        return cls(tool_command(topo, "kubeProxy", "nft"), xtables(topo, "kubeProxy"), HostRules.of(topo))


THIS_MACHINE = Writers()  # kube-proxy with this machine's nft and iptables-nft, alone on its node


def load(ns: str, plane: NodeDataplane, writers: Writers = THIS_MACHINE) -> tuple[str, ...]:
    """Load a node's dataplane, kube-proxy's first sync, with the real tools in the order kube-proxy needs them;
    a dual-stack node's proxiers one after the other, each its own family's rules (ip6tables-restore, the ip6
    table). What it says: a refused sync."""
    if plane.mode == "ipvs":
        return _load_ipvs(ns, plane, writers)
    return _sync_each_proxier(ns, plane, writers, resync=False)


def _load_ipvs(ns: str, plane: NodeDataplane, writers: Writers) -> tuple[str, ...]:
    """Each ipvs proxier's first sync (a dual-stack node runs one per family): the one kube-ipvs0, made once, gets
    each proxier's addresses; each loads its own sets and rules; the second proxier's virtual servers are added
    to the one IPVS table beside the first's, not restored over them (ipvsadm-restore clears the table)."""
    device = [f"link add {IPVS_DEVICE} type dummy", f"link set {IPVS_DEVICE} up"]
    said: tuple[str, ...] = ()
    for proxier in plane.proxiers:
        ip_batch(ns, device + [f"addr add {a} dev {IPVS_DEVICE}" for a in proxier.dummy_addresses])
        device = []
        ipset_restore_all(ns, proxier.ipsets)
        refused = _restore(ns, proxier, writers, resync=False)
        if proxier.ipvs:
            ipvsadm_restore(ns, _ipvs_changes(proxier.ipvs, refused), clear=proxier is plane)
        _ipvs_sysctls(ns, proxier)
        said += refused
    return said


def apply(ns: str, plan: SyncPlan, writers: Writers = THIS_MACHINE) -> tuple[str, ...]:
    """Apply a later sync's plan (lab/render/kubeproxy/sync.py) as it is: kube-ipvs0's new addresses and the sets'
    member changes, the rules as a whole (one transaction per proxier, as kube-proxy's restore), the virtual
    servers' changes (connections to unchanged real servers live on), the addresses of deleted Services, the real
    servers graceful termination deletes; in ipvs mode, each proxier's in turn (plan.other_family: a dual-stack
    node's second). The conntrack deletions come after every node's rules (clean_conntrack). What it says: a refused
    sync, the real servers graceful termination deletes or keeps."""
    plane = plan.dataplane
    if plane.mode == "ipvs":
        others = _apply_ipvs(ns, plan.other_family, writers) if plan.other_family else ()
        return (*_apply_ipvs(ns, plan, writers), *others)
    return _sync_each_proxier(ns, plane, writers, resync=True)


def _apply_ipvs(ns: str, plan: SyncPlan, writers: Writers) -> tuple[str, ...]:
    """One ipvs proxier's sync plan, applied."""
    plane = plan.dataplane
    if plan.addresses_added:
        ip_batch(ns, [f"addr add {a} dev {IPVS_DEVICE}" for a in plan.addresses_added])
    ipset_apply(ns, plan.set_changes)
    said = _restore(ns, plane, writers, resync=True)
    if plane.ipvs:
        ipvsadm_restore(ns, _ipvs_changes(plane.ipvs, said), clear=False)
    if plan.addresses_deleted and not said:  # unbound only after a restore that succeeded (cleanLegacyService)
        ip_batch(ns, [f"addr del {a} dev {IPVS_DEVICE}" for a in plan.addresses_deleted])
    for decision in plan.real_servers:
        if decision.delete:
            run_command(ns, ("ipvsadm", *decision.ipvsadm_args))
    _ipvs_sysctls(ns, plane)
    return (*said, *(decision.reason for decision in plan.real_servers))


def _sync_each_proxier(ns: str, plane: NodeDataplane, writers: Writers, resync: bool) -> tuple[str, ...]:
    """An iptables or nftables node's rules, each family's proxier synced on its own (kube-proxy runs one per
    family; one refused leaves the other's sync standing): what they said, the primary's first."""
    if plane.mode == "nftables":
        return tuple(line for proxier in plane.proxiers for line in _nft_sync(ns, proxier, resync, writers.nft))
    return tuple(line for proxier in plane.proxiers for line in _restore(ns, proxier, writers, resync))


def _restore(ns: str, plane: NodeDataplane, writers: Writers, resync: bool) -> tuple[str, ...]:
    """kube-proxy's one iptables-restore (ip6tables-restore for the IPv6 proxier) of its tables, then the host's
    rules of the tables it replaced; a refusal is its failed sync, said, not an error of the lab, and replaced only
    the tables it committed before the refused line."""
    said: tuple[str, ...] = ()
    try:
        iptables_restore(ns, plane.iptables, writers.xt, plane.family)
        replaced: Collection[str] = tables_named(plane.iptables)
    except InstallError as refused:
        said = (xtables_refusal(plane.mode, str(refused), plane.iptables, resync),)
        replaced = committed_tables(str(refused), plane.iptables)
    if writers.host:
        writers.host.after_kube_proxy(ns, plane, replaced)
    return said


def _ipvs_changes(text: str, said: tuple[str, ...]) -> str:
    """The virtual server changes kube-proxy makes: IPVS is synced before the restore, and stale virtual servers
    are deleted only after one that succeeded (`said` names a refused one)."""
    return "".join(f"{line}\n" for line in text.splitlines() if not (said and line.startswith("-D ")))


def _ipvs_sysctls(ns: str, plane: NodeDataplane) -> None:
    # The ip_vs sysctls exist once ipvsadm has loaded the module.
    write_sysctls(ns, dict(plane.sysctls))


def _nft_sync(ns: str, plane: NodeDataplane, resync: bool, nft: tuple[str, ...]) -> tuple[str, ...]:
    """Load kube-proxy's transaction (a later sync replaces the table in the same transaction: added first, so
    that the delete holds also where an earlier sync failed and left none); a refusal is kube-proxy's failed
    sync, said in words, not an error of the lab. nft applies a transaction whole or not at all, so the node keeps
    what its last good sync wrote (nothing, at the first); kube-proxy logs "nftables sync failed", marks the next
    sync a full one and is run again after its sync period, with the same Services and so the same refusal
    (syncProxyRules in pkg/proxy/nftables/proxier.go at
    kiarashazarnia/kubernetes@4426ed5de01a08d75530f9e4c4814f6a28d806eb; #139515 for a comment over 128 bytes)."""
    table = f"table {TABLE_FAMILY[plane.family]} {TABLE}"  # the IPv6 proxier's is the ip6 family's
    replacing = f"add {table}\ndelete {table}\n" if resync else ""
    try:
        nft_apply(ns, replacing + plane.nft, nft=nft)
    except InstallError as refused:
        kept = "the rules of its last good sync stay" if resync else "the node has no Service rules"
        why = f"{_refusal(str(refused))} — {kept}; it retries every sync period and fails again"
        return (f"{sync_failed('nftables')}: {why}",)
    return ()


def _refusal(message: str) -> str:
    """nft's reason, and the object it refused: `comment too long, 128 characters maximum allowed (element ip
    kube-proxy no-endpoint-services commented "ns/svc:port...")`."""
    reason = re.search(r"Error: ([^\n]+)", message)
    line = re.search(r"rejected line \d+ of the [^:]+: ([^\n]+)", message)
    said = reason.group(1).strip() if reason else message.splitlines()[0]
    if line:
        words = line.group(1).split()
        comment = re.search(r'comment "([^"]*)"', line.group(1))
        what = " ".join(words[1:5]) if words[:1] == ["add"] else line.group(1)[:60]
        said += f" ({what}" + (f' commented "{comment.group(1)[:40]}..."' if comment else "") + ")"
    return said


def _per_node(realized: Realized, nodes: Sequence[str], one: Callable[[str, str], T]) -> list[T]:
    """`one(node, its namespace)` for every node, side by side (one at a time per core: each is the tools'
    processes, as each node's kube-proxy syncs on its own), in node order; the first failure is raised."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="install") as pool:
        return list(pool.map(lambda node: one(node, realized.namespaces[node]), nodes))


def _prefixed(nodes: Sequence[str], lines: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """Each node's lines, as "node: line"."""
    return tuple(f"{node}: {line}" for node, said in zip(nodes, lines, strict=True) for line in said)


class FirstSync:
    """kube-proxy's first sync on every node (`load`), each started as soon as its node is built (`alongside` the
    rest of the build: the rules need no pod, and a kube-proxy syncs when it starts, whichever pods are up), two at
    a time per core. What the loads said (`said`, "node: line") and how long they took from the start of the first
    to the end of the last (`seconds`) are there once the block is left."""

    def __init__(self, planes: Mapping[str, NodeDataplane], topo: Topology) -> None:
        self.planes, self.writers = planes, Writers.of(topo)
        self.said: tuple[str, ...] = ()
        self.seconds = 0.0

    @contextmanager
    def alongside(self) -> Iterator[Callable[[str, str], None]]:
        """`node_built(node, its namespace)` starts that node's load. The loads are waited for on leaving (those not
        begun are dropped if the block failed), with SIGTERM waiting too: none outlives its namespace. The first
        load that failed is raised then."""
        loads: dict[str, Future[tuple[str, ...]]] = {}
        started: list[float] = []
        ended: list[float] = []  # list.append is atomic: the loads' threads note their end here

        def one(node: str, ns: str) -> tuple[str, ...]:
            if self.writers.host:  # the host's writers were there before kube-proxy started
                self.writers.host.before_kube_proxy(ns)
            said = load(ns, self.planes[node], self.writers)
            ended.append(time.perf_counter())
            return said

        def node_built(node: str, ns: str) -> None:
            if node in self.planes:
                started.append(time.perf_counter())
                loads[node] = pool.submit(one, node, ns)

        # Two loads a core: each waits on the kernel for a good part of its time.
        pool = ThreadPoolExecutor(max_workers=2 * (os.cpu_count() or 1), thread_name_prefix="install")
        failed = True
        try:
            yield node_built
            failed = False
        finally:
            with deferred():
                pool.shutdown(wait=True, cancel_futures=failed)
        if missing := [node for node in self.planes if node not in loads]:
            raise ValueError(f"kube-proxy's first sync was never started on {', '.join(missing)}")
        self.said = _prefixed(list(self.planes), [loads[node].result() for node in self.planes])
        self.seconds = max(ended, default=0.0) - min(started, default=0.0)


def read_states(realized: Realized, wanted: Reads) -> dict[str, KernelState]:
    """What each node's kernel holds, as its kube-proxy reads it at the start of a sync."""
    nodes = [node.name for node in realized.topology.nodes]
    if wanted == Reads():  # nothing to read: no namespace entered (an iptables sync before the 1.32 reconciler)
        return dict.fromkeys(nodes, KernelState())
    return dict(zip(nodes, _per_node(realized, nodes, lambda _, ns: read_state(ns, wanted)), strict=True))


def apply_rules(realized: Realized, plans: Mapping[str, SyncPlan]) -> dict[str, tuple[str, ...]]:
    """Every node's sync plan applied but its conntrack cleanup (the rules, addresses, members, real servers), the
    nodes side by side; what each node's apply said, by node."""
    nodes, writers = list(plans), Writers.of(realized.topology)

    def one(node: str, ns: str) -> tuple[str, ...]:
        return apply(ns, plans[node], writers)

    applied = _per_node(realized, nodes, one)
    return dict(zip(nodes, applied, strict=True))


def clean_conntrack(
    realized: Realized, plans: Mapping[str, SyncPlan], applied: Mapping[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """Each node's conntrack deletions, after every node's rules; what each node's kube-proxy said ("node: line"):
    its apply (graceful termination), then its cleanup."""
    nodes = list(applied)
    said = list(_prefixed(nodes, list(applied.values())))
    for node, lines in applied.items():
        if any(failed_sync(line) for line in lines):
            continue  # a refused sync returns before its conntrack cleanup (syncProxyRules, in every mode)
        plan = plans[node]
        deleted = delete_entries(realized.namespaces[node], plan.conntrack)
        said += [f"{node}: {line}" for line in (*plan.cleanup.why, *deleted)]
    return tuple(said)
