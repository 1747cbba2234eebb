"""What a node's iptables tables hold before kube-proxy starts, per backend, as iptables-wrapper reads them: the
chains of each table (the `:NAME` lines of iptables-save) and how many rules (its `-A` lines), read from the
scenario's host rules. `cluster.tools.host.iptablesRules` is in the host's backend; `cluster.tools.host.nftables`
is nft's, and its ip and ip6 tables named as iptables' (filter, nat, mangle, raw, security) are what
iptables-nft-save and ip6tables-nft-save print. What cannot be read so is said, never guessed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from lab.describe.resolve.iptables_options import COMMANDS, Option, rule_options
from lab.describe.resolve.restore_text import BUILTIN, without_counters

IPTABLES_RULES = ("cluster", "tools", "host", "iptablesRules")
NFTABLES = ("cluster", "tools", "host", "nftables")


@dataclass(frozen=True)
class Unread:
    """Why a part of the host's rules cannot be read as iptables-save would print it, and the field it is in."""

    field: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class BackendTables:
    """One backend's tables as iptables-save (both families) would print them."""

    chains: frozenset[tuple[str, str]] = frozenset()  # (table, chain), the built-in chains among them
    rules: int = 0
    # Set when the chains (and so the rules) cannot be known; `uncounted` when only the rules cannot be counted.
    unread: Unread | None = None
    uncounted: Unread | None = None
    # Set when which chains of the mangle table iptables-nft-save prints depends on its release (nft_tables).
    mangle_unsure: Unread | None = None


def restore_tables(text: str) -> BackendTables:
    """iptables-restore --noflush's input (checked before: lab/describe/resolve/restore_text.py) as its backend then
    holds it: `:NAME` and `-N NAME` declare chains, and `:NAME` of a chain of the user's that stands flushes it (both
    backends' restore, checked on the kernel); `-A` and `-I` (and their long forms or any prefix of them iptables
    takes, anywhere among the line's options, after the counters of `iptables-save -c`: iptables_options.py) add one
    rule each; a line with -6 is ignored, as iptables-restore ignores it (iptables(8): -6). Another command (-D, -F,
    -X, ...) changes what stands in ways the lab does not follow."""
    rules: dict[tuple[str, str], int] = {}  # each chain's rules, by (table, chain)
    table = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(":"):
            _declare(rules, table, line[1:].split()[0])
        elif line.startswith(("-", "[")) and (problem := _add_line(rules, table, number, line)):
            return BackendTables(unread=Unread(IPTABLES_RULES, problem))
    return BackendTables(frozenset(rules), sum(rules.values()))


def _add_line(rules: dict[tuple[str, str], int], table: str, number: int, line: str) -> str:
    """A restore line's rule or chain added to `rules`; "", or why the lab does not follow the line."""
    options = list(rule_options(without_counters(line)))
    if any(option.name == "-6" for option in options):  # IPv4's restore leaves the line out
        return ""
    command = next((option for option in options if option.name in COMMANDS), None)
    if command is None or command.unsure or command.name not in (*_ADDS, _NEW_CHAIN):
        return _unfollowed(number, line, command)
    if command.name == _NEW_CHAIN:
        rules.setdefault((table, command.argument), 0)
    else:
        rules[table, command.argument] = rules.get((table, command.argument), 0) + 1
    return ""


_ADDS = ("-A", "-I")
_NEW_CHAIN = "-N"


def _declare(rules: dict[tuple[str, str], int], table: str, chain: str) -> None:
    """`:CHAIN`: a built-in chain keeps its rules (only its policy is set), a chain of the user's is empty after it."""
    if chain in BUILTIN.get(table, ()):
        rules.setdefault((table, chain), 0)
    else:
        rules[table, chain] = 0


def _unfollowed(number: int, line: str, command: Option | None) -> str:
    if command is None:
        return f"its line {number} ({line!r}) gives no command (-A, -I or -N, a rule added or a chain declared)"
    if command.unsure:
        return (
            f"its line {number} ({line!r}) gives {command.word} after -m, -j or -p, where iptables reads it among that"
            " extension's options too, which the lab does not know: write the command in full"
        )
    return (
        f"its line {number} ({line!r}) changes rules already loaded ({command.word}), which the lab does not follow:"
        " write the rules as they stand (:CHAIN and -A lines)"
    )


