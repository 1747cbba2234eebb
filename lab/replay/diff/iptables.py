"""iptables rules in one form, whether kube-proxy wrote them (`iptables-restore` input, as lab render prints) or
`iptables-save` printed them back: the same rule reads the same.

iptables-save reorders a rule's matches (addresses and protocol first), adds what the kernel stores by default
(`/32`, `--reject-with icmp-port-unreachable`, `-m recent`'s `--mask` and `--rsource`), prints marks in short hex
and `MARK --or-mark X` as `--set-xmark X/X`, and a probability to 11 digits where kube-proxy writes 10. A rule
here is its matches as a sorted set (within one rule their order changes no verdict: kube-proxy's matches have
no side effect but `-m recent --set`, which comes with its own target), each in the kernel's form.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from lab.describe.text_lines import content_lines
from lab.replay.dump import DumpError
from lab.replay.review import split_words

# Options of iptables itself, each with one value; everything else belongs to the -m module or -j target before it.
_BASIC = {
    "-s": "-s", "--source": "-s", "--src": "-s",
    "-d": "-d", "--destination": "-d", "--dst": "-d",
    "-p": "-p", "--protocol": "-p",
    "-i": "-i", "--in-interface": "-i",
    "-o": "-o", "--out-interface": "-o",
}  # fmt: skip
_BASIC_ORDER = ["-s", "-d", "-i", "-o", "-p"]
_FLAGS = {"-f", "--fragment"}


@dataclass(frozen=True)
class Rule:
    """One rule: `line` its number in the text it came from; `words` the rule as written, after -A CHAIN."""

    table: str
    chain: str
    line: int
    words: tuple[str, ...]


@dataclass(frozen=True)
class Tables:
    """Each table's chains in order of declaration, and their rules in order."""

    chains: dict[str, list[str]]  # table -> chain names
    rules: list[Rule]


def parse(text: str, dump: str = "rules") -> Tables:
    """iptables-save output or iptables-restore input; anything else is refused with its line."""
    chains: dict[str, list[str]] = {}
    rules: list[Rule] = []
    table = ""
    for number, line in content_lines(text):
        if line.startswith("*"):
            table = line[1:]
            chains.setdefault(table, [])
        elif line == "COMMIT":
            table = ""
        elif not table:
            raise DumpError(dump, "a rule or chain outside a table: expected a `*TABLE` line before it", number)
        elif line.startswith(":"):
            chains[table].append(line[1:].split()[0])
        elif line.startswith(("-A ", "--append ")):
            words = split_words(dump, line, number)
            if len(words) < 2:
                raise DumpError(dump, "-A without a chain name", number)
            rules.append(Rule(table, words[1], number, tuple(words[2:])))
        else:
            raise DumpError(
                dump, "expected a line of iptables-save: `*TABLE`, `:CHAIN POLICY`, `-A CHAIN RULE` or COMMIT", number
            )
    return Tables(chains, rules)


def _address(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=False))
    except ValueError:
        return value


def _hex(value: str) -> str:
    """0x00004000/0x00004000 → 0x4000/0x4000, as iptables-save prints marks."""
    return "/".join(
        hex(int(part, 0)) if re.fullmatch(r"0x[0-9a-fA-F]+|\d+", part) else part for part in value.split("/")
    )


def _mark_target(option: str, value: str) -> tuple[str, str]:
    """MARK's --or/--xor/--and/--set-mark as the --set-xmark VALUE/MASK the kernel stores."""
    number = int(value.split("/")[0], 0)
    if option == "--or-mark":
        return "--set-xmark", f"{hex(number)}/{hex(number)}"
    if option == "--xor-mark":
        return "--set-xmark", f"{hex(number)}/0x0"
    if option == "--and-mark":
        return "--set-xmark", f"0x0/{hex(~number & 0xFFFFFFFF)}"
    if option == "--set-mark" and "/" not in value:
        return "--set-xmark", f"{hex(number)}/0xffffffff"
    return "--set-xmark", _hex(value)


