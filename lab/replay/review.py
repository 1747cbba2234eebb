"""What a replayed dump may hold: only what `iptables-save`, `nft list ruleset` (or kube-proxy's `nft -f`
transaction), `ipset save` and `ipvsadm -Sn` write. Anything else could make the tools, run as root, act outside
the lab's namespaces: nft's `include "FILE"` reads any file (and prints a line of it in its error), iptables'
`-m bpf --object-pinned` opens a pinned object, `-j LED` and `-j IDLETIMER` create files in the host's sysfs,
`--modprobe` names a program iptables runs, and ipset's `-file` writes or reads a file. Each refusal names the line
and what is wrong; a dump is reviewed before anything is built.

Words are read as the tools read them, not as they are typed: iptables' getopt_long takes `--jum` for `--jump`,
`--jump=LED` and `-jLED`; nft's scanner reads `0xaosf` as `0xa` and `osf`; ipset joins quoted parts to the text
around them. Inside a quoted string (a rule's comment) nothing is a keyword, so `--comment "-j LED"` or
`comment "include"` is harmless, and a quote left open is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from lab.describe.digits import is_ascii_number
from lab.describe.ip import AddressError, canonical_ip
from lab.replay.dump import DumpError, without_counters
from lab.replay.xtables_options import LONG_OPTIONS, OWN_OPTIONS, SHORT_OPTSTRING

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
    # As iptables' -j SECMARK (refused below): a secmark object names a security context of the host's LSM.
    "secmark": "`secmark` labels packets with a security context of this machine's LSM",
    # As iptables' -j AUDIT: `log level audit` writes to the audit log, which no namespace confines (nft_log).
    "audit": "`log level audit` writes to this machine's audit log, which no namespace confines",
}
# `ct helper`, `ct timeout` and `ct expectation` name a conntrack helper or policy the kernel loads by name (a module
# of the machine's kernel, nfct-helper-NAME); kube-proxy writes none. `timeout` alone is a set's, and stays.
_NFT_CT_OBJECTS = ("helper", "timeout", "expectation")


def _shown(word: str) -> str:
    """A word of a dump as an error quotes it: its first 40 characters."""
    return word if len(word) <= 40 else f"{word[:40]}..."


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


# A run of the characters nft's scanner continues a name with (src/scanner.l `string` at v1.0.6, a01fe3e4, in
# netfilter's nftables as mirrored in 1g4-mirror/nftables): a name that starts a word with a letter, `_` or `.`
# is one token to its end. A token that starts before a run (an address `ab::`, a MAC address, a classid `ab:cd`)
# or a number that starts one (`0xa`) may end inside it, and a keyword may be the token after: nft reads
# `0xaosf` as `0xa osf`. Keywords are matched in their case only, as the scanner does.
_NFT_NAME_RUN = re.compile(r"[A-Za-z0-9/_.-]+")


def _nft_keyword(word: str) -> str | None:
    """The keyword of _NFT_NEVER nft's scanner may read in `word` (outside strings): one a run of name characters
    is, or ends with where the run is not a name that starts the word."""
    for run in _NFT_NAME_RUN.finditer(word):
        one_name = run.start() == 0 and run.group()[0] not in "0123456789/-"
        for keyword in _NFT_NEVER:
            if run.group() == keyword or (run.group().endswith(keyword) and not one_name):
                return keyword
    return None


def review_nft(text: str) -> None:
    statement_start, previous = True, ""
    for line, depth, word in _nft_words(text):
        if word in "{};":
            statement_start = word != "}"  # `{ 10.0.0.0/8 } drop`: a rule goes on after an anonymous set
            continue
        if previous == "ct" and word in _NFT_CT_OBJECTS:
            raise DumpError(
                "nft", f"`ct {word}` makes the kernel load a conntrack {word} by name, on this machine", line
            )
        previous = word
        if "$" in word:  # nft's scanner starts a variable at a `$` inside a word too: `a$b` is `a` and `$b`
            raise DumpError("nft", f"`{word}` holds a variable ($), which `nft list ruleset` never writes", line)
        if keyword := _nft_keyword(word):
            said = "" if word == keyword else f"`{_shown(word)}` holds `{keyword}`, which nft reads as a word: "
            raise DumpError("nft", said + _NFT_NEVER[keyword], line)
        if statement_start and depth == 0 and word not in _NFT_COMMANDS:
            raise DumpError(
                "nft",
                f"`{word}` is no part of a ruleset: a dump holds `table` blocks (or add, create, insert, replace, "
                "delete, destroy and flush commands)",
                line,
            )
        statement_start = False


def split_quoted(dump: str, line: str, number: int) -> list[tuple[str, bool]]:
    """A line's words as iptables-restore splits them, each with whether it was quoted: double quotes group, a
    backslash escapes a quote. The save commands quote whole words, so a quote or backslash inside an unquoted word
    (where the tools' and this splitting could differ) is refused."""
    words: list[tuple[str, bool]] = []
    for match in re.finditer(r'"((?:[^"\\]|\\.)*)("?)|(\S+)', line):
        if match.group(3) is not None:
            if '"' in match.group(3) or "\\" in match.group(3):
                raise DumpError(dump, f"a quote or backslash inside the word {match.group(3)[:40]}", number)
            words.append((match.group(3), False))
        elif not match.group(2):
            raise DumpError(dump, 'a string opened with " is not closed on its line', number)
        elif match.end() < len(line) and not line[match.end()].isspace():
            raise DumpError(dump, f"a quoted string joined to the word after it: {line[match.start() :][:40]}", number)
        else:
            words.append((match.group(1), True))
    return words


def split_words(dump: str, line: str, number: int) -> list[str]:
    """A line's words as iptables-restore splits them (split_quoted), without their quotes."""
    return [word for word, _ in split_quoted(dump, line, number)]


# iptables: what would reach outside the namespace, by the target or match a rule names (after -j, -g or -m) ...
_NEVER_EXTENSIONS = {
    "LED": "-j LED creates a LED trigger in this machine's sysfs",
    "IDLETIMER": "-j IDLETIMER creates a timer file in this machine's sysfs",
    "AUDIT": "-j AUDIT writes to this machine's audit log, which no namespace confines",
    "SECMARK": "-j SECMARK labels packets with a security context of this machine's LSM",
    "CONNSECMARK": "-j CONNSECMARK copies security contexts of this machine's LSM",
    "geoip": "-m geoip reads its database from this machine's filesystem",
}
_NAMING = {"-j", "--jump", "-g", "--goto", "-m", "--match"}
# ... or by an option (a --cgroup classid is harmless; --path is cgroup's only). iptables reads --modprobe in a
# rule as on its command line (iptables/xshared.c at v1.8.9, 11407d91, `case 'M'`) and runs that program, as root,
# when it loads a kernel module (libxtables/xtables.c xtables_load_ko).
_MODPROBE = "--modprobe (-M) names a program iptables runs, as root, to load a kernel module"
_NEVER_OPTIONS = {
    "--object-pinned": "-m bpf --object-pinned opens a pinned BPF object on this machine's filesystem",
    "--path": "-m cgroup --path resolves a path in this machine's cgroup tree",
    "--modprobe": _MODPROBE,
    "-M": _MODPROBE,
    # -j CT --helper NAME and --timeout NAME make the kernel load a conntrack helper or timeout policy by name (a
    # module of this machine's kernel, nfct-helper-NAME); kube-proxy writes neither.
    "--helper": "--helper makes the kernel load a conntrack helper by name, a module of this machine's kernel",
    "--timeout": "--timeout makes the kernel look up (and load) a conntrack timeout policy by name on this machine",
}
_IPTABLES_LINES = re.compile(r"\*\S+|:\S+ \S+( \[\d+:\d+\])?|COMMIT|-[AIDRNXPFZ] .*|-[NXFZ]")


def _short_options(optstring: str) -> dict[str, int]:
    """{letter: how many colons follow it} of a getopt optstring (0: no value, 1: a value, 2: a value joined to it
    only), without its leading modes (`-`, `:`)."""
    return {match.group(1): len(match.group(2)) for match in re.finditer(r"(\w)(:{0,2})", optstring.lstrip("-:"))}


_SHORT = _short_options(SHORT_OPTSTRING)


def _long_options(name: str) -> list[str]:
    """The long options getopt_long may read `--name` as: the one of that name, else every one it abbreviates
    (iptables' own first: `--g` is --goto before it is an extension's --gateway)."""
    if name in LONG_OPTIONS:
        return [name]
    return sorted(
        (option for option in LONG_OPTIONS if option.startswith(name)), key=lambda o: (o not in OWN_OPTIONS, o)
    )


def _read_as_options(word: str, following: str) -> Iterator[tuple[str, str]]:
    """Each option getopt_long may read `word` as where an option stands (`--jump`, `-j`), with the value it would
    take: joined to it (`--jump=LED`, `-jLED`), else the next word; "" if it takes none. Short options run on within
    a word (`-vjLED` is -v, then -j LED); an abbreviation is read as every option it abbreviates."""
    if word.startswith("--") and len(word) > 2:
        name, joined, value = word[2:].partition("=")
        for option in _long_options(name):
            yield f"--{option}", value if joined else following
    elif word.startswith("-") and len(word) > 1 and not word.startswith("--"):
        for at, letter in enumerate(word[1:], 2):
            colons = _SHORT.get(letter, 0)
            if colons:
                yield f"-{letter}", word[at:] or (following if colons == 1 else "")
                return
            yield f"-{letter}", ""


def _not_as_saved(word: str) -> str | None:
    """What is wrong with an unquoted word iptables would read as an option in a form iptables-save never writes
    (every option in full, each option and each value a word of its own); None if nothing is."""
    if word.startswith("--") and len(word) > 2:
        name, joined, value = word[2:].partition("=")
        if joined:
            return f"`{_shown(word)}` joins an option to its value with `=`: iptables-save writes them as two words"
        options = _long_options(name)
        if options and options != [name]:
            named = ", ".join(f"--{option}" for option in options[:3]) + (", ..." if len(options) > 3 else "")
            return f"`{_shown(word)}` is an abbreviation (of {named}): iptables-save writes options in full"
    elif word.startswith("-") and len(word) > 2 and not word.startswith("--"):
        return (
            f"`{_shown(word)}` joins a short option to another or to its value: iptables-save writes each option and "
            "each value as a word of its own"
        )
    return None


def _review_rule(words: list[tuple[str, bool]], option: str, number: int) -> None:
    """Every word as iptables may read it: an unquoted one only in the form iptables-save writes; any word (a
    quoted one too: iptables-restore hands it to getopt_long like any other) that names, in any spelling, what
    reaches outside the namespace is refused. Where a word is an option's value (a comment) it is read as an
    option too, which errs only towards a refusal."""
    for at, (word, quoted) in enumerate(words):
        if not quoted and (wrong := _not_as_saved(word)):
            raise DumpError(option, wrong, number)
        following = words[at + 1][0] if at + 1 < len(words) else ""
        for read, value in _read_as_options(word, following):
            if read in _NEVER_OPTIONS:
                raise DumpError(option, _NEVER_OPTIONS[read], number)
            if read in _NAMING and value in _NEVER_EXTENSIONS:
                raise DumpError(option, _NEVER_EXTENSIONS[value], number)


def review_iptables(text: str, option: str = "rules") -> None:
    """An iptables-save or ip6tables-save dump (given by `option`), with its counters or without (`iptables-save
    -c`). -j LOG and NFLOG stay: outside the host's namespace the kernel logs nothing (nf_log_all_netns is 0 unless
    set) and NFLOG's netlink group has no listener in the lab."""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = without_counters(line.strip())
        if not stripped or stripped.startswith("#"):
            continue
        if not _IPTABLES_LINES.fullmatch(stripped):
            raise DumpError(
                option,
                "not a line of iptables-save (a *table, a :CHAIN policy, a -A rule or COMMIT)",
                number,
            )
        _review_rule(split_quoted(option, stripped, number), option, number)


def _ipset_words(line: str, number: int) -> list[str]:
    """A line's words as ipset restore splits them (lib/ipset.c build_argv, netfilter's ipset 7.21 as mirrored in
    serhepopovych/ipset, dffbdff2): a double quote, wherever it stands, opens or closes a quoted part (a backslash
    escapes nothing), and quoted parts join the text around them into one word; a space, a tab or a carriage
    return outside quotes ends a word, and an empty word is none."""
    words: list[str] = []
    word, quoted = "", False
    for char in line:
        if char == '"':
            quoted = not quoted
        elif char in " \t\r\n" and not quoted:
            words.append(word)
            word = ""
        else:
            word += char
    if quoted:
        raise DumpError("ipsets", 'a string opened with " is not closed on its line', number)
    return [word for word in [*words, word] if word]


def review_ipsets(text: str) -> None:
    """`ipset save`: create and add lines only; never `-file`, which makes ipset read or write a file. ipset matches
    its options strictly (lib/ipset.c ipset_match_envopt: `-f`, `-file`, `--f`, `--file`) and its commands by any
    prefix: every prefix of -file is refused, and a command only written in full."""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        words = _ipset_words(line, number)
        if not words or words[0] not in ("create", "add"):
            first = _shown(words[0] if words else line.strip())
            raise DumpError("ipsets", f"`{first}`: an ipset save holds only create and add lines", number)
        if any(re.fullmatch(r"--?f(i(le?)?)?", word) for word in words):
            raise DumpError("ipsets", "-file makes ipset read or write a file", number)


# What `ipvsadm -Sn` writes on an -A or -a line: the service (-t, -u, -f), scheduler (-s), persistence (-p, -M),
# real server (-r), forwarding (-g, -i, -m, --tun-*), weight and thresholds (-w, -x, -y), flags (-b). Not --pe: a
# persistence engine, like a scheduler, is a module the kernel loads by name (ip_vs_pe_NAME, ip_vs_NAME).
_IPVS_OPTIONS = {"-t", "-u", "-f", "-s", "-p", "-M", "-r", "-g", "-i", "-m", "-w", "-x", "-y", "-b"}
_IPVS_TUNNEL = {"--tun-type", "--tun-port", "--tun-nocsum", "--tun-csum", "--tun-remcsum"}
# The kernel's schedulers (net/netfilter/ipvs/ip_vs_*.c), each a module ip_vs_NAME: any other name is a module
# load of something else.
_IPVS_SCHEDULERS = {"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos"}


def review_ipvs(text: str) -> None:
    """`ipvsadm -Sn`: -A (a virtual server) and -a (a real server) lines only; anything else (a sync daemon, a
    clear, timeouts of the whole machine) is no part of a dump. Only the options -Sn writes, a scheduler of the
    kernel's, and numeric addresses (-n: a name would be resolved through this machine's name services)."""
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if words and words[0] not in ("-A", "-a"):
            raise DumpError("ipvs", f"`{words[0]}`: ipvsadm -Sn writes only -A and -a lines", number)
        for option, value in zip(words[1:], [*words[2:], ""], strict=True):
            if option.startswith("-") and option not in _IPVS_OPTIONS | _IPVS_TUNNEL:
                raise DumpError("ipvs", f"`{_shown(option)}`: no option ipvsadm -Sn writes on a service line", number)
            if option == "-s" and value not in _IPVS_SCHEDULERS:
                said = ", ".join(sorted(_IPVS_SCHEDULERS))
                raise DumpError("ipvs", f"-s {_shown(value)}: not one of the kernel's schedulers ({said})", number)
            if option in ("-t", "-u", "-r") and not _ipvs_endpoint(value):
                raise DumpError(
                    "ipvs", f"{option} {_shown(value)}: expected ADDRESS:PORT in numbers, as -Sn writes", number
                )


def _ipvs_endpoint(text: str) -> bool:
    """ADDRESS:PORT or [IPv6]:PORT, both numeric."""
    host, _, port = text.rpartition(":")
    try:
        canonical_ip(host[1:-1] if host.startswith("[") and host.endswith("]") else host)
    except AddressError:
        return False
    return is_ascii_number(port)