# nft's families: a table named without one is ip's. iptables-nft-save reads ip's, ip6tables-nft-save ip6's.
_FAMILIES = ("ip", "ip6", "inet", "arp", "bridge", "netdev")
_XTABLES_FAMILIES = ("ip", "ip6")
# What a chain's body may say that is no rule: a base chain's hook and policy, a comment, a netdev chain's devices.
_CHAIN_PROPERTIES = ("type", "policy", "comment", "devices")
_TOKEN = re.compile(r'"[^"\n]*"|[{};\n]|[^\s{};"]+')
# A comment runs from a `#` outside a quoted string to the line's end, quotes and `$` in it included (nft's scanner;
# checked with nft -f): the part of the line before it is kept.
_COMMENT = re.compile(r'^((?:[^"#\n]|"[^"\n]*")*)#.*$', re.MULTILINE)


@dataclass
class _NftTables:
    """The ip and ip6 tables an nft script leaves, by (family, table): each chain's rule count."""

    tables: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    base_chains: set[tuple[tuple[str, str], str]] = field(default_factory=set)  # (table, chain) with a hook
    unread: str = ""

    def chain(self, table: tuple[str, str], name: str) -> None:
        self.tables.setdefault(table, {}).setdefault(name, 0)

    def rule(self, table: tuple[str, str], chain: str) -> None:
        self.chain(table, chain)
        self.tables[table][chain] += 1


def nft_tables(script: str) -> BackendTables:
    """What iptables-nft-save and ip6tables-nft-save print of an nft script's tables: the chains of its ip and ip6
    tables named as iptables' (mangle's chains are what iptables-wrapper looks for); rules written with nft in
    them are not counted, as iptables-nft-save prints them only as far as it can translate them."""
    read = _NftTables()
    for statement in _statements(_tokens(script)):
        _apply(read, statement)
        if read.unread:
            return BackendTables(unread=Unread(NFTABLES, read.unread))
    chains = frozenset((table, chain) for (_, table), names in _xtables(read) for chain in names)
    rules = sum(count for _, names in _xtables(read) for count in names.values())
    uncounted = None
    if rules:
        tables = sorted({f"{family} {table}" for (family, table), names in _xtables(read) if any(names.values())})
        why = (
            f"it writes rules in table {', '.join(tables)}, which iptables-nft-save prints only as far as it can"
            " translate them: the lab does not count them"
        )
        uncounted = Unread(NFTABLES, why)
    return BackendTables(chains, 0, uncounted=uncounted, mangle_unsure=_mangle_unsure(read))


def _mangle_unsure(read: _NftTables) -> Unread | None:
    """A mangle table nft wrote a base chain in: iptables-nft-save 1.8.7 (bullseye's, in the first
    distroless-iptables images) prints nothing of the table where that chain is not one of iptables' own as iptables
    hooks it ("Table `mangle' is incompatible"), 1.8.9 (bookworm's) its chains all the same (both checked in a fresh
    namespace, with a chain of another name and with PREROUTING at another priority). Rules nft wrote there (a
    counter, a mark set, an anonymous set's match) hid no chain from either (checked alike). The lab does not tell
    an iptables-like hook from another, nor which release the image carries, so the chains kubelet left there are
    not known to be seen."""
    hooked = sorted(
        {
            f"{family} mangle"
            for (family, table), chain in read.base_chains
            if table == "mangle" and _stands(read, (family, table), chain)
        }
    )
    if not hooked:
        return None
    why = (
        f"it writes a base chain in table {', '.join(hooked)}, and whether iptables-nft-save -t mangle then prints"
        " that table's chains depends on its release (1.8.7 prints none where the chain is not iptables' own, 1.8.9"
        " prints them): the lab does not tell which"
    )
    return Unread(NFTABLES, why)


def _stands(read: _NftTables, table: tuple[str, str], chain: str) -> bool:
    return chain in read.tables.get(table, {})


def _xtables(read: _NftTables) -> Iterator[tuple[tuple[str, str], dict[str, int]]]:
    return ((key, names) for key, names in read.tables.items() if key[0] in _XTABLES_FAMILIES and key[1] in BUILTIN)


