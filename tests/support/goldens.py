"""kube-proxy's iptables test comparators, ported from pkg/util/iptables/testing/parse.go and proxier_test.go at
kubernetes/kubernetes 531be81208e2274ef42e72525a26610a9622bcdf: parse a dump, sort it as sortIPTablesRules does,
compare a chain as assertIPTablesChainEqual does; and the golden files under tests/golden/iptables."""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "iptables"


# --- assertIPTablesRulesEqual: parse, sort, print (pkg/util/iptables/testing/parse.go) -----------


@dataclass
class Chain:
    name: str
    rules: list[str] = field(default_factory=list)
    deleted: bool = False


@dataclass
class Table:
    name: str
    chains: list[Chain] = field(default_factory=list)

    def chain(self, name: str) -> Chain | None:
        return next((c for c in self.chains if c.name == name), None)


# Built-in chains ("ACCEPT" policy) are accepted too, for restore_text().
DECLARE_CHAIN = re.compile(r"^:([^ ]*) (?:-|ACCEPT) \[([0-9]*):([0-9]*)\]$")
WORD = re.compile(r'(?:^|\s)("[^"]*"|[^"]\S*)')


def parse_dump(data: str) -> list[Table]:
    """ParseIPTablesDump: tables of declared chains (in declaration order) and their rules."""
    tables: list[Table] = []
    declaring = False
    for raw in data.strip("\n").split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("*"):
            tables.append(Table(line[1:]))
            declaring = True
        elif declaring and (match := DECLARE_CHAIN.match(line)):
            tables[-1].chains.append(Chain(match[1]))
        elif line.startswith("-A "):
            declaring = False
            chain = tables[-1].chain(line.split()[1])
            assert chain is not None, f"rule for an undeclared chain: {line}"
            chain.rules.append(line)
        elif line.startswith("-X "):
            declaring = False
            tables[-1].chain(line.split()[1]).deleted = True
        else:
            assert line == "COMMIT", f"cannot parse {line!r}"
            declaring = False
    return tables


def dump_string(tables: list[Table]) -> str:
    out = []
    for table in tables:
        out.append(f"*{table.name}")
        out += [f":{c.name} - [0:0]" for c in table.chains]
        out += [rule for c in table.chains for rule in c.rules]
        out += [f"-X {c.name}" for c in table.chains if c.deleted]
        out.append("COMMIT")
    return "\n".join(out) + "\n"


def words(rule: str) -> list[str]:
    return [w.strip('"') for w in WORD.findall(rule)]


def comment_of(rule: str) -> str | None:
    w = words(rule)
    return w[w.index("--comment") + 1] if "--comment" in w else None


def by_comment_service_name(rule1: str, rule2: str) -> int:
    """orderByCommentServiceName, as a cmp: the service name is the comment up to " " or ":"."""
    c1, c2 = comment_of(rule1), comment_of(rule2)
    if c1 is None or c2 is None:
        return 0
    n1, n2 = re.split("[ :]", c1)[0], re.split("[ :]", c2)[0]
    return (n1 > n2) - (n1 < n2)


def last_rule_last_cmp(rule1: str, rule2: str) -> int:
    last1 = "must be the last rule" in (comment_of(rule1) or "")
    last2 = "must be the last rule" in (comment_of(rule2) or "")
    if last1 != last2:
        return 1 if last1 else -1
    return 0 if last1 else by_comment_service_name(rule1, rule2)


def chain_key(name: str) -> tuple[int, str]:
    order = {"KUBE-NODEPORTS": 0, "KUBE-SERVICES": 1}
    return (order.get(name, 2 if name.startswith("KUBE-") else 3), name)


SORTED_BY_SERVICE_NAME = {("filter", "KUBE-NODEPORTS"), ("nat", "KUBE-NODEPORTS"), ("filter", "KUBE-SERVICES")}


def sort_iptables_rules(data: str) -> str:
    """sortIPTablesRules: tables and chains sorted, KUBE-NODEPORTS / KUBE-SERVICES rules stably
    sorted by service name (keeping the "must be the last rule" rule last)."""
    tables = sorted(parse_dump(data), key=lambda t: t.name)
    for table in tables:
        table.chains.sort(key=lambda c: chain_key(c.name))
        for chain in table.chains:
            if (table.name, chain.name) in SORTED_BY_SERVICE_NAME:
                chain.rules.sort(key=functools.cmp_to_key(by_comment_service_name))
            elif (table.name, chain.name) == ("nat", "KUBE-SERVICES"):
                chain.rules.sort(key=functools.cmp_to_key(last_rule_last_cmp))
    return dump_string(tables)


def check_rule_jumps(data: str) -> None:
    """checkIPTablesRuleJumps: every jump and every filled chain is declared, no jump to an empty
    chain (but KUBE-NODEPORTS), no declared chain left unused (but the top-level ones)."""
    builtin_targets = {"ACCEPT", "REJECT", "DROP", "MARK", "RETURN", "DNAT", "SNAT", "MASQUERADE"}
    top_level = {"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-FORWARD"}
    top_level |= {"KUBE-MARK-MASQ", "KUBE-PROXY-FIREWALL", "KUBE-FIREWALL"}
    for table in parse_dump(data):
        created = {c.name for c in table.chains if not c.deleted}
        filled = {c.name for c in table.chains if c.rules}
        jumped = {m[1] for c in table.chains for r in c.rules if (m := re.search(r" -j (\S+)", r))} - builtin_targets
        assert not (jumped | filled) - created, f"{table.name}: used but not created: {(jumped | filled) - created}"
        assert not jumped - filled - {"KUBE-NODEPORTS"}, f"{table.name}: jumped to but empty: {jumped - filled}"
        assert not created - jumped - top_level, f"{table.name}: created but not used: {created - jumped - top_level}"


def assert_rules_equal(expected: str, result: str) -> None:
    got = sort_iptables_rules(result)
    if got != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), got.splitlines(True), "expected", "rendered"))
        pytest.fail(f"rules do not match:\n{diff}\nfull result:\n{got}")


def assert_chain_equal(table: str, chain: str, expected: str, result: str) -> None:
    """assertIPTablesChainEqual: exactly these rules, in this order."""
    found = next(t for t in parse_dump(result) if t.name == table).chain(chain)
    got = "".join(f"{rule}\n" for rule in (found.rules if found else []))
    assert got == expected, "".join(difflib.unified_diff(expected.splitlines(True), got.splitlines(True)))


def golden(name: str) -> str:
    """A golden file, without its "# source:" header."""
    text = (GOLDEN / name).read_text()
    return "".join(line for line in text.splitlines(True) if not line.startswith("#"))


def jump_shape(dump: str) -> dict[tuple[str, str], list[str | None]]:
    """(table, chain) -> the jump target of each rule, in order (None for a rule without -j): what an
    iptables-save of loaded rules must share with the text that was loaded."""
    shape: dict[tuple[str, str], list[str | None]] = {}
    table = ""
    for line in dump.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(":"):
            shape[(table, line[1:].split()[0])] = []
        elif line.startswith("-A "):
            target = re.search(r" -j (\S+)", line)
            shape[(table, line.split()[1])].append(target[1] if target else None)
    return shape
