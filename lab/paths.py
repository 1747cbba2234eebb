"""Where the lab keeps things on the machine, in one place. Tests give each pytest session a private /run
(tests/support), so these stay constants."""

from __future__ import annotations

import os
from pathlib import Path

# Each run's record, <prefix>.json, written before the run creates anything (lab/realize/runs.py); a live lab's
# socket and log beside it (lab/live/record.py). /run is a tmpfs: a reboot, which removes every namespace too,
# removes the records with them.
STATE_DIR = Path("/run/lab")
# Where `ip netns` pins a named namespace (a bind mount on an empty file): the lab's namespaces are pinned there
# too, so that `ip netns exec` and a user's tools see them.
NETNS_DIR = Path("/run/netns")


def cache_root() -> Path:
    """$LAB_CACHE, else ~/.cache/lab: `lab vm`'s kernels and images (a probe's captures go where --pcap says)."""
    if env := os.environ.get("LAB_CACHE"):
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lab"
