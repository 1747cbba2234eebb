"""A rule line's options as iptables reads them with getopt_long: a long option by its full name or by any prefix of
it that begins no other (`--app` is `--append`, `--new-c` `--new-chain`; `--in` begins `--insert` and
`--in-interface`, and iptables refuses it), a short one with its argument joined (`-AFOO`) or the next word.

iptables' own options are original_opts of iptables/iptables.c (legacy) and iptables/xtables.c (nft): the same
table in both, and unchanged from v1.8.7 to v1.8.11 (Debian bullseye's, bookworm's and trixie's), READ in netfilter's
iptables as PKRoma/iptables mirrors it, at v1.8.9 (11407d91a1bece630e0e1f2063ce726e4045827d). getopt_long reports
an ambiguous or unknown name alike, and iptables then says `unknown option "--in"` (iptables/xshared.c
command_default at that commit). Each reading here was checked against this machine's iptables 1.8.9, nft and
legacy, and their -restore, in a namespace of its own."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# Each long option of iptables' own and the short option it is; two names of one option (source and src,
# destination and dst) are one option to getopt_long, so `--s` is ambiguous only for --set-counters.
LONG = {
    **{"append": "-A", "delete": "-D", "check": "-C", "insert": "-I", "replace": "-R", "list": "-L"},
    **{"list-rules": "-S", "flush": "-F", "zero": "-Z", "new-chain": "-N", "delete-chain": "-X"},
    **{"rename-chain": "-E", "policy": "-P", "source": "-s", "destination": "-d", "src": "-s", "dst": "-d"},
    **{"protocol": "-p", "in-interface": "-i", "jump": "-j", "table": "-t", "match": "-m", "numeric": "-n"},
    **{"out-interface": "-o", "verbose": "-v", "wait": "-w", "wait-interval": "-W", "exact": "-x"},
    **{"fragments": "-f", "version": "-V", "help": "-h", "line-numbers": "-0", "modprobe": "-M"},
    **{"set-counters": "-c", "goto": "-g", "ipv4": "-4", "ipv6": "-6"},
}
# The options whose argument is required, so the next word when it is not joined (IPT_OPTSTRING's `X:` in
# iptables/xshared.h at v1.8.9; an optional one, `X::`, is only ever joined).
WITH_ARGUMENT = frozenset(f"-{letter}" for letter in "ACDEIMNPRcdijopstgm")
# The options that take no argument: `--numeric=1` is refused.
NO_ARGUMENT = frozenset(("-n", "-v", "-x", "-f", "-V", "-0", "-4", "-6"))
# After these a word may be an extension's option: -m loads a match, -j a target, -p its protocol's match (when
# a word follows that iptables' own options do not name).
LOADS_EXTENSION = ("-m", "-j", "-p")
# iptables' commands (iptables(8): COMMANDS). A line gives one, or -L or -S with -Z (add_command's `othercmds` in
# iptables/xshared.c do_parse at v1.8.9): "Cannot use -N with -A".
COMMANDS = ("-A", "-I", "-N", "-D", "-R", "-F", "-Z", "-X", "-P", "-E", "-C", "-L", "-S")
_ALONGSIDE = {"-L": ("-Z",), "-S": ("-Z",), "-Z": ("-L", "-S")}
# iptables-restore's words: split at blanks, a double-quoted one (a comment's text) whole.
_RESTORE_WORD = re.compile(r'"[^"]*"|\S+')


class Refused(ValueError):
    """A word iptables refuses, and why, in words."""


@dataclass(frozen=True)
class Option:
    """One option of a rule line: its short form, its argument, the word as written, and whether the word is an
    abbreviation after an extension's options joined iptables' own (which of them it begins is then not known)."""

    name: str
    argument: str
    word: str
    unsure: bool = False


def rule_options(rule: str) -> Iterator[Option]:
    """Each option of a restore line (its counters taken off) as iptables reads it, in order; raises Refused at the
    first word iptables refuses. Words that are no option of iptables' own (an extension's, an argument) are left
    out."""
    words = _RESTORE_WORD.findall(rule)
    extension = False
    commands: list[Option] = []
    at = 0
    while at < len(words):
        word = words[at]
        at += 1
        option = _option(word, extension)
        if option is None:
            continue
        if option.name in WITH_ARGUMENT and not option.argument and not option.unsure and at < len(words):
            option = Option(option.name, words[at], word)
            at += 1
        extension = extension or option.name in LOADS_EXTENSION
        if option.name in COMMANDS and not option.unsure:
            _one_command(commands, option)
            commands.append(option)
        yield option


def _one_command(given: list[Option], command: Option) -> None:
    """Refuses a command where the line gave one it does not go with."""
    if earlier := next((c for c in given if c.name not in _ALONGSIDE.get(command.name, ())), None):
        raise Refused(
            f"{command.word} is a second command, after {earlier.word}: iptables takes one a line (-L or -S with -Z"
            " alone)"
        )


def _option(word: str, extension: bool) -> Option | None:
    if word.startswith("--") and len(word) > 2:
        return _long(word, extension)
    if word.startswith("-") and len(word) > 1 and word != "--":
        return Option(word[:2], word[2:], word)
    return None


def _long(word: str, extension: bool) -> Option | None:
    """`--NAME[=VALUE]`: the option whose full name it is, else the one option it begins."""
    name, equals, value = word[2:].partition("=")
    begun = sorted({LONG[full] for full in LONG if full.startswith(name)})
    short = LONG.get(name) or (begun[0] if len(begun) == 1 else "")
    # Ambiguous after an extension too: no extension of this machine's iptables has an option of such a name.
    if not short and len(begun) > 1:
        options = ", ".join(f"--{full}" for full in LONG if full.startswith(name))
        raise Refused(f"{word} is ambiguous, the start of {options}: iptables refuses it; write the option in full")
    if not short and not extension:
        raise Refused(
            f"{word} is no option of iptables', and no -m, -j or -p before it loads an extension that could have it:"
            " iptables refuses it"
        )
    if short in NO_ARGUMENT and equals:
        raise Refused(f"{word}: --{_full(short)} takes no value: iptables refuses it")
    if not short:
        return None
    return Option(short, value, word, unsure=extension and name not in LONG)


def _full(short: str) -> str:
    return next(full for full, option in LONG.items() if option == short)
