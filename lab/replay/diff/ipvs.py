"""ipvs mode's other two dumps in one form: `ipset save` (each KUBE- set's type and members) and the virtual servers
of `ipvsadm -Sn` (`ipvsadm-save -n`, and render's ipvsadm-restore input) or of `ipvsadm -Ln`, each with its real
servers. Counters and connection counts are dropped; members and servers are sets."""

from __future__ import annotations

import re

from lab.replay.dump import DumpError
from lab.replay.review import split_words

# The set options that change which packets match: its type and family. hashsize, maxelem, bucketsize and initval
# are sizes and seeds (ipset 7.x adds bucketsize and a random initval to every saved set).
_VALUED = {"family", "range", "netmask", "timeout", "hashsize", "maxelem", "bucketsize", "initval", "size", "markmask"}
_SET_OPTIONS = {"family", "range", "netmask", "timeout", "counters", "comment", "skbinfo"}


def _set_options(words: list[str]) -> list[str]:
    """A create line's options that change which packets match, sorted (flags alone, the rest with their value)."""
    kept, at = [], 0
    while at < len(words):
        takes_value = words[at] in _VALUED and at + 1 < len(words)
        option = " ".join(words[at : at + 1 + takes_value])
        if words[at] in _SET_OPTIONS:
            kept.append(option)
        at += 1 + takes_value
    return sorted(kept)


def ipsets(text: str) -> dict[str, tuple[str, dict[str, int]]]:
    """name → (type and options, {member: line})."""
    sets: dict[str, tuple[str, dict[str, int]]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        words = split_words("ipsets", line.strip(), number)
        if words[0] == "create" and len(words) >= 3:
            kept = _set_options(words[3:])
            sets[words[1]] = (" ".join([words[2], *kept]), {})
        elif words[0] == "add" and len(words) >= 3:
            if words[1] not in sets:
                raise DumpError("ipsets", f"a member of {words[1]}, which no earlier create line makes", number)
            sets[words[1]][1].setdefault(" ".join(words[2:]).removesuffix(" -exist"), number)
        else:
            raise DumpError("ipsets", "expected `create NAME TYPE ...` or `add NAME MEMBER` (ipset save)", number)
    return sets


_SAVED_VIRTUAL = re.compile(r"-A -([tuf]) (\S+) -s (\S+)(.*)")
_SAVED_REAL = re.compile(r"-a -([tuf]) (\S+) -r (\S+) -([gim]) -w (\d+)(.*)")
_LISTED_VIRTUAL = re.compile(r"(TCP|UDP|SCTP|FWM)\s+(\S+)\s+(\S+)(.*)")
_LISTED_REAL = re.compile(r"->\s+(\S+)\s+(Masq|Route|Tunnel|Local)\s+(\d+)\s+\d+\s+\d+")
_PROTOCOLS = {"t": "TCP", "u": "UDP", "f": "FWM"}
_FORWARD = {
    "m": "masq",
    "g": "route",
    "i": "tunnel",
    "Masq": "masq",
    "Route": "route",
    "Tunnel": "tunnel",
    "Local": "local",
}


def _flags(text: str) -> str:
    """`-p 10800` (saved) and `persistent 10800` (listed) in one form."""
    return " ".join(text.replace("-p ", "persistent ").split())


def virtual_servers(text: str) -> dict[str, tuple[int, dict[str, int]]]:
    """`TCP 10.96.0.10:80 rr` → (its line, {`10.244.1.2:8080 masq weight 1`: line}), from -Sn or -Ln."""
    servers: dict[str, tuple[int, dict[str, int]]] = {}
    current = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("IP Virtual Server", "Prot LocalAddress", "-> RemoteAddress")):
            continue
        if match := _SAVED_VIRTUAL.fullmatch(line):
            proto, address, scheduler, flags = match.groups()
            current = " ".join(f"{_PROTOCOLS[proto]} {address} {scheduler} {_flags(flags)}".split())
            servers.setdefault(current, (number, {}))
        elif match := _SAVED_REAL.fullmatch(line):
            proto, address, real, forward, weight, _ = match.groups()
            service = next((s for s in servers if s.startswith(f"{_PROTOCOLS[proto]} {address} ")), None)
            if service is None:
                raise DumpError("ipvs", f"a real server of {address}, which no earlier -A line makes", number)
            servers[service][1].setdefault(f"{real} {_FORWARD[forward]} weight {weight}", number)
        elif match := _LISTED_VIRTUAL.fullmatch(line):
            proto, address, scheduler, flags = match.groups()
            current = " ".join(f"{proto} {address} {scheduler} {_flags(flags)}".split())
            servers.setdefault(current, (number, {}))
        elif (match := _LISTED_REAL.match(line)) and current:
            real, forward, weight = match.groups()
            servers[current][1].setdefault(f"{real} {_FORWARD[forward]} weight {weight}", number)
        else:
            raise DumpError(
                "ipvs",
                "expected a line of `ipvsadm -Sn` (-A -t VIP:PORT -s SCHED, -a -t VIP:PORT -r RIP:PORT -m -w N) or of "
                "`ipvsadm -Ln` (TCP VIP:PORT SCHED, -> RIP:PORT Masq WEIGHT ACTIVE INACTIVE)",
                number,
            )
    return servers
