"""install: Calico's Felix on every node of a cni routed-tunnel cluster, its IP pool sets and nat rules
(lab/render/cni/calico.py) loaded beside kube-proxy's with the host's iptables (cluster.tools.host: its release and
backend) and ipset. The pool is the cluster's pod network (clusterCIDR), whose natOutgoing the scenario sets.

Felix reads the tables back (iptables-save) and programs again whatever of its own is missing. The lab does the same
after kube-proxy's first sync and after each later one: kube-proxy's restore in the lab replaces its tables whole,
where the real one (--noflush) leaves Felix's chains standing. Either way Felix's jump is appended to nat
POSTROUTING after kube-proxy's, which kube-proxy prepends."""

from __future__ import annotations

from lab.describe.topology import Topology
from lab.install.tools import ipset_apply, iptables_restore, run_command, xtables
from lab.realize.build import Realized
from lab.render.cni.calico import POSTROUTING, FelixRules, Pool, felix_rules


def calico_rules(topo: Topology, tunnel_device: str) -> FelixRules | None:
    """Felix's rules on each node (the same on all: one pool, one tunnel device); None without Calico."""
    if topo.cluster.cni != "routed-tunnel":
        return None
    return felix_rules([Pool(topo.cluster.cluster_cidr, topo.cluster.nat_outgoing)], tunnel_device)


def ensure_felix(realized: Realized) -> None:
    """Felix's sets and rules standing on every node (nothing for another CNI): the sets created or kept
    (`-exist`), the rules added (--noflush) where the node's nat table has no jump to cali-POSTROUTING."""
    topo = realized.topology
    rules = calico_rules(topo, realized.tunnel_device)
    if rules is None:
        return
    xt = xtables(topo, "host")  # Felix: a node's other writer, with the host's iptables (cluster.tools)
    for node in topo.nodes:
        ns = realized.namespaces[node.name]
        ipset_apply(ns, rules.ipsets.splitlines())
        saved = run_command(ns, (*xt.argv("save"), "-t", "nat"))
        if f"-j {POSTROUTING}" not in saved:
            iptables_restore(ns, rules.iptables, xt, noflush=True, what="Calico's rules")
