"""Does an iptables-save dump reach kube-proxy's chains from the kernel's built-in ones; the jumps that do.

kube-proxy writes its chains with `iptables-restore --noflush` (the payload its unit tests compare
against: tests/golden/iptables) and hooks them into the built-in chains apart from that payload, with
`iptables -I`; kubelet up to 1.26 adds KUBE-MARK-DROP and KUBE-FIREWALL. A dump holding only the payload
acts on no packet. check_reaches_kube_proxy() refuses such a dump; add_kube_jumps() completes it with
what lab.render.kubeproxy.iptables knows those components add (jump_rules, kubelet_rules), in the order a
fresh node holds them (IptablesRules.builtin_rules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from lab.describe.releases import IPTABLES_VERSIONS
from lab.render.kubeproxy.iptables import DEFAULT_VERSION, IptablesRules, jump_rules
from lab.render.kubeproxy.xtables import KUBE_FIREWALL, KUBE_MARK_DROP, JumpRule, KubeletRules, kubelet_rules
from lab.replay.dump import DumpError

BUILTIN_CHAINS = ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING")
# The chains kube-proxy of some version hooks into the built-in ones (KUBE-SERVICES, KUBE-POSTROUTING, ...).
ENTRY_CHAINS = tuple(dict.fromkeys(jump.target for version in IPTABLES_VERSIONS for jump in jump_rules(version)))
# Where kubelet's chains live; it fills them, kube-proxy up to 1.24 only jumps to KUBE-MARK-DROP.
KUBELET_CHAINS = {KUBE_MARK_DROP: "nat", KUBE_FIREWALL: "filter"}
_TARGET = re.compile(r"(?:^|\s)-[jg]\s+(\S+)")


@dataclass
class Table:
    chains: list[str] = field(default_factory=list)  # declared (":CHAIN ..."), built-in ones included
    jumps: list[tuple[str, str]] = field(default_factory=list)  # (chain, target) of every rule with -j/-g
    rules: int = 0


def parse_tables(dump: str) -> dict[str, Table]:
    tables: dict[str, Table] = {}
    table = Table()
    for line in dump.splitlines():
        words = line.split()
        if line.startswith("*"):
            table = tables.setdefault(line[1:].strip(), Table())
        elif line.startswith(":") and line[1:].strip():
            table.chains.append(line[1:].split()[0])
        elif line.startswith("-A ") and len(words) > 1:
            table.rules += 1
            if targets := _TARGET.findall(line):
                table.jumps.append((words[1], targets[-1]))
    return tables


def reached(tables: dict[str, Table]) -> set[tuple[str, str]]:
    """(table, chain) of every chain a packet can enter from a built-in chain, through any number of jumps."""
    found = {(name, chain) for name in tables for chain in BUILTIN_CHAINS}
    todo = list(found)
    while todo:
        name, chain = todo.pop()
        for source, target in tables[name].jumps:
            if source == chain and (name, target) not in found:
                found.add((name, target))
                todo.append((name, target))
    return found


def check_reaches_kube_proxy(dump: str, option: str = "rules") -> None:
    """Refuse a dump whose rules cannot say what kube-proxy does to a packet: empty, without kube-proxy's
    chains, or with them but no built-in chain leading there (kube-proxy's own payload)."""
    tables = parse_tables(dump)
    if not any(table.rules or table.chains for table in tables.values()):
        raise DumpError(option, "it holds no iptables rules (empty, or only comments)")
    entries = {(name, chain) for name, table in tables.items() for chain in table.chains if chain in ENTRY_CHAINS}
    if not entries:
        raise DumpError(
            option,
            f"it defines none of kube-proxy's chains ({', '.join(ENTRY_CHAINS)}): not a kube-proxy node's rules",
        )
    if entries & reached(tables):
        return
    missing = [f"{jump.table}: -A {jump.chain} {jump.args}" for jump in _wanted(tables, jump_rules(DEFAULT_VERSION))]
    raise DumpError(
        option,
        "no built-in chain (PREROUTING, INPUT, FORWARD, OUTPUT, POSTROUTING) reaches kube-proxy's chains, so no packet "
        "would meet them. kube-proxy adds those jumps itself (iptables -I), apart from the payload its unit tests "
        "compare, which is what this looks like. Missing, as kube-proxy "
        f"{DEFAULT_VERSION} writes them:\n  " + "\n  ".join(missing) + "\n"
        "Replay with --add-kube-jumps [VERSION] to add them, or give the node's whole iptables-save.",
    )


def _wanted(
    tables: dict[str, Table], jumps: tuple[JumpRule, ...], added: dict[str, tuple[str, ...]] | None = None
) -> tuple[JumpRule, ...]:
    """Those of `jumps` whose target the dump defines (or `added` adds to its table) and whose built-in chain
    does not jump there yet."""

    def wanted(jump: JumpRule) -> bool:
        table = _table(tables, jump.table)
        chains = [*table.chains, *(added or {}).get(jump.table, ())]
        return jump.target in chains and (jump.chain, jump.target) not in table.jumps

    return tuple(filter(wanted, jumps))


def _table(tables: dict[str, Table], name: str) -> Table:
    return tables.get(name) or Table()


def _kubelet(tables: dict[str, Table], version: str, family: str, option: str) -> KubeletRules | None:
    """kubelet's chains, when the dump jumps to one of them without defining it (kube-proxy up to 1.24 relied
    on kubelet's KUBE-MARK-DROP, which is nothing without kubelet's KUBE-FIREWALL); only those it lacks."""
    needed = [
        chain
        for chain, table in KUBELET_CHAINS.items()
        if chain in {target for _, target in _table(tables, table).jumps} and chain not in _table(tables, table).chains
    ]
    if not needed:
        return None
    kubelet = kubelet_rules(version, family=family)
    if kubelet is None:
        raise DumpError(
            option,
            f"it jumps to {', '.join(needed)} without defining it: kubelet up to 1.26 writes those chains, kubelet "
            f"{version} does not. Name the version that wrote the dump, e.g. --add-kube-jumps 1.24",
        )
    if KUBE_FIREWALL in _table(tables, "filter").chains:
        kubelet = replace(kubelet, filter_chains=(), filter_rules=())
    if KUBE_MARK_DROP in _table(tables, "nat").chains:
        kubelet = replace(kubelet, nat_chains=(), nat_rules=())
    return kubelet


TABLES = ("filter", "nat")


@dataclass(frozen=True)
class Completion:
    """What add_kube_jumps adds to each table: chains to declare, new first rules of the built-in chains, and
    the rules of the added chains."""

    declare: dict[str, tuple[str, ...]]
    top: dict[str, list[str]]
    tail: dict[str, tuple[str, ...]]

    def table_lines(self, table: str) -> list[str]:
        return [*(f":{chain} - [0:0]" for chain in self.declare[table]), *self.top[table], *self.tail[table]]

    def lines(self) -> list[str]:
        """Everything added, one "table: line" each, for the report."""
        return [f"{table}: {line}" for table in TABLES for line in self.table_lines(table)]


def plan_kube_jumps(dump: str, version: str, family: str = "IPv4", option: str = "rules") -> Completion:
    """What to add; `family`: the proxier's (kubelet writes no localnet rule in ip6tables), `option`: the one that
    gave the dump, for errors."""
    tables = parse_tables(dump)
    kubelet = _kubelet(tables, version, family, option)
    declare = {"filter": kubelet.filter_chains if kubelet else (), "nat": kubelet.nat_chains if kubelet else ()}
    if kubelet:
        kubelet = replace(kubelet, jump_rules=_wanted(tables, kubelet.jump_rules, declare))
    node = IptablesRules(
        (), (), (), (), jump_rules=_wanted(tables, jump_rules(version), declare), version=version, kubelet=kubelet
    )
    top = {table: [rule for chain in BUILTIN_CHAINS for rule in node.builtin_rules(table, chain)] for table in TABLES}
    tail = {"filter": kubelet.filter_rules if kubelet else (), "nat": kubelet.nat_rules if kubelet else ()}
    return Completion(declare, top, tail)


def add_kube_jumps(
    dump: str, version: str = DEFAULT_VERSION, family: str = "IPv4", option: str = "rules"
) -> tuple[str, list[str]]:
    """The dump as a node running kube-proxy `version` holds it: kube-proxy's jumps from the built-in chains to
    the chains the dump defines, kubelet's chains where the dump uses them undefined. Returns the completed
    dump and what was added."""
    plan = plan_kube_jumps(dump, version, family, option)
    return _insert(dump, plan), plan.lines()


def _insert(dump: str, plan: Completion) -> str:
    """Declarations and the built-in chains' new first rules before a table's first rule (a chain must be
    declared before a rule jumps to it), the added chains' rules before its COMMIT; a table the dump lacks
    at the end."""
    out: list[str] = []
    pending: list[str] = []
    table = ""
    for line in dump.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
            if table in TABLES:
                pending = [*(f":{chain} - [0:0]" for chain in plan.declare[table]), *plan.top[table]]
        elif line.startswith("-A ") or line.strip() == "COMMIT":
            out += pending
            pending = []
        if line.strip() == "COMMIT" and table in TABLES:
            out += plan.tail[table]
        out.append(line)
    present = parse_tables(dump)
    for missing in (table for table in TABLES if table not in present and plan.table_lines(table)):
        out += [f"*{missing}", *plan.table_lines(missing), "COMMIT"]
    return "\n".join(out) + "\n"
