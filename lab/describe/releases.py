"""Which Kubernetes releases a scenario may name: those whose kube-proxy the renderers reproduce.

describe checks a scenario's kubeVersion against this list (at the file's line); what kube-proxy of each
release writes is render's knowledge (lab/render/kubeproxy/versions.py and the renderers).
"""

from __future__ import annotations

OLDEST_MINOR = 19
NEWEST_MINOR = 35

IPTABLES_VERSIONS = tuple(f"1.{minor}" for minor in range(OLDEST_MINOR, NEWEST_MINOR + 1))


def check_version(version: str) -> str | None:
    """None when supported, else what to tell the user."""
    if version in IPTABLES_VERSIONS:
        return None
    return f"kube-proxy {version} is not reproduced; supported: {', '.join(IPTABLES_VERSIONS)}"


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
