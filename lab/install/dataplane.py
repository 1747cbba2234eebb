"""install: a node's rendered dataplane loaded with the real tools, in the order kube-proxy needs them."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from lab.install.sync_failure import sync_failed, xtables_refusal
from lab.install.tools import (
    InstallError,
    ip_batch,
    ipset_restore_all,
    ipset_sync,
    iptables_restore,
    ipvsadm_restore,
    nft_apply,
    run_command,
)
from lab.realize.build import Realized
from lab.realize.enter import write_sysctls
from lab.render.dataplane import IPVS_DEVICE, NodeDataplane


def load(ns: str, plane: NodeDataplane, backend: str = "nft", resync: bool = False) -> tuple[str, ...]:
    """Load a node's dataplane with the real tools, in the order kube-proxy needs them. resync: kube-proxy's
    next sync after the API changed, replacing what an earlier sync wrote: the rules as a whole (one transaction,
    as kube-proxy's restore), kube-ipvs0's addresses and the sets' members by their differences, as kube-proxy
    changes them (what stays is never away for a moment), IPVS by the changes render computed (connections to
    unchanged real servers live on). What it says: the real servers ipvs' graceful termination keeps or ends."""
    if plane.mode == "ipvs":
        if resync:
            _bind_addresses(ns, plane.dummy_addresses, unbind=False)
            ipset_sync(ns, plane.ipsets)
        else:
            device = [f"link add {IPVS_DEVICE} type dummy", f"link set {IPVS_DEVICE} up"]
            ip_batch(ns, device + [f"addr add {a} dev {IPVS_DEVICE}" for a in plane.dummy_addresses])
            ipset_restore_all(ns, plane.ipsets)
    if plane.mode == "nftables":
        return _nft_sync(ns, plane.nft, resync)
    said: tuple[str, ...] = ()
    try:
        iptables_restore(ns, plane.iptables, backend)
    except InstallError as refused:  # kube-proxy's failed sync, not an error of the lab
        said = (xtables_refusal(plane.mode, str(refused), plane.iptables, resync),)
    if plane.mode == "ipvs":
        if plane.ipvs:
            # IPVS is synced before the restore; stale virtual servers are deleted only after one that succeeded.
            kept = [line for line in plane.ipvs.splitlines() if not (said and line.startswith("-D "))]
            ipvsadm_restore(ns, "".join(f"{line}\n" for line in kept), clear=not resync)
        if resync:
            if not said:  # the addresses of deleted Services leave only after a restore that succeeded
                _bind_addresses(ns, plane.dummy_addresses, unbind=True)
            said += _graceful_terminations(ns)
        # The ip_vs sysctls exist once ipvsadm has loaded the module.
        write_sysctls(ns, dict(plane.sysctls))
    return said


def _nft_sync(ns: str, script: str, resync: bool) -> tuple[str, ...]:
    """Load kube-proxy's transaction (a later sync replaces the table in the same transaction: added first, so
    that the delete holds also where an earlier sync failed and left none); a refusal is kube-proxy's failed
    sync, said in words, not an error of the lab. nft applies a transaction whole or not at all, so the node keeps
    what its last good sync wrote (nothing, at the first); kube-proxy logs "nftables sync failed", marks the next
    sync a full one and is run again after its sync period, with the same Services and so the same refusal
    (syncProxyRules in pkg/proxy/nftables/proxier.go at
    kiarashazarnia/kubernetes@4426ed5de01a08d75530f9e4c4814f6a28d806eb; #139515 for a comment over 128 bytes)."""
    replacing = "add table ip kube-proxy\ndelete table ip kube-proxy\n" if resync else ""
    try:
        nft_apply(ns, replacing + script)
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


def _bind_addresses(ns: str, addresses: tuple[str, ...], unbind: bool) -> None:
    """A later sync's addresses on kube-ipvs0, as kube-proxy binds them: each Service's bound if missing
    (syncService's EnsureAddressBind), or (unbind, after its iptables-restore succeeded) those no Service has any
    more unbound (getLegacyBindAddr, cleanLegacyService), openshift/sdn vendor/k8s.io/kubernetes/pkg/proxy/ipvs/
    proxier.go at 1b01a9ce. A Service's address never leaves on the way: while it is away its packets are routed
    past IPVS, and conntrack confirms an un-NATed entry that outlives the sync."""
    bound = {
        line.split()[3] for line in run_command(ns, ("ip", "-o", "-4", "addr", "show", "dev", IPVS_DEVICE)).splitlines()
    }
    if unbind:
        changes = [f"addr del {a} dev {IPVS_DEVICE}" for a in sorted(bound - set(addresses))]
    else:
        changes = [f"addr add {a} dev {IPVS_DEVICE}" for a in addresses if a not in bound]
    if changes:
        ip_batch(ns, changes)


def _graceful_terminations(ns: str) -> tuple[str, ...]:
    """kube-proxy's graceful termination check: a real server left at weight 0 is deleted once it has no
    active and no inactive connection (`ipvsadm -Ln`: Weight ActiveConn InActConn), and kept while it has."""
    service, said = "", []
    for line in run_command(ns, ("ipvsadm", "-Ln")).splitlines():
        words = line.split()
        if words[:1] in (["TCP"], ["UDP"], ["SCTP"]):
            service = f"{_SERVICE_FLAG[words[0]]} {words[1]}"
        elif words[:1] == ["->"] and len(words) >= 6 and words[3] == "0":
            where = f"real server {words[1]} of {service.split()[1]}"
            if words[4:6] == ["0", "0"]:
                run_command(ns, ("ipvsadm", "-d", *service.split(), "-r", words[1]))
                said.append(f"ipvs graceful termination: {where} deleted, no connection left")
            else:
                said.append(
                    f"ipvs graceful termination: {where} kept at weight 0 while it has connections "
                    f"({words[4]} active, {words[5]} inactive)"
                )
    return tuple(said)


_SERVICE_FLAG = {"TCP": "-t", "UDP": "-u", "SCTP": "--sctp-service"}


def install(realized: Realized, planes: Mapping[str, NodeDataplane], resync: bool = False) -> tuple[str, ...]:
    """Each node's rendered dataplane, loaded into the node, the nodes side by side (one at a time per core: each
    load is the tools' processes, as each node's kube-proxy syncs on its own); what the loads said, per node."""
    backend = realized.topology.cluster.iptables_backend

    def one(node: str) -> tuple[str, ...]:
        return load(realized.namespaces[node], planes[node], backend, resync)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="install") as pool:
        loaded = list(pool.map(one, planes))  # in node order; the first failure is raised
    return tuple(f"{node}: {line}" for node, lines in zip(planes, loaded, strict=True) for line in lines)