def _tokens(script: str) -> list[str]:
    """The script's words, braces, semicolons and line ends, its comments left out."""
    return _TOKEN.findall(_COMMENT.sub(r"\1", script) + "\n")


def _statements(tokens: list[str]) -> Iterator[list[str]]:
    """Top-level statements, each with its braced body (ended by a line end or `;` outside braces)."""
    statement: list[str] = []
    depth = 0
    for token in tokens:
        depth += {"{": 1, "}": -1}.get(token, 0)
        if depth == 0 and token in ("\n", ";"):
            if statement:
                yield statement
            statement = []
        else:
            statement.append(token)
    if statement:
        yield statement


def _table_of(words: list[str]) -> tuple[tuple[str, str], list[str]]:
    """(family, name) of the table the words start with, and the words after it."""
    if words and words[0] in _FAMILIES:
        return (words[0], words[1] if len(words) > 1 else ""), words[2:]
    return ("ip", words[0] if words else ""), words[1:]


def _apply(read: _NftTables, statement: list[str]) -> None:
    """One top-level statement's effect on the ip and ip6 tables."""
    words = statement[1:] if statement[0] in ("add", "create", "insert", "replace") else statement
    verb, rest = words[0] if words else "", words[1:]
    if any(word.startswith("$") for word in statement) or verb in ("include", "define", "redefine"):
        read.unread = f"{' '.join(statement[:2])!r} is not read by the lab (variables and included files)"
    elif verb == "table":
        table, body = _table_of(rest)
        read.tables.setdefault(table, {})
        _table_body(read, table, body)
    elif verb in ("chain", "rule"):
        table, after = _table_of(rest)
        if after and verb == "chain":
            read.chain(table, after[0])
            _chain_body(read, table, after[0], after[1:])
        elif after:
            read.rule(table, after[0])
    elif statement[:2] == ["flush", "ruleset"]:
        read.tables.clear()
    elif verb in ("delete", "destroy", "flush") and rest[:1] in (["table"], ["chain"]):
        _remove(read, verb, rest[0], *_table_of(rest[1:]))
    elif verb in ("delete", "destroy", "flush", "reset", "rename") and _touches_xtables(rest):
        read.unread = f"{' '.join(statement[:4])!r} changes what stands in a table iptables-nft-save reads"


def _remove(read: _NftTables, verb: str, what: str, table: tuple[str, str], after: list[str]) -> None:
    """`delete table`, `flush table`, `delete chain`, `flush chain`: what stands of the table or chain after it."""
    chains = read.tables.get(table, {})
    named = [after[0]] if what == "chain" and after else list(chains) if what == "table" else []
    if verb == "flush":
        chains.update(dict.fromkeys((name for name in named if name in chains), 0))
    elif what == "table":
        read.tables.pop(table, None)
    else:
        for name in named:
            chains.pop(name, None)


def _touches_xtables(words: list[str]) -> bool:
    """Whether a statement's object (`table ip filter`, `chain ip6 mangle X`) is an ip or ip6 table named as
    iptables' or cannot be told."""
    if len(words) < 2 or words[0] not in ("table", "chain", "rule", "set", "map", "element"):
        return True
    (family, name), _ = _table_of(words[1:])
    return family in _XTABLES_FAMILIES and name in BUILTIN


def _blocks(body: list[str]) -> Iterator[list[str]]:
    """The statements inside the outermost braces of `body` (a table's or a chain's)."""
    if "{" not in body or body[-1] != "}":
        return iter(())
    return _statements(body[body.index("{") + 1 : -1])


def _table_body(read: _NftTables, table: tuple[str, str], body: list[str]) -> None:
    for statement in _blocks(body):
        if statement[0] == "chain" and len(statement) > 1:
            read.chain(table, statement[1])
            _chain_body(read, table, statement[1], statement[2:])


def _chain_body(read: _NftTables, table: tuple[str, str], chain: str, body: list[str]) -> None:
    for statement in _blocks(body):
        if statement[0] == "type":
            read.base_chains.add((table, chain))
        elif statement[0] not in _CHAIN_PROPERTIES:
            read.rule(table, chain)
