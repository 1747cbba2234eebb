"""The host the tests run on: the repository's root, and read-only looks at the host's own network namespace
(what the harness must never change) and at the lab namespaces that exist."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _read(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=False).stdout


def host_state() -> dict[str, str]:
    """Everything of the host's own network namespace that the harness must never change (read-only calls)."""
    sysctls = [
        "net/ipv4/ip_forward",
        "net/ipv4/conf/all/route_localnet",
        "net/ipv4/conf/all/rp_filter",
        "net/bridge/bridge-nf-call-iptables",
        "net/bridge/bridge-nf-call-ip6tables",
        "net/ipv6/conf/all/disable_ipv6",
    ]
    return {
        "links": _read("ip", "-o", "link", "show"),
        "addresses": _read("ip", "-o", "addr", "show"),
        "routes": _read("ip", "route", "show", "table", "all"),
        "rules": _read("ip", "rule", "show"),
        "iptables-nft": _read("iptables-nft-save"),
        # Absent until legacy iptables is first used (module-based kernels, e.g. under lab vm).
        "legacy-tables": _read("cat", "/proc/net/ip_tables_names"),
        "nft": _read("nft", "list", "ruleset"),
        "ipset": _read("ipset", "list", "-n"),
        "sysctls": "\n".join(f"{k}={_read('cat', str(Path('/proc/sys', k))).strip()}" for k in sysctls),
        **ipv6_state(),
    }


def ipv6_state() -> dict[str, str]:
    """The IPv6 half: routes and rules (`ip route` and `ip rule` alone show IPv4 only), ip6tables of both
    backends, nft tables of the families IPv6 traffic meets, and every IPv6 sysctl (net.ipv6.conf.* of every
    interface, `all` and `default`, and the namespace-wide ones). Addresses of both families are in
    host_state's "addresses" already."""
    return {
        "routes6": _read("ip", "-6", "route", "show", "table", "all"),
        "rules6": _read("ip", "-6", "rule", "show"),
        "ip6tables-nft": _read("ip6tables-nft-save"),
        "ip6tables-legacy": _read("ip6tables-legacy-save"),
        "legacy-tables6": _read("cat", "/proc/net/ip6_tables_names"),
        "nft-ip6": _read("nft", "list", "tables", "ip6"),
        "nft-inet": _read("nft", "list", "tables", "inet"),
        "sysctls6": ipv6_sysctls(),
    }


def ipv6_sysctls() -> str:
    """Every readable file under /proc/sys/net/ipv6 as path=value (stable_secret reads as an error until one is
    set: skipped)."""
    lines = []
    for path in sorted(Path("/proc/sys/net/ipv6").rglob("*")):
        try:
            value = path.read_text().strip() if path.is_file() else None
        except OSError:
            continue
        if value is not None:
            lines.append(f"{path.relative_to('/proc/sys')}={value}")
    return "\n".join(lines)


def strip_volatile(state: dict[str, str]) -> dict[str, str]:
    # iptables-save prints a generation timestamp, and legacy ip(6)tables-save each chain's packet and byte
    # counters (`:INPUT ACCEPT [12:3456]`): traffic, not state.
    return {
        k: "\n".join(_COUNTERS.sub("[counters]", line) for line in v.splitlines() if not line.startswith("#"))
        for k, v in state.items()
    }


_COUNTERS = re.compile(r"\[\d+:\d+\]")


def lab_namespaces() -> list[str]:
    return [line.split()[0] for line in _read("ip", "netns", "list").splitlines() if line.startswith("lab-")]


def records_of(pid: int) -> list[dict]:
    """The /run/lab records of the runs process `pid` owns."""
    found = []
    for path in Path("/run/lab").glob("lab-*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # written aside and renamed: a record is whole or absent, but may go meanwhile
        if record.get("pid") == pid:
            found.append(record)
    return found


def once_built(proc: subprocess.Popen, count: int) -> set[str]:
    """The namespaces `proc`'s runs recorded (other runs may be building theirs meanwhile), once `count` of them
    stand (or after 180 s: the machine may be busy)."""
    deadline, mine = time.monotonic() + 180, set()
    while time.monotonic() < deadline and len(mine & set(lab_namespaces())) < count:
        mine = {name for record in records_of(proc.pid) for name in record["namespaces"]}
        time.sleep(0.02)
    return mine


def terminated_leaving_nothing(proc: subprocess.Popen, mine: set[str]) -> None:
    """SIGTERM to `proc`, a lab command with its stderr piped: it exits 143 in words, with none of `mine` (the
    namespaces it built) and no record of its runs left."""
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    assert not (mine & set(lab_namespaces())), err[-2000:]
    assert not records_of(proc.pid), "the run's record stayed"
