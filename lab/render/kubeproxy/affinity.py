"""How kube-proxy's ClientIP affinity lookup rule reads where the kernel lists the rules a packet met: the
renderer that writes the rule defines it beside it (iptables.py, nftables.py), so that judge can tell a
connection sent along a client's affinity from one balanced anew without knowing any rule syntax."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AffinityLookup:
    """The lookup rule: the one in `table` whose text, as iptables-save or nft's trace prints it, has one of
    `texts` (not the rule that records the client: iptables' `--set`, nftables' `update @affinity-*`). One text
    per way the families write it: ip6tables' `--rcheck` reads as iptables' does, but nftables' IPv6 proxier
    matches `ip6 saddr` where the IPv4 one matches `ip saddr`."""

    table: str
    texts: tuple[str, ...]

    def matches(self, table: str, rule: str) -> bool:
        return table == self.table and any(text in rule for text in self.texts)
