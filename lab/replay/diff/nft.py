"""An nftables table in one form, whether kube-proxy wrote it (its `nft -f` transaction, as lab render prints it)
or `nft list ruleset` printed it back.

The transaction is played (add, flush and delete of chains, sets and elements) to the table it leaves; the
listing is read as the table it shows. nft prints a rule in its own words: `mark set mark or 0x4000` comes back
as `meta mark set meta mark | 0x00004000`, `priority -100` of a nat prerouting hook as `dstnat`, a set's
`timeout 10800s` as `3h`; both sides are brought to one form (normal.py's `rule`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from ipaddress import collapse_addresses, ip_network

from lab.describe.text_lines import content_lines
from lab.replay.dump import DumpError

# kube-proxy's tables: one per proxier, never `inet` (KEP-3866).
KUBE_PROXY_TABLES = ("ip kube-proxy", "ip6 kube-proxy")
_PRIORITY_NAMES = {"raw": -300, "mangle": -150, "dstnat": -100, "filter": 0, "security": 50, "srcnat": 100}
_OBJECTS = ("chain", "set", "map", "rule", "element", "table", "counter")


@dataclass
class Chain:
    spec: str = ""  # a base chain's hook, type and priority; a chain's comment
    rules: list[tuple[int, str]] = field(default_factory=list)  # (line, rule)


@dataclass
class NamedSet:
    kind: str  # set | map
    spec: str = ""
    elements: dict[str, int] = field(default_factory=dict)  # element -> line


@dataclass
class Table:
    spec: str = ""
    chains: dict[str, Chain] = field(default_factory=dict)
    sets: dict[str, NamedSet] = field(default_factory=dict)
    counters: set[str] = field(default_factory=set)  # named counters (their counts are no part of the comparison)


def _seconds(text: str) -> str:
    """`3h`, `1h30m`, `10800s` → seconds, as one number."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
    total = sum(int(n) * units[u] for n, u in re.findall(r"(\d+)(ms|[dhms])", text))
    return f"{total:g}s"


def _priority(text: str) -> str:
    """`dstnat - 10` → -110."""
    match = re.fullmatch(r"(-?\d+|[a-z]+)\s*(?:([-+])\s*(\d+))?", text.strip())
    if not match:
        return text.strip()
    base = _PRIORITY_NAMES.get(match.group(1))
    number = int(match.group(1)) if base is None else base
    if match.group(2):
        number += int(match.group(3)) * (1 if match.group(2) == "+" else -1)
    return str(number)


def spec(text: str) -> str:
    """A chain's or set's declaration, as `key value` statements sorted: the hook's priority a number, policy accept
    and a dynamic set's size 65535 (the defaults, which nft lists) left out, timeouts in seconds."""
    statements = []
    for part in re.split(r"\s*;\s*|\n", text):
        part = " ".join(part.split())
        if not part or part in ("policy accept", "size 65535"):  # the defaults nft lists where none was written
            continue
        if match := re.fullmatch(r"type (\S+) hook (\S+)(?: device \S+)? priority (.+)", part):
            part = f"type {match.group(1)} hook {match.group(2)} priority {_priority(match.group(3))}"
        elif part.startswith("timeout "):
            part = f"timeout {_seconds(part[8:])}"
        elif part.startswith("flags "):
            part = "flags " + ",".join(sorted(re.split(r"\s*,\s*", part[6:])))
        statements.append(part)
    return "; ".join(sorted(statements))


def split_elements(text: str) -> list[str]:
    """`a, b . c : goto x` → its elements; commas inside braces (a concatenation's anonymous set) stay."""
    elements, depth, start = [], 0, 0
    for at, char in enumerate(text):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            elements.append(text[start:at])
            start = at + 1
    elements.append(text[start:])
    return [" ".join(e.split()) for e in elements if e.strip()]


def _braces(text: str) -> tuple[str, str]:
    """`NAME { BODY }` → (NAME, BODY); no braces: (text, "")."""
    head, brace, rest = text.partition("{")
    return head.strip(), rest.rsplit("}", 1)[0] if brace else ""


