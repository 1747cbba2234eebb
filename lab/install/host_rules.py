"""The node's other writers' rules (cluster.tools.host): the host's firewall, Docker, a CNI, each with its own nft
and iptables, loaded on every node before kube-proxy's first sync, as they were there before kube-proxy started."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from lab.describe.resolve.restore_text import table_sections
from lab.describe.topology import Topology
from lab.install.tools import Command, Xtables, iptables_restore, nft_apply, tool_command, xtables
from lab.render.dataplane import NodeDataplane

_NFTABLES = "host's nftables rules (cluster.tools.host.nftables)"
_IPTABLES = "host's iptables rules (cluster.tools.host.iptablesRules)"


@dataclass(frozen=True)
class HostRules:
    nftables: str  # an nft script, run with nft
    nft: Command
    iptables: str  # iptables-restore's input, added (--noflush) with xt
    xt: Xtables
    # Whether kube-proxy's restore replaces tables in the host's backend: the lab loads kube-proxy's tables whole,
    # where kube-proxy's own restore (--noflush) leaves the host's rules in them, so they are added again after it
    # to the tables it replaced.
    shared: bool

    @classmethod
    def of(cls, topo: Topology) -> HostRules:
        c = topo.cluster
        shared = c.proxy_mode != "nftables" and c.host_iptables_backend == c.iptables_backend
        nft = tool_command(topo, "host", "nft")
        return cls(c.host_nftables, nft, c.host_iptables_rules, xtables(topo, "host"), shared)

    def before_kube_proxy(self, ns: str) -> None:
        if self.nftables:
            nft_apply(ns, self.nftables, _NFTABLES, self.nft)
        if self.iptables:
            iptables_restore(ns, self.iptables, self.xt, noflush=True, what=_IPTABLES)

    def after_kube_proxy(self, ns: str, proxier: NodeDataplane, replaced: Collection[str]) -> None:
        """The host's rules of the tables one kube-proxy restore `replaced` (it loaded them whole), added after
        kube-proxy's; a table the restore did not replace (a refused sync's) still holds them. Only the IPv4
        proxier's restore: the host's rules are iptables', IPv4's."""
        if not (self.shared and self.iptables and proxier.family == "IPv4"):
            return
        if text := table_sections(self.iptables, set(replaced)):
            iptables_restore(ns, text, self.xt, noflush=True, what=_IPTABLES)
