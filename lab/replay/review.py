"""What a replayed dump may hold: only what `iptables-save`, `nft list ruleset` (or kube-proxy's `nft -f`
transaction), `ipset save` and `ipvsadm -Sn` write. Anything else could make the tools, run as root, act outside
the lab's namespaces: nft's `include "FILE"` reads any file (and prints a line of it in its error), iptables'
`-m bpf --object-pinned` opens a pinned object, `-j LED` and `-j IDLETIMER` create files in the host's sysfs, and
ipset's `-file` writes or reads a file. Each refusal names the line and what is wrong; a dump is reviewed before
anything is built.

Words are read as the tools read them: inside a quoted string (a rule's comment) nothing is a keyword, so
`--comment "-j LED"` or `comment "include"` is harmless, and a quote left open is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from lab.replay.dump import DumpError

# nft: what a ruleset or a transaction holds at its top level (`nft list ruleset` writes `table` blocks; kube-proxy's
# transaction, add/flush/delete commands). Any other command (include, define, list, monitor, export, import...)
# is no part of a dump.
_NFT_COMMANDS = {"table", "add", "create", "insert", "replace", "delete", "destroy", "flush"}
# Anywhere: variables and includes (nft's scanner reads them in every scope), and the two expressions whose nft
# looks at this machine's files: `osf` loads the OS fingerprint file, `socket cgroupv2 level N "PATH"` resolves
# PATH in the host's cgroup tree.
_NFT_NEVER = {
    "include": "`include` makes nft read another file",
    "define": "`define` (a variable) is no part of `nft list ruleset`'s output",
    "redefine": "`redefine` (a variable) is no part of `nft list ruleset`'s output",
    "undefine": "`undefine` (a variable) is no part of `nft list ruleset`'s output",
    "osf": "`osf` makes nft read the OS fingerprint file of this machine",
    "cgroupv2": "`socket cgroupv2` makes nft look up a path in this machine's cgroup tree",
}


def _nft_words(text: str) -> Iterator[tuple[int, int, str]]:
    """(line, brace depth, word) for every word outside strings and comments; `;`, `{` and `}` are words too."""
    depth = 0
    for number, line in enumerate(text.splitlines(), 1):
        at = 0
        while at < len(line):
            char = line[at]
            if char == '"':
                end = line.find('"', at + 1)
                if end < 0:
                    raise DumpError("nft", 'a string opened with " is not closed on its line', number)
                at = end + 1
            elif char == "#":
                break
            elif char in "{};":
                depth += {"{": 1, "}": -1}.get(char, 0)
                yield number, depth, char
                at += 1
            elif char.isspace():
                at += 1
            else:
                word = re.match(r'[^\s{};"#]+', line[at:])
                assert word is not None  # the character at `at` is none of those
                yield number, depth, word.group()
                at += word.end()
        yield number, depth, ";"  # a line's end ends a statement


def review_nft(text: str) -> None:
    statement_start = True
    for line, depth, word in _nft_words(text):
        if word in "{};":
            statement_start = word != "}"  # `{ 10.0.0.0/8 } drop`: a rule goes on after an anonymous set
            continue
        if "$" in word:  # nft's scanner starts a variable at a `$` inside a word too: `a$b` is `a` and `$b`
            raise DumpError("nft", f"`{word}` holds a variable ($), which `nft list ruleset` never writes", line)
        if word in _NFT_NEVER:
            raise DumpError("nft", _NFT_NEVER[word], line)
        if statement_start and depth == 0 and word not in _NFT_COMMANDS:
            raise DumpError(
                "nft",
                f"`{word}` is no part of a ruleset: a dump holds `table` blocks (or add, create, insert, replace, "
                "delete, destroy and flush commands)",
                line,
            )
        statement_start = False


def split_words(dump: str, line: str, number: int) -> list[str]:
    """A line's words as iptables-restore and ipset split them: double quotes group, a backslash escapes a quote.
    The save commands quote whole words, so a quote or backslash inside an unquoted word (where the tools' and
    this splitting could differ) is refused."""
    words: list[str] = []
    for match in re.finditer(r'"((?:[^"\\]|\\.)*)("?)|(\S+)', line):
        if match.group(3) is not None:
            if '"' in match.group(3) or "\\" in match.group(3):
                raise DumpError(dump, f"a quote or backslash inside the word {match.group(3)[:40]}", number)
            words.append(match.group(3))
        elif not match.group(2):
            raise DumpError(dump, 'a string opened with " is not closed on its line', number)
        elif match.end() < len(line) and not line[match.end()].isspace():
            raise DumpError(dump, f"a quoted string joined to the word after it: {line[match.start() :][:40]}", number)
        else:
            words.append(match.group(1))
    return words


# iptables: what would reach outside the namespace, by the option that names it.
_IPTABLES_NEVER = {
    "--object-pinned": "-m bpf --object-pinned opens a pinned BPF object on this machine's filesystem",
    "LED": "-j LED creates a LED trigger in this machine's sysfs",
    "IDLETIMER": "-j IDLETIMER creates a timer file in this machine's sysfs",
    "AUDIT": "-j AUDIT writes to this machine's audit log, which no namespace confines",
    "SECMARK": "-j SECMARK labels packets with a security context of this machine's LSM",
    "CONNSECMARK": "-j CONNSECMARK copies security contexts of this machine's LSM",
    "geoip": "-m geoip reads its database from this machine's filesystem",
}
# `-m cgroup --path P` resolves P in the host's cgroup tree (a --cgroup classid is harmless).
_CGROUP_PATH = "--path"
_IPTABLES_LINES = re.compile(r"\*\S+|:\S+ \S+( \[\d+:\d+\])?|COMMIT|-[AIDRNXPFZ] .*|-[NXFZ]")


def review_iptables(text: str, option: str = "rules") -> None:
    """An iptables-save or ip6tables-save dump (given by `option`). -j LOG and NFLOG stay: outside the host's
    namespace the kernel logs nothing (nf_log_all_netns is 0 unless set) and NFLOG's netlink group has no
    listener in the lab."""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not _IPTABLES_LINES.fullmatch(stripped):
            raise DumpError(
                option,
                "not a line of iptables-save (a *table, a :CHAIN policy, a -A rule or COMMIT)",
                number,
            )
        words = split_words(option, stripped, number)
        for at, word in enumerate(words):
            previous = words[at - 1] if at else ""
            if word in _IPTABLES_NEVER and (word.startswith("-") or previous in ("-j", "-g", "-m", "--jump")):
                raise DumpError(option, _IPTABLES_NEVER[word], number)
            if word == _CGROUP_PATH and "cgroup" in words:
                raise DumpError(option, "-m cgroup --path resolves a path in this machine's cgroup tree", number)


def review_ipsets(text: str) -> None:
    """`ipset save`: create and add lines only; never `-file`, which makes ipset read or write a file (ipset takes
    any unique prefix of an option: -f, -fi...)."""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        words = split_words("ipsets", line.strip(), number)
        if words[0] not in ("create", "add"):
            raise DumpError("ipsets", f"`{words[0]}`: an ipset save holds only create and add lines", number)
        if any(re.fullmatch(r"--?f(i(le?)?)?", word) for word in words):
            raise DumpError("ipsets", "-file makes ipset read or write a file", number)


def review_ipvs(text: str) -> None:
    """`ipvsadm -Sn`: -A (a virtual server) and -a (a real server) lines only; anything else (a sync daemon, a
    clear, timeouts of the whole machine) is no part of a dump."""
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if words and words[0] not in ("-A", "-a"):
            raise DumpError("ipvs", f"`{words[0]}`: ipvsadm -Sn writes only -A and -a lines", number)