def play(script: str, dump: str = "nft") -> dict[str, Table]:
    """The tables an `nft -f` transaction of add/flush/delete commands leaves (kube-proxy's way of writing)."""
    tables: dict[str, Table] = {}
    for number, line in content_lines(script):
        words = line.split(None, 4)
        if len(words) < 4 or words[1] not in _OBJECTS:
            raise DumpError(dump, "expected a command such as `add rule ip kube-proxy CHAIN ...`", number)
        verb, what, family, name = words[:4]
        rest = words[4] if len(words) > 4 else ""
        key = f"{family} {name}"
        if what == "table":
            _table_command(tables, verb, key, rest)
            continue
        table = tables.get(key)
        if table is None:
            raise DumpError(dump, f"{what} of table {key}, which no earlier line adds", number)
        _command(table, verb, what, rest, number, dump)
    return tables


def _table_command(tables: dict[str, Table], verb: str, key: str, rest: str) -> None:
    if verb in ("delete", "destroy"):
        tables.pop(key, None)
    elif verb == "flush" and key in tables:
        for chain in tables[key].chains.values():
            chain.rules.clear()
    elif verb in ("add", "create"):
        table = tables.setdefault(key, Table())
        table.spec = spec(_braces(rest)[1]) or table.spec


def _command(table: Table, verb: str, what: str, rest: str, number: int, dump: str) -> None:
    name, body = _braces(rest) if what != "rule" else (rest.split(None, 1)[0], "")
    if what == "chain":
        if verb in ("delete", "destroy"):
            table.chains.pop(name, None)
        elif verb == "flush":
            table.chains.setdefault(name, Chain()).rules.clear()
        else:
            chain = table.chains.setdefault(name, Chain())
            chain.spec = spec(body) or chain.spec
    elif what in ("set", "map"):
        if verb in ("delete", "destroy"):
            table.sets.pop(name, None)
        elif verb == "flush":
            table.sets.setdefault(name, NamedSet(what)).elements.clear()
        else:
            named = table.sets.setdefault(name, NamedSet(what))
            named.spec = spec(body) or named.spec
    elif what == "counter":
        if verb in ("delete", "destroy"):
            table.counters.discard(name)
        elif verb in ("add", "create"):
            table.counters.add(name)
    elif what == "element":
        named = table.sets.get(name)
        if named is None:
            raise DumpError(dump, f"an element of {name}, which no earlier line adds", number)
        for element in split_elements(body):
            if verb in ("delete", "destroy"):
                named.elements.pop(element, None)
            else:
                named.elements.setdefault(element, number)
    else:  # rule
        chain_name, _, text = rest.partition(" ")
        chain = table.chains.get(chain_name)
        if chain is None:
            raise DumpError(dump, f"a rule of chain {chain_name}, which no earlier line adds", number)
        if verb == "insert":
            chain.rules.insert(0, (number, text.strip()))
        elif verb == "add":
            chain.rules.append((number, text.strip()))
        else:
            raise DumpError(dump, f"`{verb} rule`: kube-proxy adds and inserts rules, by handle nothing", number)


