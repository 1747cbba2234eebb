"""Reading a real node's dumps (`iptables-save`, `nft list ruleset`, `ipvsadm -Sn`): which
endpoints its rules can DNAT to, which recent lists and nfacct objects they name."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lab.describe.digits import is_ascii_number
from lab.describe.ip import AddressError, canonical_ip, parse_ip
from lab.install.tools import InstallError
from lab.realize.families import endpoint


class DumpError(InstallError):
    """A dump lab replay cannot answer for. `dump` is which one ("rules", "ipvs", "nft"), `line` the
    1-based line to blame, if one is."""

    def __init__(self, dump: str, reason: str, line: int | None = None) -> None:
        self.dump, self.reason, self.line = dump, reason, line
        super().__init__(f"{f'line {line} of ' if line else ''}the {dump}: {reason}")


# `iptables-save -c` writes each rule's counters before it: `[PACKETS:BYTES] -A CHAIN ...`.
_RULE_COUNTERS = re.compile(r"^\[\d+:\d+\] (?=-A )", re.MULTILINE)


def without_counters(text: str) -> str:
    """An iptables-save dump (or one line of it) as `iptables-save` without -c writes it: the counters before each
    rule dropped (a chain's, `:CHAIN POLICY [0:0]`, are part of the line either way). Lines keep their numbers."""
    return _RULE_COUNTERS.sub("", text)


def _address(dump: str, address: str, line: int, what: str) -> str:
    """The address as Kubernetes parses one (lab/describe/ip.py), canonical: the lab builds pods at it."""
    try:
        return canonical_ip(address)
    except AddressError as exc:
        raise DumpError(dump, f"{what}: {exc}", line) from None


_DNAT = re.compile(r"-j DNAT --to-destination (\S+)")


def split_target(target: str) -> tuple[str, int | None]:
    """A NAT target's address and port, as iptables-save writes one: `10.0.0.1:80`, `10.0.0.1`, `[fd00::1]:80`,
    `[fd00::1]` or `fd00::1` (an IPv6 address with a port is always in brackets)."""
    if target.startswith("[") and "]" in target:
        address, _, rest = target[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif target.count(":") == 1:
        address, _, port = target.partition(":")
    else:
        address, port = target, ""
    return address, int(port) if is_ascii_number(port) else None


_PROTO = re.compile(r"-p (tcp|udp|sctp)\b")


@dataclass(frozen=True)
class Target:
    ip: str
    port: int | None  # None: DNAT keeps the original port
    protocol: str

    def __str__(self) -> str:
        return endpoint(self.ip, self.port) if self.port else self.ip

    @property
    def version(self) -> int:
        return parse_ip(self.ip).version


def dnat_targets(dump: str, dump_name: str = "rules") -> list[Target]:
    """Every `-j DNAT --to-destination` of the nat table, in dump order, without repeats (`dump_name`: the option
    that gave the dump, named in an error)."""
    found: dict[Target, None] = {}
    table = ""
    for number, line in enumerate(dump.splitlines(), 1):
        if line.startswith("*"):
            table = line[1:].strip()
        elif table == "nat" and line.startswith("-A ") and (match := _DNAT.search(line)):
            proto = _PROTO.search(line)
            address, port = split_target(match.group(1))
            ip = _address(dump_name, address, number, "DNAT to")
            found[Target(ip, port, proto.group(1) if proto else "tcp")] = None
    return list(found)


# nftables: `dnat to 10.0.0.1:80`, `dnat ip to 10.0.0.1` (inet tables); IPv6: `dnat to [fd00::1]:80`, `dnat ip6 to
# fd00::1`; not ranges, nor maps keyed by address.
_IPV4 = r"\d{1,3}(?:\.\d{1,3}){3}"
_IPV6 = r"[0-9a-fA-F]*:[0-9a-fA-F:.]*"
_NFT_DNAT = re.compile(rf"\bdnat (?:ip6? )?to (?:({_IPV4})(?::(\d+))?|\[({_IPV6})\](?::(\d+))?|({_IPV6}))(?=[\s;}}]|$)")
# kube-proxy 1.36+ picks the endpoint itself: `dnat ip addr . port to numgen random mod 2 map { 0 : IP . PORT ,
# 1 : IP . PORT }` as written, `dnat ip to numgen random mod 2 map { 0 : IP . PORT, ... }` as listed (ip6 in
# an IPv6 table).
_NFT_DNAT_NUMGEN = re.compile(r"\bdnat ip6? (?:addr \. port )?to numgen (?:random|inc) mod \d+ map \{([^}]*)\}")
_NFT_NUMGEN_ELEMENT = re.compile(rf"\d+ : ({_IPV4}|{_IPV6}) \. (\d+)")
_NFT_PROTO = re.compile(r"\b(?:meta l4proto|ip protocol|ip6 nexthdr) (tcp|udp|sctp)\b|\b(tcp|udp|sctp) dport\b")


def nft_dnat_targets(dump: str) -> list[Target]:
    """Every literal `dnat to` (of either family) of an `nft list ruleset` dump or an `nft -f` script (kube-proxy's
    endpoint chains: `meta l4proto tcp dnat to IP:PORT`), and every endpoint of a numgen-map DNAT (kube-proxy
    1.36+'s service chains), in dump order, without repeats."""
    found: dict[Target, None] = {}
    for line in dump.splitlines():
        for statement in line.split(";"):
            for match in _NFT_DNAT.finditer(statement):
                ip4, port4, ip6, port6, bare6 = match.groups()
                port = port4 or port6
                if ip := _nft_address(ip4 or ip6 or bare6):
                    found[Target(ip, int(port) if port else None, _nft_proto(statement[: match.start()]))] = None
            for match in _NFT_DNAT_NUMGEN.finditer(statement):
                proto = _nft_proto(statement[: match.start()])
                for text, port in _NFT_NUMGEN_ELEMENT.findall(match.group(1)):
                    if ip := _nft_address(text):
                        found[Target(ip, int(port), proto)] = None
    return list(found)


def _nft_address(text: str) -> str | None:
    """The address as Python writes it (nft may abbreviate otherwise); None for what only looks like one, which nft
    then refuses with its line."""
    try:
        return canonical_ip(text)
    except AddressError:
        return None


def _nft_proto(before: str) -> str:
    """The protocol a DNAT statement is limited to by what precedes it in its rule (tcp if nothing)."""
    proto = _NFT_PROTO.search(before)
    return next(filter(None, proto.groups())) if proto else "tcp"


# `-A -t 10.96.0.10:80 -s rr`, `-a -t [fd00:10:96::a]:80 -r [fd00:10:244:1::2]:8080 -m -w 1` (ipvsadm writes an
# IPv6 address in brackets).
_IPVS = re.compile(r"^-([Aa]) -([tu]) (\[[^]]+\]|[^\s:]+):(\d+)(?: .*?-r (\[[^]]+\]|[^\s:]+):(\d+))?")


def ipvs_table(dump: str) -> dict[tuple[str, str, int], list[Target]]:
    """`ipvsadm -Sn` → {(proto, VIP, port): real servers}, of either family (a dual-stack node's two proxiers share
    the one table)."""
    table: dict[tuple[str, str, int], list[Target]] = {}
    for number, line in enumerate(dump.splitlines(), 1):
        match = _IPVS.match(line.strip())
        if not match:
            continue
        kind, proto_flag, vip, port, rip, rport = match.groups()
        proto = "tcp" if proto_flag == "t" else "udp"
        address = _address("ipvs", vip.strip("[]"), number, "virtual server")
        servers = table.setdefault((proto, address, int(port)), [])
        if kind == "a" and rip:
            real = Target(_address("ipvs", rip.strip("[]"), number, "real server"), int(rport), proto)
            if real.version != parse_ip(address).version:  # the kernel takes that for a tunnel only
                raise DumpError(
                    "ipvs",
                    f"real server {rip} is not of its virtual server {vip}'s family (kube-proxy's never are)",
                    number,
                )
            servers.append(real)
    return table


# `-m recent --name X --rcheck --seconds N`: sessionAffinity ClientIP's check, in a KUBE-SVC chain.
_RECENT_NAME = re.compile(r"--name (\S+)")
_RECENT_SECONDS = re.compile(r"--seconds (\d+)")


def recent_lists(dump: str) -> dict[str, int | None]:
    """The xt_recent lists the rules use (-m recent), each with the --seconds its --rcheck allows."""
    lists: dict[str, int | None] = {}
    for line in dump.splitlines():
        if line.startswith("-A ") and " -m recent " in line and (name := _RECENT_NAME.search(line)):
            seconds = _RECENT_SECONDS.search(line)
            if seconds or name.group(1) not in lists:
                lists[name.group(1)] = int(seconds.group(1)) if seconds else None
    return lists


def nfacct_names(dump: str) -> list[str]:
    """The nfacct objects `-m nfacct --nfacct-name X` rules count into, in dump order."""
    return list(dict.fromkeys(re.findall(r"--nfacct-name\s+(\S+)", dump)))


# The families an nftables table may have (`table NAME` alone is an ip table), and those whose rules see a packet
# of each IP version.
_NFT_TABLE = re.compile(r"\btable (?:(ip6|ip|inet|arp|bridge|netdev) )?[^\s{;]")
_NFT_FAMILIES_SEEING = {4: ("ip", "inet"), 6: ("ip6", "inet")}


def check_nft_hooks(ruleset: str, version: int = 4) -> None:
    """An nftables ruleset with no base chain (`type ... hook ...`) acts on no packet: nothing to replay; nor does
    one with no table of the packet's family (an IPv6 packet meets `ip6` and `inet` tables only)."""
    if not re.search(r"\btype \w+ hook \w+", ruleset):
        raise DumpError(
            "nft",
            "no chain of the ruleset is attached to a hook (`type nat hook prerouting ...`), so it acts on no "
            "packet; give the node's whole `nft list ruleset`",
        )
    families = {match.group(1) or "ip" for match in _NFT_TABLE.finditer(ruleset)}
    seeing = _NFT_FAMILIES_SEEING[version]
    if not families & set(seeing):
        raise DumpError(
            "nft",
            f"it has no table of family {' or '.join(seeing)} (only {', '.join(sorted(families))}), and an "
            f"IPv{version} packet meets no other: give the node's whole `nft list ruleset` (a dual-stack node's "
            "kube-proxy writes `table ip kube-proxy` and `table ip6 kube-proxy`)",
        )
