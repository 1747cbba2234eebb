"""What is compared, taken from either side (render's output or a node's dump): kube-proxy's chains, sets and
virtual servers as Parts, each named for what it stands for rather than by its hash, and what belongs to others.

A hash-named chain (KUBE-SVC-XXXX, KUBE-SEP-XXXX; nftables' service-XXXX-ns/name/proto/port) is named by what
kube-proxy hashed: the Service port its rules' comments name (or the comments of the rules that jump to it) and,
for an endpoint chain, the endpoint its DNAT goes to. The same Service port lines up across releases whose hash
or comments differ, and an endpoint chain of another endpoint shows as the endpoint that changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from lab.replay.diff import iptables, ipvs, nft

# Chains whose rules each match their own destinations (one Service port, one NodePort, one firewalled IP): their
# order changes no packet's fate, so they compare as sets. Every other chain of kube-proxy's compares in order:
# a KUBE-SVC chain's probabilities are each conditional on the rules before it, a KUBE-SEP chain marks before it
# DNATs, KUBE-POSTROUTING returns before it masquerades, ipvs mode's KUBE-SERVICES accepts after it marks.
UNORDERED_IPTABLES = {"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-EXTERNAL-SERVICES", "KUBE-PROXY-FIREWALL"}
# kube-proxy's rule that must stay last in an otherwise unordered chain: it matches every local destination.
LAST_RULE = "NOTE: this must be the last rule in this chain"
# Empty chains made only to notice a flush of the table (kube-proxy's and kubelet's), and kubelet's hint chain.
CANARIES = {"KUBE-PROXY-CANARY", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"}
BUILT_IN = {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}

_HASHED = re.compile(r"^(KUBE-(?:SVC|SEP|EXT|FW|SVL|XLB))-[A-Z2-7]{16}$")
# A Service port name as kube-proxy writes it in comments: NAMESPACE/NAME, or NAMESPACE/NAME:PORT.
_PORT_NAME = re.compile(r"(?<![\w./-])([a-z0-9][-a-z0-9]*/[a-z0-9][-a-z0-9.]*(?::[-a-z0-9]+)?)")
_DNAT = re.compile(r"--to-destination (\S+)")
_ARROW = re.compile(r"-> (\S+)")
# nftables: the hash in service-XXXXXXXX-ns/name/tcp/port (and endpoint-, external-, firewall-, affinity- ...).
_NFT_HASH = re.compile(r"\b([a-z]+)-[A-Z2-7]{8}-(?=[a-z0-9])")


@dataclass(frozen=True)
class Part:
    """One compared unit. `entries` are in one form (rules, members, real servers); `lines` the line of each in the
    text it came from."""

    kind: str  # chain | set | map | ipset | virtual servers | real servers
    table: str
    name: str
    ordered: bool
    entries: tuple[str, ...]
    lines: tuple[int, ...]
    spec: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return self.table, self.name


@dataclass(frozen=True)
class Side:
    parts: dict[tuple[str, str], Part]
    others: tuple[str, ...]  # "what: count" of what is not kube-proxy's


def _iptables_names(tables: iptables.Tables) -> dict[str, str]:
    """Hash-named chain → what it stands for: KUBE-SVC(default/web:http), KUBE-SEP(default/web:http 10.0.0.1:80)."""
    comments: dict[str, list[str]] = {}
    dnat: dict[str, str] = {}
    jumped: set[str] = set()
    for rule in tables.rules:
        text = " ".join(rule.words)
        own = [rule.words[at + 1] for at, word in enumerate(rule.words[:-1]) if word == "--comment"]
        comments.setdefault(rule.chain, []).extend(own)
        if match := _DNAT.search(text):
            dnat[rule.chain] = match.group(1)
        for at, word in enumerate(rule.words[:-1]):  # what a rule jumping to a chain says of it
            if word in ("-j", "-g") and _HASHED.match(rule.words[at + 1]):
                comments.setdefault(f"to {rule.words[at + 1]}", []).extend(own)
                jumped.add(rule.words[at + 1])
    names: dict[str, str] = {}
    # Chains something jumps to first: of two saying the same, the one in use takes the name.
    chains = {r.chain for r in tables.rules} | {c for cs in tables.chains.values() for c in cs}
    for chain in sorted(chains, key=lambda c: (c not in jumped, c)):
        match = _HASHED.match(chain)
        if not match:
            continue
        said = [*comments.get(chain, []), *comments.get(f"to {chain}", [])]
        port_name = next((m.group(1) for c in said if (m := _PORT_NAME.search(c))), None)
        if port_name is None:
            continue  # nothing says what it stands for: it keeps its hash
        # The endpoint the jump's comment names (1.22+: "ns/svc:port -> 10.0.0.1:80"), else the one it DNATs to.
        arrow = next((m.group(1) for c in comments.get(f"to {chain}", []) if (m := _ARROW.search(c))), None)
        endpoint = f" {arrow or dnat[chain]}" if arrow or chain in dnat else ""
        name = f"{match.group(1)}({port_name}{endpoint})"
        if name not in names.values():  # a second chain saying the same (a stale copy) keeps its hash: both show
            names[chain] = name
    return names


def _rename(text: str, names: dict[str, str]) -> str:
    return re.sub(r"KUBE-[A-Z]+-[A-Z2-7]{16}\b", lambda m: names.get(m.group(0), m.group(0)), text)


# How an ip6tables table is named in parts and reports, beside iptables' `nat` and `filter`.
IP6_TABLE = "ip6 {table}"


def iptables_side(text: str, mode: str, dump: str = "rules", version: int = 4) -> Side:
    """kube-proxy's chains of an iptables-save dump (or restore input): every KUBE- chain of nat and filter, and
    kube-proxy's jumps to them from the built-in chains. Other tables, chains and rules are counted as others'.
    `version` 6: an ip6tables-save dump, the IPv6 proxier's, whose tables are named `ip6 nat`, `ip6 filter`."""
    tables = iptables.parse(text, dump)
    side = _iptables_side(tables, mode, dump, version)
    if version == 4:
        return side
    named = {
        (IP6_TABLE.format(table=part.table), part.name): replace(part, table=IP6_TABLE.format(table=part.table))
        for part in side.parts.values()
    }
    return Side(named, tuple(f"ip6 {other}" for other in side.others))


