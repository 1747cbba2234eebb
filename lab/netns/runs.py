"""Run identity and leftovers.

Every namespace a run creates is named `lab-<6 hex>-<actor>`, and the run records its pid in
/run/lab/<prefix>.pid. A run killed with SIGKILL leaves both behind; whoever comes next finds
the prefixes whose pid is gone and removes their namespaces.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from pathlib import Path

from pyroute2 import netns

STATE_DIR = Path("/run/lab")
PREFIX_RE = re.compile(r"^(lab-[0-9a-f]{6})-")


def new_prefix() -> str:
    prefix = f"lab-{secrets.token_hex(3)}"
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    (STATE_DIR / f"{prefix}.pid").write_text(f"{os.getpid()}\n")
    return prefix


def release(prefix: str) -> None:
    (STATE_DIR / f"{prefix}.pid").unlink(missing_ok=True)


def _alive(prefix: str) -> bool:
    try:
        pid = int((STATE_DIR / f"{prefix}.pid").read_text())
    except (OSError, ValueError):
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lab_namespaces() -> dict[str, list[str]]:
    """Every lab namespace on the machine, grouped by run prefix."""
    found: dict[str, list[str]] = {}
    for name in sorted(netns.listnetns()):
        match = PREFIX_RE.match(name)
        if match:
            found.setdefault(match.group(1), []).append(name)
    return found


def remove_namespaces(names: list[str]) -> None:
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            netns.remove(name)


def remove_leftovers(include_live: bool = False) -> list[str]:
    """Remove namespaces of runs that are gone (or of every run, with include_live); return their names."""
    removed = []
    prefixes = set(lab_namespaces()) | {p.stem for p in STATE_DIR.glob("lab-*.pid")}
    for prefix in sorted(prefixes):
        if include_live or not _alive(prefix):
            names = lab_namespaces().get(prefix, [])
            remove_namespaces(names)
            release(prefix)
            removed.extend(names)
    return removed
