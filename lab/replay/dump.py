"""Reading a real node's dumps (`iptables-save`, `nft list ruleset`, `ipvsadm -Sn`): which
endpoints its rules can DNAT to, which recent lists and nfacct objects they name."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from lab.install.tools import InstallError


class DumpError(InstallError):
    """A dump lab replay cannot answer for. `dump` is which one ("rules", "ipvs", "nft"), `line` the
    1-based line to blame, if one is."""

    def __init__(self, dump: str, reason: str, line: int | None = None) -> None:
        self.dump, self.reason, self.line = dump, reason, line
        super().__init__(f"{f'line {line} of ' if line else ''}the {dump}: {reason}")


def _ipv4(dump: str, address: str, line: int, what: str) -> str:
    try:
        return str(ipaddress.IPv4Address(address))
    except ValueError:
        raise DumpError(
            dump,
            f"{what} {address} is not an IPv4 address (lab replay replays IPv4: iptables-save, not ip6tables-save)",
            line,
        ) from None


_DNAT = re.compile(r"-j DNAT --to-destination (\[?[0-9a-fA-F.:]+?\]?)(?::(\d+))?(?:\s|$)")
_PROTO = re.compile(r"-p (tcp|udp|sctp)\b")


@dataclass(frozen=True)
class Target:
    ip: str
    port: int | None  # None: DNAT keeps the original port
    protocol: str

    def __str__(self) -> str:
        return f"{self.ip}:{self.port}" if self.port else self.ip


def dnat_targets(dump: str) -> list[Target]:
    """Every `-j DNAT --to-destination` of the nat table, in dump order, without repeats."""
    found: dict[Target, None] = {}
    table = ""
    for number, line in enumerate(dump.splitlines(), 1):
        if line.startswith("*"):
            table = line[1:].strip()
        elif table == "nat" and line.startswith("-A ") and (match := _DNAT.search(line)):
            proto = _PROTO.search(line)
            port = int(match.group(2)) if match.group(2) else None
            ip = _ipv4("rules", match.group(1).strip("[]"), number, "DNAT to")
            found[Target(ip, port, proto.group(1) if proto else "tcp")] = None
    return list(found)


# nftables: `dnat to 10.0.0.1:80`, `dnat ip to 10.0.0.1` (inet tables); not ranges, nor maps keyed by address.
_NFT_DNAT = re.compile(r"\bdnat (?:ip )?to (\d{1,3}(?:\.\d{1,3}){3})(?::(\d+))?(?=[\s;}]|$)")
# kube-proxy 1.36+ picks the endpoint itself: `dnat ip addr . port to numgen random mod 2 map { 0 : IP . PORT ,
# 1 : IP . PORT }` as written, `dnat ip to numgen random mod 2 map { 0 : IP . PORT, ... }` as listed.
_NFT_DNAT_NUMGEN = re.compile(r"\bdnat ip (?:addr \. port )?to numgen (?:random|inc) mod \d+ map \{([^}]*)\}")
_NFT_NUMGEN_ELEMENT = re.compile(r"\d+ : (\d{1,3}(?:\.\d{1,3}){3}) \. (\d+)")
_NFT_PROTO = re.compile(r"\b(?:meta l4proto|ip protocol) (tcp|udp|sctp)\b|\b(tcp|udp|sctp) dport\b")


def nft_dnat_targets(dump: str) -> list[Target]:
    """Every literal IPv4 `dnat to` of an `nft list ruleset` dump or an `nft -f` script (kube-proxy's
    endpoint chains: `meta l4proto tcp dnat to IP:PORT`), and every endpoint of a numgen-map DNAT (kube-proxy
    1.36+'s service chains), in dump order, without repeats."""
    found: dict[Target, None] = {}
    for line in dump.splitlines():
        for statement in line.split(";"):
            for match in _NFT_DNAT.finditer(statement):
                port = int(match.group(2)) if match.group(2) else None
                found[Target(match.group(1), port, _nft_proto(statement[: match.start()]))] = None
            for match in _NFT_DNAT_NUMGEN.finditer(statement):
                proto = _nft_proto(statement[: match.start()])
                for ip, port in _NFT_NUMGEN_ELEMENT.findall(match.group(1)):
                    found[Target(ip, int(port), proto)] = None
    return list(found)


def _nft_proto(before: str) -> str:
    """The protocol a DNAT statement is limited to by what precedes it in its rule (tcp if nothing)."""
    proto = _NFT_PROTO.search(before)
    return next(filter(None, proto.groups())) if proto else "tcp"


def chain_candidates(dump: str, chain: str) -> list[str]:
    """The chains a (load-balancing) chain can jump to, in rule order."""
    targets = []
    for line in dump.splitlines():
        if line.startswith(f"-A {chain} ") and (match := re.search(r"-j (KUBE-SEP-\S+)", line)):
            targets.append(match.group(1))
    return targets


_IPVS = re.compile(r"^-([Aa]) -([tu]) (\S+):(\d+)(?: .*?-r (\S+):(\d+))?")


def ipvs_table(dump: str) -> dict[tuple[str, str, int], list[Target]]:
    """`ipvsadm -Sn` → {(proto, VIP, port): real servers}."""
    table: dict[tuple[str, str, int], list[Target]] = {}
    for number, line in enumerate(dump.splitlines(), 1):
        match = _IPVS.match(line.strip())
        if not match:
            continue
        kind, proto_flag, vip, port, rip, rport = match.groups()
        proto = "tcp" if proto_flag == "t" else "udp"
        servers = table.setdefault((proto, _ipv4("ipvs", vip, number, "virtual server"), int(port)), [])
        if kind == "a" and rip:
            servers.append(Target(_ipv4("ipvs", rip, number, "real server"), int(rport), proto))
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


def check_nft_hooks(ruleset: str) -> None:
    """An nftables ruleset with no base chain (`type ... hook ...`) acts on no packet: nothing to replay."""
    if not re.search(r"\btype \w+ hook \w+", ruleset):
        raise DumpError(
            "nft",
            "no chain of the ruleset is attached to a hook (`type nat hook prerouting ...`), so it acts on no "
            "packet; give the node's whole `nft list ruleset`",
        )