def _iptables_side(tables: iptables.Tables, mode: str, dump: str, version: int) -> Side:
    names = _iptables_names(tables)
    rules: dict[tuple[str, str], list[tuple[int, str]]] = {}
    others: dict[str, int] = {}
    for table, chains in tables.chains.items():
        for chain in chains:
            if chain.startswith("KUBE-") and chain not in CANARIES and table in ("nat", "filter"):
                rules.setdefault((table, chain), [])
    for rule in tables.rules:
        canonical = _rename(iptables.canonical(rule, dump, version), names)
        target = f" {canonical}".rsplit(" -j ", 1)[1].split()[0] if " -j " in f" {canonical}" else ""
        ours = rule.table in ("nat", "filter") and (
            (rule.chain.startswith("KUBE-") and rule.chain not in CANARIES)
            or (rule.chain in BUILT_IN and target.startswith("KUBE-"))
        )
        if ours:
            rules.setdefault((rule.table, rule.chain), []).append((rule.line, canonical))
        else:
            where = f"{rule.table} {rule.chain}"
            others[where] = others.get(where, 0) + 1
    for table, chains in tables.chains.items():
        for chain in chains:
            if chain in CANARIES:
                others.setdefault(f"{table} {chain} (a canary, empty by design)", 0)
            elif (table, chain) not in rules and chain not in BUILT_IN:
                others.setdefault(f"{table} {chain}", 0)
    parts = {}
    for (table, chain), found in rules.items():
        name = _rename(chain, names)
        ordered = not (mode == "iptables" and chain in UNORDERED_IPTABLES)
        part = Part("chain", table, name, ordered, tuple(r for _, r in found), tuple(n for n, _ in found))
        parts[part.key] = part
    return Side(parts, _others(others))


