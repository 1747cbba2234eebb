"""Which dump a file is, judged on its first line before anything of it is quoted.

A path given to `lab replay` or `lab diff` (run as root) may name any file of the machine; until its first line
(past blank lines and comments) is the one its tool writes first, the file is no dump of that kind and an error
names the line, never its text. Once it is, the review and the parsers quote what they refuse, as users need.
"""

from __future__ import annotations

import re

from lab.describe.text_lines import content_lines
from lab.replay.dump import DumpError

_XTABLES = (re.compile(r"\*\S+"), "an iptables-save dump", "a `*TABLE` line (*filter, *nat ...)")
# `nft list ruleset` starts with a table block; kube-proxy's transaction (nft -f) with a command on an object.
_NFT_OBJECTS = "table|chain|rule|set|map|element|flowtable|counter|quota|limit|ct|synproxy|secmark|ruleset"
_NFT_FIRST = rf"table( \S+)? \S+ \{{.*|(add|create|insert|replace|delete|destroy|flush) ({_NFT_OBJECTS})( .*)?"
_FIRST_LINES = {
    "rules": _XTABLES,
    "rules6": _XTABLES,
    "nft": (
        re.compile(_NFT_FIRST),
        "an nft ruleset",
        "`table FAMILY NAME {` (nft list ruleset) or a command such as `add table ip kube-proxy`",
    ),
    "ipsets": (re.compile(r"create \S+ \S+( .*)?"), "an ipset save", "`create NAME TYPE ...`"),
    "ipvs": (
        re.compile(r"-A -[tuf] \S+ .*|IP Virtual Server version .*"),
        "an ipvsadm dump",
        "`-A -t VIP:PORT ...` (ipvsadm -Sn) or `IP Virtual Server version ...` (ipvsadm -Ln)",
    ),
}


def check_first_line(dump: str, text: str) -> None:
    """Refuse `text`, given as `dump` (rules, rules6, nft, ipsets, ipvs), unless its first line is that dump's."""
    pattern, kind, expected = _FIRST_LINES[dump]
    for number, line in content_lines(text):
        if not pattern.fullmatch(line):
            raise DumpError(
                dump,
                f"not {kind}: its first line is expected to be {expected}; "
                "lab quotes nothing of a file it does not recognise",
                number,
            )
        return
