"""Calico's Felix in its iptables dataplane: the nat rules and IP sets that decide the source of a pod's traffic
leaving its IP pool, as Felix writes them on every node, as a pure function.

Read from projectcalico/calico at v3.31.0 (94bd1d5b0e04459d4d1c83653e0335a9201248b8):
- felix/rules/static.go, StaticNATPostroutingChains: cali-POSTROUTING jumps to cali-fip-snat and cali-nat-outgoing,
  then masquerades what leaves by the tunnel device (tunl0, vxlan.calico) from one of the node's own addresses
  that is not the device's (a host process reaching a pod of another node through a Service's DNAT).
- felix/dataplane/linux/int_dataplane.go: the jump to cali-POSTROUTING is *appended* to nat POSTROUTING, after
  kube-proxy's KUBE-POSTROUTING: kube-proxy's MASQUERADE of what it marked comes first (and clears its mark),
  Felix's after. Felix has no rule that skips kube-proxy's marked traffic; the order is what keeps them apart.
- felix/rules/nat.go, NATOutgoingChain and makeNATOutgoingRuleIPTables: while some pool has natOutgoing,
  cali-nat-outgoing masquerades a source in the natOutgoing pools going to a destination in no pool.
- felix/dataplane/linux/masq_mgr.go: the two hash:net sets, IPSetIDNATOutgoingMasqPools ("masq-ipam-pools", the
  natOutgoing pools) and IPSetIDNATOutgoingAllPools ("all-ipam-pools", every pool), named by
  felix/ipsets/ipset_defs.go's IPVersionConfig ("cali4" + "0" + the ID); felix/ipsets/ipsets.go writes their
  create line with MaxIpsetSize (felix/config/config_params.go: 1048576). The all-pools set is
  "network-ip-pools" from v3.31.7 and v3.32.1 on (projectcalico/calico#12858): the same members, renamed.
- felix/iptables/actions.go, MasqAction: `--random-fully` where iptables is 1.6.2 or later on a kernel 3.14 or
  later (felix/environment/feature_detect_linux.go), every node the lab builds.
- felix/generictables/rules.go, RuleHashes, with felix/iptables/renderer.go and table.go: each rule's comment
  "cali:" + a chained SHA-224 of the chain's name and the rules up to it (an appended rule's chain is named
  "<chain>*appends*"), base64url, 16 characters; checked against felix/fv/cali-iptables-dump.txt.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

POSTROUTING = "cali-POSTROUTING"
FIP_SNAT = "cali-fip-snat"
NAT_OUTGOING = "cali-nat-outgoing"
MASQ_POOLS = "cali40masq-ipam-pools"  # the pools with natOutgoing
ALL_POOLS = "cali40all-ipam-pools"  # every pool
MAX_IPSET_SIZE = 1048576
HASH_PREFIX = "cali:"
HASH_LENGTH = 16
MASQUERADE = "--jump MASQUERADE --random-fully"


@dataclass(frozen=True)
class Pool:
    """One Calico IPPool as Felix reads it: its CIDR and whether it masquerades what leaves it."""

    cidr: str
    nat_outgoing: bool


@dataclass(frozen=True)
class FelixRules:
    """What Felix loads on one node: the nat table's rules (iptables-restore --noflush: kube-proxy's stay) and the
    IP sets they match (ipset restore, before the rules)."""

    iptables: str
    ipsets: str


def rule_hashes(chain: str, rules: Sequence[str]) -> list[str]:
    """Felix's comment for each rule of a chain (its body: the matches and the action, as Felix writes them)."""
    digest = hashlib.sha224(chain.encode()).digest()
    hashes = []
    for rule in rules:
        digest = hashlib.sha224(digest + f"-A {chain} HASH {rule}".encode()).digest()
        hashes.append(base64.urlsafe_b64encode(digest).decode().rstrip("=")[:HASH_LENGTH])
    return hashes


def _chain_lines(chain: str, rules: Sequence[str], hashed_as: str = "") -> list[str]:
    """The chain's rules with their hash comments, as Felix writes them (`hashed_as`: the name it hashes under)."""
    hashes = rule_hashes(hashed_as or chain, rules)
    return [f'-A {chain} -m comment --comment "{HASH_PREFIX}{h}" {rule}' for h, rule in zip(hashes, rules, strict=True)]


def felix_rules(pools: Sequence[Pool], tunnel_device: str) -> FelixRules:
    """Felix's nat POSTROUTING rules and pool sets on a node whose pod traffic to other nodes leaves by
    `tunnel_device` (tunl0 or vxlan.calico)."""
    masq = [p.cidr for p in pools if p.nat_outgoing]
    postrouting = [
        f"--jump {FIP_SNAT}",
        f"--jump {NAT_OUTGOING}",
        f"--out-interface {tunnel_device} -m addrtype ! --src-type LOCAL --limit-iface-out "
        f"-m addrtype --src-type LOCAL {MASQUERADE}",
    ]
    # No natOutgoing pool: the chain is written empty (NATOutgoingChain(false)).
    masquerade = f"-m set --match-set {MASQ_POOLS} src -m set ! --match-set {ALL_POOLS} dst {MASQUERADE}"
    outgoing = [masquerade] if masq else []
    lines = [
        "*nat",
        *(f":{chain} - [0:0]" for chain in (POSTROUTING, FIP_SNAT, NAT_OUTGOING)),
        *_chain_lines("POSTROUTING", [f"--jump {POSTROUTING}"], hashed_as="POSTROUTING*appends*"),
        *_chain_lines(POSTROUTING, postrouting),
        *_chain_lines(NAT_OUTGOING, outgoing),
        "COMMIT",
    ]
    sets = []
    for name, members in ((MASQ_POOLS, masq), (ALL_POOLS, [p.cidr for p in pools])):
        sets.append(f"create {name} hash:net family inet maxelem {MAX_IPSET_SIZE}")
        sets += [f"add {name} {cidr}" for cidr in members]
    return FelixRules("".join(f"{line}\n" for line in lines), "".join(f"{line}\n" for line in sets))
