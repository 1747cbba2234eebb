"""install: a node's rendered dataplane loaded with the real tools, in the order kube-proxy needs them."""

from __future__ import annotations

from collections.abc import Mapping

from lab.install.tools import ip_batch, ipset_restore_all, iptables_restore, ipvsadm_restore, nft_apply, run_command
from lab.realize.build import Realized
from lab.realize.enter import write_sysctls
from lab.render.dataplane import IPVS_DEVICE, NodeDataplane


def load(ns: str, plane: NodeDataplane, backend: str = "nft", resync: bool = False) -> None:
    """Load a node's dataplane with the real tools, in the order kube-proxy needs them. resync: kube-proxy's
    next full sync after the API changed, replacing what an earlier sync wrote. kube-proxy gets there by
    diffing (stale chains, virtual servers and kube-ipvs0 addresses deleted); the end state is the same."""
    if plane.mode == "ipvs":
        device = [f"addr flush dev {IPVS_DEVICE}"] if resync else [f"link add {IPVS_DEVICE} type dummy"]
        ip_batch(
            ns,
            [*device, f"link set {IPVS_DEVICE} up"]
            + [f"addr add {a} dev {IPVS_DEVICE}" for a in plane.dummy_addresses],
        )
        ipset_restore_all(ns, plane.ipsets, replace=resync)
    if plane.mode == "nftables":
        nft_apply(ns, ("delete table ip kube-proxy\n" if resync else "") + plane.nft)
        return
    iptables_restore(ns, plane.iptables, backend)
    if plane.mode == "ipvs":
        if resync:
            run_command(ns, ("ipvsadm", "--clear"))
        ipvsadm_restore(ns, plane.ipvs)
        # The ip_vs sysctls exist once ipvsadm has loaded the module.
        write_sysctls(ns, dict(plane.sysctls))


def install(realized: Realized, planes: Mapping[str, NodeDataplane], resync: bool = False) -> None:
    """Each node's rendered dataplane, loaded into the node."""
    for node, plane in planes.items():
        load(realized.namespaces[node], plane, realized.topology.cluster.iptables_backend, resync)
