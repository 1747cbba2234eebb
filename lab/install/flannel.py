"""install: flanneld's iptables rules (lab/render/flannel.py) on every node of a cni flannel cluster, with the real
iptables of the node's flavour (flannel's image picks the one the node's rules are in, as kube-proxy's does).

flanneld ensures its rules every resyncPeriod (5 s): where one is missing it deletes those present and adds them
all again, in order. The lab ensures them the same way after each of kube-proxy's syncs: kube-proxy's restore in
the lab replaces its tables whole, where the real one (--noflush) leaves flannel's rules standing; in either case
kube-proxy's jumps come first in POSTROUTING and FORWARD (kube-proxy prepends its own), flannel's after them."""

from __future__ import annotations

from lab.install.tools import iptables_has, iptables_restore, xtables
from lab.realize.build import Realized
from lab.render.cni.flannel import ensure_text, node_rules


def ensure_flannel_rules(realized: Realized) -> None:
    """flanneld's rules standing on every node (nothing for another CNI)."""
    topo = realized.topology
    if topo.cluster.cni != "flannel":
        return
    xt = xtables(topo, "host")  # flanneld: a node's other writer, with the host's iptables (cluster.tools)
    for node in topo.nodes:
        ns = realized.namespaces[node.name]
        rules = node_rules(topo.cluster.cluster_cidr, node.pod_cidr)
        present = frozenset(rule for rule in rules if iptables_has(ns, rule.table, rule.chain, rule.spec, xt))
        if text := ensure_text(rules, present):
            iptables_restore(ns, text, xt, noflush=True)