def _others(counts: dict[str, int]) -> tuple[str, ...]:
    return tuple(f"{where} ({n} rule{'s' if n != 1 else ''})" if n else where for where, n in sorted(counts.items()))


def nft_side(text: str, dump: str = "nft") -> Side:
    """kube-proxy's tables (ip kube-proxy, ip6 kube-proxy: one per proxier) of a ruleset or a transaction: their
    chains in order, their sets and maps as sets; other tables are others'."""
    tables = nft.listing(text, dump)
    parts = {}
    for key, table in tables.items():
        if key not in nft.KUBE_PROXY_TABLES:
            continue
        for name, chain in table.chains.items():
            part = Part(
                "chain",
                key,
                unhash(name),
                True,
                tuple(nft.rule(unhash(r)) for _, r in chain.rules),
                tuple(n for n, _ in chain.rules),
                chain.spec,
            )
            parts[part.key] = part
        for name, named in table.sets.items():
            members = sorted(named.elements.items(), key=lambda item: nft.rule(unhash(item[0])))
            part = Part(
                named.kind,
                key,
                unhash(name),
                False,
                tuple(nft.rule(unhash(e)) for e, _ in members),
                tuple(n for _, n in members),
                named.spec,
            )
            parts[part.key] = part
        for name in table.counters:  # named counters: that they exist; their counts are dropped
            part = Part("counter", key, name, False, (), ())
            parts[part.key] = part
    others = tuple(_other_table(key, table) for key, table in tables.items() if key not in nft.KUBE_PROXY_TABLES)
    return Side(parts, others)


def _other_table(key: str, table: nft.Table) -> str:
    """A table not compared, with what in it may still be kube-proxy's: the KUBE- chains of iptables-nft
    (kube-proxy's iptables or ipvs mode, which nftables mode does not write)."""
    kube = sum(name.startswith("KUBE-") for name in table.chains)
    return f"table {key}" + (f" (holds {kube} KUBE- chain{'s' if kube != 1 else ''})" if kube else "")


def unhash(text: str) -> str:
    """nftables' service-XXXXXXXX-ns/name/tcp/p → service-…-ns/name/tcp/p: the rest of the name says it all."""
    return _NFT_HASH.sub(r"\1-…-", text)


def ipvs_side(ipsets: str | None, servers: str | None) -> Side:
    """ipvs mode's ipsets (KUBE- sets: type and members) and virtual servers (each with its real servers)."""
    parts: dict[tuple[str, str], Part] = {}
    others: list[str] = []
    if ipsets is not None:
        for name, (spec, members) in ipvs.ipsets(ipsets).items():
            if not name.startswith("KUBE-"):
                others.append(f"ipset {name}")
                continue
            ordered = sorted(members.items())
            part = Part("ipset", "ipset", name, False, tuple(m for m, _ in ordered), tuple(n for _, n in ordered), spec)
            parts[part.key] = part
    if servers is not None:
        table = ipvs.virtual_servers(servers)
        listed = sorted(table.items())
        part = Part(
            "virtual servers",
            "ipvs",
            "virtual servers",
            False,
            tuple(v for v, _ in listed),
            tuple(n for _, (n, _) in listed),
        )
        parts[part.key] = part
        for service, (_, reals) in listed:
            if not reals:  # the virtual servers' part says it is there; no real server is no part of its own
                continue
            members = sorted(reals.items())
            part = Part(
                "real servers", "ipvs", service, False, tuple(r for r, _ in members), tuple(n for _, n in members)
            )
            parts[part.key] = part
    return Side(parts, tuple(others))


def merge(sides: Iterable[Side]) -> Side:
    parts: dict[tuple[str, str], Part] = {}
    others: list[str] = []
    for side in sides:
        parts.update(side.parts)
        others += side.others
    return Side(parts, tuple(others))