def listing(text: str, dump: str = "nft") -> dict[str, Table]:
    """The tables of `nft list ruleset`. A transaction (lines starting with add, flush ...) is played instead."""
    first = next((line.split()[0] for line in text.splitlines() if line.strip() and not line.startswith("#")), "")
    if first != "table":
        return play(text, dump)
    tables: dict[str, Table] = {}
    table: Table | None = None
    block: tuple[str, str] | None = None  # (kind, name) of the chain, set or map being read
    elements: list[str] | None = None  # a set's `elements = { ...` being read across lines
    for number, line in content_lines(text):
        if elements is not None:
            elements.append(line)
            if "}" in line:
                _add_elements(table, block, " ".join(elements), number)
                elements = None
        elif table is None:
            match = re.fullmatch(r"table (\S+) (\S+) \{", line)
            if not match:
                raise DumpError(dump, "expected `table FAMILY NAME {` (the start of a table of the ruleset)", number)
            table = tables.setdefault(f"{match.group(1)} {match.group(2)}", Table())
        elif block is None:
            if line == "}":
                table = None
            elif match := re.fullmatch(r"(chain|set|map) (\S+) \{", line):
                block = (match.group(1), match.group(2))
                if block[0] == "chain":
                    table.chains[block[1]] = Chain()
                else:
                    table.sets[block[1]] = NamedSet(block[0])
            elif match := re.fullmatch(r"(flowtable|counter|quota|limit|ct \w+|secmark|synproxy) (\S+) \{", line):
                block = ("other", match.group(2))
                if match.group(1) == "counter":
                    table.counters.add(match.group(2))
            else:
                table.spec = spec("; ".join(filter(None, [table.spec, line])))
        elif line == "}":
            block = None
        elif block[0] == "chain":
            chain = table.chains[block[1]]
            if re.match(r"(type \S+ hook|comment |policy )", line):
                chain.spec = spec("; ".join(filter(None, [chain.spec, line])))
            else:
                chain.rules.append((number, line))
        elif block[0] in ("set", "map"):
            if line.startswith("elements = {"):
                if "}" in line:
                    _add_elements(table, block, line, number)
                else:
                    elements = [line]
            else:
                named = table.sets[block[1]]
                named.spec = spec("; ".join(filter(None, [named.spec, line])))
    if table is not None or block is not None:
        raise DumpError(dump, "the ruleset ends inside a block: a closing } is missing")
    return tables


def _add_elements(table: Table | None, block: tuple[str, str] | None, text: str, number: int) -> None:
    assert table is not None and block is not None  # set by the caller's state
    body = text.split("{", 1)[1].rsplit("}", 1)[0]
    for element in split_elements(body):
        table.sets[block[1]].elements.setdefault(element, number)


def rule(text: str) -> str:
    """A rule (or a set's element) in one form: nft's own words for marks (`mark or X` is listed as
    `meta mark | X`), numbers in decimal (`0x00004000` and `16384`, `== 0` and `== 0x00000000`), counters without
    their counts, kube-proxy 1.36's `dnat ip addr . port to` as listed (`dnat ip to`; `ip6` likewise), an anonymous
    set's elements sorted (nft lists them sorted), spaces as nft prints them."""
    text = re.sub(r"\bcounter packets \d+ bytes \d+", "counter", text)
    text = re.sub(r"(?<!meta )(?<!ct )\bmark\b", "meta mark", text)
    text = re.sub(r"\b(or|xor|and)\b", lambda m: {"or": "|", "xor": "^", "and": "&"}[m.group(1)], text)
    text = re.sub(r"\b0x[0-9a-fA-F]+\b", lambda m: str(int(m.group(0), 16)), text)
    text = re.sub(r"\bdnat (ip6?) addr \. port to\b", r"dnat \1 to", text)
    text = re.sub(r"\s*,\s*", ", ", text)
    text = re.sub(r"\{\s*", "{ ", re.sub(r"\s*\}", " }", text))
    text = re.sub(r"\{ ([^{}]*) \}", lambda m: _anonymous_set(m.group(1)), text)
    return " ".join(text.split())


def _anonymous_set(body: str) -> str:
    """An anonymous set (or map) in one form: its elements sorted (nft lists `{ 192.168.0.0/25, 10.0.0.0/8 }`
    sorted); a set holding a network is an interval set, whose adjacent and overlapping elements the kernel merges
    (`{ 10.96.0.0/16, 10.97.0.0/16 }` is listed `{ 10.96.0.0/15 }`); a set of one element written bare, as nft lists
    `ip daddr { 10.96.0.0/16 }` (kube-proxy's drop of unallocated ClusterIPs). A map's `KEY : VERDICT` stay."""
    elements = sorted(body.split(", "))
    if any("/" in e for e in elements) and not any(" " in e for e in elements):
        try:
            merged = collapse_addresses(ip_network(e) for e in elements)
            elements = sorted(str(n.network_address) if n.prefixlen == n.max_prefixlen else str(n) for n in merged)
        except (TypeError, ValueError):  # not addresses of one family: left as written
            pass
    if len(elements) == 1 and " : " not in elements[0]:
        return elements[0]
    return "{ " + ", ".join(elements) + " }"