def _option(option: str, values: list[str]) -> str:
    value = " ".join(values)
    bare = option.removeprefix("! ")
    if bare == "--probability":
        value = f"{float(value):.6f}"  # 10 digits written, 11 saved from the kernel's 31-bit fraction
    elif bare in ("--mark", "--set-xmark"):
        value = _hex(value)
    elif bare == "--ctstate":
        value = ",".join(sorted(value.split(",")))
    elif option == "--comment":
        value = f'"{value}"'
    return f"{option} {value}".strip()


# What the kernel adds by default, per IP version: -m recent's --mask, REJECT's --reject-with.
_RECENT_MASK = {4: "--mask 255.255.255.255", 6: "--mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}
_REJECT_WITH = {4: "--reject-with icmp-port-unreachable", 6: "--reject-with icmp6-port-unreachable"}


def _module(name: str, options: list[tuple[str, list[str]]], version: int) -> str:
    """`-m NAME` and its options in a fixed order, with what the kernel adds by default (`version`: the IP version
    of the rules, 4 for iptables, 6 for ip6tables)."""
    texts = []
    for option, values in options:
        if name == "MARK" and option in ("--or-mark", "--xor-mark", "--and-mark", "--set-mark", "--set-xmark"):
            option, value = _mark_target(option, values[0] if values else "0")
            texts.append(f"{option} {value}")
        else:
            texts.append(_option(option, values))
    if name == "recent":
        texts += [d for d in (_RECENT_MASK[version], "--rsource") if not any(t.startswith(d[:6]) for t in texts)]
    if name == "REJECT" and not any(t.startswith("--reject-with") for t in texts):
        texts.append(_REJECT_WITH[version])
    return " ".join(sorted(texts))


def _is_option(word: str) -> bool:
    return word == "!" or (word.startswith("-") and len(word) > 1 and not word[1].isdigit())


def canonical(rule: Rule, dump: str = "rules", version: int = 4) -> str:
    """The rule in one form: basic matches in iptables-save's order, then the -m modules sorted, then the target
    (`version`: 6 for an ip6tables rule)."""
    words = rule.words
    basic: dict[str, str] = {}
    modules: list[tuple[str, list[tuple[str, list[str]]]]] = []
    target: tuple[str, list[tuple[str, list[str]]]] | None = None
    current: list[tuple[str, list[str]]] | None = None
    negate = False
    at = 0
    while at < len(words):
        word = words[at]
        if word == "!":
            negate = True
        elif word in _BASIC and at + 1 < len(words):
            value = words[at + 1]
            at += 1
            value = _address(value) if _BASIC[word] in ("-s", "-d") else value
            basic[_BASIC[word]] = f"{'! ' if negate else ''}{_BASIC[word]} {value}"
            negate = False
        elif word in _FLAGS:
            basic["-f"] = f"{'! ' if negate else ''}-f"
            negate = False
        elif word in ("-m", "--match") and at + 1 < len(words):
            current = []
            modules.append((words[at + 1], current))
            at += 1
        elif word in ("-j", "--jump", "-g", "--goto") and at + 1 < len(words):
            current = []
            target = (f"{'-g' if word in ('-g', '--goto') else '-j'} {words[at + 1]}", current)
            at += 1
        elif word.startswith("-") and current is not None:
            values = []
            # A comment is one word whatever it says; other values run to the next option.
            while at + 1 < len(words) and (word == "--comment" and not values or not _is_option(words[at + 1])):
                values.append(words[at + 1])
                at += 1
            current.append((f"! {word}" if negate else word, values))
            negate = False
        else:
            raise DumpError(
                dump,
                f"`{word[:40]}` in chain {rule.chain}: expected an option (-s, -p, -m MODULE, -j TARGET ...)",
                rule.line,
            )
        at += 1
    parts = [basic[key] for key in _BASIC_ORDER if key in basic] + (["-f"] if "-f" in basic else [])
    parts += sorted(f"-m {name} {_module(name, options, version)}".strip() for name, options in modules)
    if target:
        name = target[0].split()[1]
        parts.append(f"{target[0]} {_module(name, target[1], version)}".strip())
    return " ".join(parts)
