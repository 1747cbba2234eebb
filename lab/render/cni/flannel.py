"""render: the iptables rules flanneld writes on a node (its default traffic manager, iptables; pure: install loads
them with the node's own iptables).

As flannel-io/flannel pkg/trafficmngr/iptables/iptables.go writes them at cdf760595c23292fd03ff4daf03638ac1ceef417
(v0.28.9; the same rules since v0.21.0):
- nat: `-A POSTROUTING -j FLANNEL-POSTRTG`, and in FLANNEL-POSTRTG (masqRules) in this order: RETURN for
  kube-proxy's masquerade mark 0x4000/0x4000 (kube-proxy masquerades those itself; the constant KubeProxyMark
  in pkg/trafficmngr/trafficmngr.go, whatever kube-proxy's masqueradeBit), RETURN from the node's own pod block to
  the cluster network and from the cluster network to the node's block, RETURN from outside the cluster network
  to the node's block, MASQUERADE from the cluster network to anything but multicast, MASQUERADE from outside the
  cluster network to it ("anything headed towards flannel from the host"); both MASQUERADEs --random-fully, as
  flannel writes them where iptables has it (every iptables since 1.6.2; flannel since v0.11.0, commit 0d7b9946).
- filter: `-A FORWARD -j FLANNEL-FWD`, and FLANNEL-FWD (forwardRules) ACCEPTs from and to the cluster network.
Every rule carries flannel's comment ("flanneld masq", "flanneld forward").

Earlier releases (network/iptables.go at v0.19.2, v0.20.0 and v0.20.2) are not rendered: v0.20.0 moved the rules
from POSTROUTING and FORWARD themselves into FLANNEL-POSTRTG and FLANNEL-FWD (jumps inserted first), v0.20.2 added
the kube-proxy mark RETURN (before, flannel masqueraded a marked packet itself, to the same address), and v0.21.0
split the single `-s <cluster network> -d <cluster network> -j RETURN` into the two RETURNs of the node's own block:
only another node's pod forwarded through this node unmarked tells them apart, and a pod's packet to a node
address is masqueraded on its own node first, so no probe of the lab sees a difference.
"""

from __future__ import annotations

from dataclasses import dataclass

POSTRTG, FWD = "FLANNEL-POSTRTG", "FLANNEL-FWD"
KUBE_PROXY_MARK = "0x4000/0x4000"
MULTICAST = "224.0.0.0/4"
MASQ_COMMENT, FORWARD_COMMENT = "flanneld masq", "flanneld forward"


@dataclass(frozen=True)
class Rule:
    """One rule flannel ensures: `-A chain spec` in `table`."""

    table: str
    chain: str
    spec: tuple[str, ...]

    @property
    def builtin(self) -> bool:
        """A rule in one of the kernel's own chains (the jump into flannel's), not in a chain of flannel's."""
        return self.chain not in (POSTRTG, FWD)

    def line(self, action: str = "-A") -> str:
        """The rule as iptables-restore reads it (`-A`, or `-D` to delete it)."""
        return " ".join((action, self.chain, *(_quoted(word) for word in self.spec)))


def _quoted(word: str) -> str:
    return f'"{word}"' if " " in word else word


def _masq(*match: str, target: str) -> Rule:
    extra = ("--random-fully",) if target == "MASQUERADE" else ()
    return Rule("nat", POSTRTG, (*match, "-m", "comment", "--comment", MASQ_COMMENT, "-j", target, *extra))


def masq_rules(cluster_network: str, pod_block: str) -> tuple[Rule, ...]:
    """masqRules(): the jump from POSTROUTING and FLANNEL-POSTRTG, for flannel's Network and the node's lease."""
    return (
        Rule("nat", "POSTROUTING", ("-m", "comment", "--comment", MASQ_COMMENT, "-j", POSTRTG)),
        _masq("-m", "mark", "--mark", KUBE_PROXY_MARK, target="RETURN"),
        _masq("-s", pod_block, "-d", cluster_network, target="RETURN"),
        _masq("-s", cluster_network, "-d", pod_block, target="RETURN"),
        _masq("!", "-s", cluster_network, "-d", pod_block, target="RETURN"),
        _masq("-s", cluster_network, "!", "-d", MULTICAST, target="MASQUERADE"),
        _masq("!", "-s", cluster_network, "-d", cluster_network, target="MASQUERADE"),
    )


def forward_rules(cluster_network: str) -> tuple[Rule, ...]:
    """forwardRules(): the jump from FORWARD and FLANNEL-FWD's two ACCEPTs."""
    comment = ("-m", "comment", "--comment", FORWARD_COMMENT)
    return (
        Rule("filter", "FORWARD", (*comment, "-j", FWD)),
        Rule("filter", FWD, ("-s", cluster_network, *comment, "-j", "ACCEPT")),
        Rule("filter", FWD, ("-d", cluster_network, *comment, "-j", "ACCEPT")),
    )


def node_rules(cluster_network: str, pod_block: str) -> tuple[Rule, ...]:
    """Everything flanneld ensures on a node: its masquerade rules, then its forward rules (the order main.go
    sets them up in)."""
    return (*masq_rules(cluster_network, pod_block), *forward_rules(cluster_network))


def ensure_text(rules: tuple[Rule, ...], present: frozenset[Rule]) -> str:
    """iptables-restore --noflush input that makes `rules` stand as flannel's resync loop does (ensureIPTables:
    when any is missing, the ones present are deleted and all are added again, in order): each of flannel's
    chains declared (created, or flushed where it exists), the jumps present deleted, every rule appended. Empty
    when every rule is present."""
    if all(rule in present for rule in rules):
        return ""
    text = ""
    for table in dict.fromkeys(rule.table for rule in rules):
        mine = [rule for rule in rules if rule.table == table]
        chains = dict.fromkeys(rule.chain for rule in mine if not rule.builtin)
        lines = [f":{chain} - [0:0]" for chain in chains]
        lines += [rule.line("-D") for rule in mine if rule.builtin and rule in present]
        lines += [rule.line() for rule in mine]
        text += f"*{table}\n" + "".join(f"{line}\n" for line in lines) + "COMMIT\n"
    return text
