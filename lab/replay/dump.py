"""Reading a real node's dumps (`iptables-save`, `nft list ruleset`, `ipvsadm -Sn`): which
endpoints its rules can DNAT to."""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    for line in dump.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif table == "nat" and line.startswith("-A ") and (match := _DNAT.search(line)):
            proto = _PROTO.search(line)
            port = int(match.group(2)) if match.group(2) else None
            found[Target(match.group(1).strip("[]"), port, proto.group(1) if proto else "tcp")] = None
    return list(found)


# nftables: `dnat to 10.0.0.1:80`, `dnat ip to 10.0.0.1` (inet tables); not maps or ranges.
_NFT_DNAT = re.compile(r"\bdnat (?:ip )?to (\d{1,3}(?:\.\d{1,3}){3})(?::(\d+))?(?=[\s;}]|$)")
_NFT_PROTO = re.compile(r"\b(?:meta l4proto|ip protocol) (tcp|udp|sctp)\b|\b(tcp|udp|sctp) dport\b")


def nft_dnat_targets(dump: str) -> list[Target]:
    """Every literal IPv4 `dnat to` of an `nft list ruleset` dump or an `nft -f` script (kube-proxy's
    endpoint chains: `meta l4proto tcp dnat to IP:PORT`), in dump order, without repeats."""
    found: dict[Target, None] = {}
    for line in dump.splitlines():
        for statement in line.split(";"):
            for match in _NFT_DNAT.finditer(statement):
                proto = _NFT_PROTO.search(statement[: match.start()])
                port = int(match.group(2)) if match.group(2) else None
                found[Target(match.group(1), port, next(filter(None, proto.groups())) if proto else "tcp")] = None
    return list(found)


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
    for line in dump.splitlines():
        match = _IPVS.match(line.strip())
        if not match:
            continue
        kind, proto_flag, vip, port, rip, rport = match.groups()
        proto = "tcp" if proto_flag == "t" else "udp"
        servers = table.setdefault((proto, vip, int(port)), [])
        if kind == "a" and rip:
            servers.append(Target(rip, int(rport), proto))
    return table
