"""Which Kubernetes releases a scenario may name: those whose kube-proxy the renderers reproduce.

describe checks a scenario's kubeVersion against this list (at the file's line); what kube-proxy of each
release writes is render's knowledge (lab/render/kubeproxy/versions.py and the renderers).
"""

from __future__ import annotations

OLDEST_MINOR = 19
NEWEST_MINOR = 37

# What is known to change after the newest release the lab reproduces, for the user who names a newer one.
AFTER_NEWEST = "the conntrack entries of deleted UDP Services are cleaned, kubernetes#141371"

IPTABLES_VERSIONS = tuple(f"1.{minor}" for minor in range(OLDEST_MINOR, NEWEST_MINOR + 1))


def check_version(version: str) -> str | None:
    """None when supported, else what to tell the user."""
    if version in IPTABLES_VERSIONS:
        return None
    if _minor(version) is not None and _minor(version) > NEWEST_MINOR:
        return (
            f"kube-proxy {version} is newer than the lab knows: the newest reproduced is 1.{NEWEST_MINOR}"
            f" (known to change after it: {AFTER_NEWEST})"
        )
    return f"kube-proxy {version} is not reproduced; supported: {', '.join(IPTABLES_VERSIONS)}"


def _minor(version: str) -> int | None:
    """N of "1.N", None for anything else."""
    major, _, minor = version.partition(".")
    return int(minor) if major == "1" and minor.isdigit() else None


# kube-proxy configuration fields a scenario may set, and the first release that has each (the field's path
# under `cluster`, the minor, the change that added it).
OPTIONS_SINCE = {
    ("conntrack", "tcpBeLiberal"): (29, "kubernetes#120354"),
    ("conntrack", "udpTimeout"): (29, "kubernetes#120354"),
    ("conntrack", "udpStreamTimeout"): (29, "kubernetes#120354"),
}


def check_option(version: str, path: tuple[str, ...]) -> str | None:
    """None when kube-proxy of `version` has the configuration field, else what to tell the user."""
    since, change = OPTIONS_SINCE[path]
    if int(version.split(".")[1]) >= since:
        return None
    return f"kube-proxy {version} has no {'.'.join(path)} (added in 1.{since}, {change})"
