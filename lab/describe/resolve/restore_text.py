"""The host's iptables rules (cluster.tools.host.iptablesRules) checked as iptables-restore reads its input: tables
opened by `*name` and closed by COMMIT, chains declared with a policy, rules inside a table whose long options iptables
takes (lab/describe/resolve/iptables_options.py). What a rule matches is left to the restore itself, which names the
line it refuses (lab/install/tools.py)."""

from __future__ import annotations

from lab.describe.resolve.iptables_options import Refused, rule_options
from lab.describe.text_lines import content_lines

# The tables iptables knows (iptables(8): TABLES) and the built-in chains of each, which alone take a policy.
BUILTIN = {
    "filter": ("INPUT", "FORWARD", "OUTPUT"),
    "nat": ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"),
    "mangle": ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"),
    "raw": ("PREROUTING", "OUTPUT"),
    "security": ("INPUT", "FORWARD", "OUTPUT"),
}
_POLICIES = ("ACCEPT", "DROP")


def restore_text_problem(text: str) -> str:
    """What is wrong with text as iptables-restore input, naming its line; "" when nothing is."""
    table = ""
    tables = 0
    for number, line in content_lines(text):
        if problem := _line_problem(line, table):
            return f"its line {number} ({line!r}): {problem}"
        if line.startswith("*"):
            table, tables = line[1:], tables + 1
        elif line == "COMMIT":
            table = ""
    if table:
        return f"table {table} is not closed: COMMIT expected after its last line"
    return "" if tables or not text.strip() else "no table: expected *filter, *nat, *mangle, *raw or *security"


def _line_problem(line: str, table: str) -> str:
    if line.startswith("*"):
        if table:
            return f"table {table} is not closed: COMMIT expected before the next table"
        if line[1:] not in BUILTIN:
            return f"no table iptables knows: expected one of {', '.join('*' + t for t in BUILTIN)}"
        return ""
    if not table:
        return "outside a table: expected *filter, *nat, *mangle, *raw or *security before it"
    if line.startswith(":"):
        return _chain_problem(line[1:].split(), table)
    if line != "COMMIT" and not without_counters(line).startswith("-"):
        return "expected a chain (:NAME POLICY), a rule (-A CHAIN ...) or COMMIT"
    return _options_problem(line)


def _options_problem(rule: str) -> str:
    """Why iptables refuses a rule's long option (ambiguous, unknown, given a value it takes none of); "" if none."""
    try:
        list(rule_options(without_counters(rule)))  # read to its end: it raises at the word iptables refuses
    except Refused as exc:
        return str(exc)
    return ""


def without_counters(rule: str) -> str:
    """A rule without the `[packets:bytes]` `iptables-save -c` writes before it, which iptables-restore reads and,
    without its -c, sets aside (qdeslandes/iptables, a mirror of netfilter's, iptables/iptables-restore.c at
    62272be8d8010617a692d4ca3d95c04ce50d2a97: tokenize_rule_counters before every rule); as it is otherwise."""
    counters, closed, rest = rule.partition("]")
    packets, colon, octets = counters[1:].partition(":")
    if rule.startswith("[") and closed and colon and packets and octets:
        return rest.strip()
    return rule


def _chain_problem(fields: list[str], table: str) -> str:
    """`:NAME POLICY [packets:bytes]`: a built-in chain's policy is ACCEPT or DROP (or `-`, left as it is), another
    chain's `-`: iptables-restore sets no policy on a chain of the user's."""
    if len(fields) not in (2, 3):
        return "a chain is declared as :NAME POLICY, optionally followed by [packets:bytes]"
    name, policy = fields[:2]
    if name in BUILTIN[table]:
        if policy not in (*_POLICIES, "-"):
            return f"{name} is a built-in chain of {table}: its policy is ACCEPT, DROP or -, not {policy}"
    elif policy != "-":
        return (
            f"{name} is no built-in chain of {table} ({', '.join(BUILTIN[table])}): only those take a policy, others -"
        )
    return ""


def tables_named(text: str) -> set[str]:
    """The tables an iptables-restore input opens (`*nat`)."""
    return {line.strip()[1:] for line in text.splitlines() if line.strip().startswith("*")}


def table_sections(text: str, tables: set[str]) -> str:
    """The parts of an iptables-restore input that fill the given tables, each from its `*name` to its COMMIT."""
    kept: list[str] = []
    keeping = False
    for line in text.splitlines():
        if line.strip().startswith("*"):
            keeping = line.strip()[1:] in tables
        if keeping:
            kept.append(line + "\n")
    return "".join(kept)
