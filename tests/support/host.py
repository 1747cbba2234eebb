"""The host the tests run on: the repository's root, and read-only looks at the host's own network namespace
(what the harness must never change) and at the lab namespaces that exist."""

from __future__ import annotations

import subprocess
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
    }


def strip_volatile(state: dict[str, str]) -> dict[str, str]:
    # iptables-save prints a generation timestamp; it is not state.
    return {k: "\n".join(line for line in v.splitlines() if not line.startswith("#")) for k, v in state.items()}


def lab_namespaces() -> list[str]:
    return [line.split()[0] for line in _read("ip", "netns", "list").splitlines() if line.startswith("lab-")]
