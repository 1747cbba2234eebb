"""Which Kubernetes releases a scenario may name: those whose kube-proxy the renderers reproduce.

describe checks a scenario's kubeVersion against this list (at the file's line); what kube-proxy of each
release writes is render's knowledge (lab/render/kubeproxy/versions.py and the renderers).
"""

from __future__ import annotations

from lab.describe.digits import is_ascii_number

OLDEST_MINOR = 19
NEWEST_MINOR = 38

IPTABLES_VERSIONS = tuple(f"1.{minor}" for minor in range(OLDEST_MINOR, NEWEST_MINOR + 1))


def check_version(version: str) -> str | None:
    """None when supported, else what to tell the user."""
    if version in IPTABLES_VERSIONS:
        return None
    shown = version if len(version) <= 12 else f"{version[:12]}... ({len(version)} characters)"
    if (minor := _minor(version)) is not None and minor > NEWEST_MINOR:
        return f"kube-proxy {shown} is newer than the lab knows: the newest reproduced is 1.{NEWEST_MINOR}"
    return f"kube-proxy {shown} is not reproduced; supported: {', '.join(IPTABLES_VERSIONS)}"


def _minor(version: str) -> int | None:
    """N of "1.N" (ASCII digits: str.isdigit() and int() take any script's; at most three, as int() refuses
    thousands), None for anything else."""
    major, _, minor = version.partition(".")
    return int(minor) if major == "1" and is_ascii_number(minor) and len(minor) <= 3 else None


# kube-proxy configuration fields a scenario may set, and the first release that has each (the field's path
# under `cluster`, the minor, the change that added it).
OPTIONS_SINCE = {
    ("conntrack", "tcpBeLiberal"): (29, "kubernetes#120354"),
    ("conntrack", "udpTimeout"): (29, "kubernetes#120354"),
    ("conntrack", "udpStreamTimeout"): (29, "kubernetes#120354"),
    ("iptables", "localhostNodePorts"): (26, "kubernetes#108250"),
}

# kube-proxy feature gates a scenario may set, and the first release that knows each (a release that does not refuses
# to start: "unrecognized feature gate").
FEATURE_GATES_SINCE = {
    "AllowServiceExternalIPs": (36, "kubernetes#137293"),
    "KubeProxyNFTablesLocalhostNodePorts": (37, "kubernetes#138427"),
}

# The first release that turns each gate on when the configuration does not name it (a beta gate), and the change:
# KubeProxyNFTablesLocalhostNodePorts is "now beta and enabled by default" in v1.38.0-alpha.2 (READ in
# CHANGELOG/CHANGELOG-1.38.md at kubernetes/kubernetes@0411cc704533ed25a1bfc6e21a3195d9c6a2f0f2);
# AllowServiceExternalIPs came deprecated and on, keeping externalIPs working until it is turned off (KEP-5707).
FEATURE_GATES_ON_SINCE = {
    "AllowServiceExternalIPs": (36, "kubernetes#137293"),
    "KubeProxyNFTablesLocalhostNodePorts": (38, "kubernetes#142490"),
}

# The nodePortAddresses keywords and the first release that takes each: `primary` alone from 1.30 (kubernetes#123105,
# merged in February 2024 for 1.30: the release is INFERRED from that date), `localhost` and `all`, and any mix of
# keywords and CIDRs, from 1.37 (kubernetes#138427).
PRIMARY_SINCE = (30, "kubernetes#123105")
KEYWORDS_SINCE = (37, "kubernetes#138427")

# The image kube-proxy's release is built on, from the first release of each (newest first): distroless-iptables from
# 1.25 (kubernetes#111060), debian-iptables bullseye from 1.23 and buster before (kubernetes/release
# images/build/debian-iptables/variants.yaml at c05a4f1cf1f35bdf6bc2420656e8df83371d746b: "Debian 11 - Kubernetes
# 1.23 and newer", "Debian 10 - Kubernetes 1.22 and older"). Which iptables-wrapper each carries:
# lab/describe/resolve/iptables_wrapper.py.
IMAGES_SINCE = ((25, "distroless-iptables"), (23, "debian-iptables bullseye"), (OLDEST_MINOR, "debian-iptables buster"))


def check_feature_gate(version: str, gate: str) -> str | None:
    """None when kube-proxy of `version` knows the feature gate, else what to tell the user."""
    since, change = FEATURE_GATES_SINCE[gate]
    if int(version.split(".")[1]) >= since:
        return None
    return (
        f"kube-proxy {version} has no feature gate {gate} (added in 1.{since}, {change}): it refuses to start with a "
        "gate it does not know"
    )


def gate_default(version: str, gate: str) -> bool:
    """Whether kube-proxy of `version` runs with the gate on when its configuration does not name it."""
    since = FEATURE_GATES_ON_SINCE.get(gate)
    return since is not None and int(version.split(".")[1]) >= since[0]


def check_node_port_addresses(version: str, addresses: list[str], keywords: tuple[str, ...]) -> str | None:
    """None when kube-proxy of `version` takes these nodePortAddresses, else what to tell the user, with kube-proxy's
    own rule for the release: CIDRs; from 1.30 also `primary` alone ("can't use both 'primary' and CIDRs"); from
    1.37 any mix of `primary`, `localhost`, `all` and CIDRs."""
    minor = int(version.split(".")[1])
    used = [a for a in addresses if a in keywords]
    if not used or minor >= KEYWORDS_SINCE[0]:
        return None
    newer = next((k for k in used if k != "primary"), None)
    if newer is not None:
        since, change = KEYWORDS_SINCE
        return f"kube-proxy {version} does not take the keyword {newer!r} (added in 1.{since}, {change})"
    if minor < PRIMARY_SINCE[0]:
        return f"kube-proxy {version} takes CIDRs only ('primary' came in 1.{PRIMARY_SINCE[0]}, {PRIMARY_SINCE[1]})"
    if len(addresses) > 1:
        return (
            f"kube-proxy {version} can't use both 'primary' and CIDRs: 'primary' stands alone before "
            f"1.{KEYWORDS_SINCE[0]} ({KEYWORDS_SINCE[1]})"
        )
    return None


def check_option(version: str, path: tuple[str, ...]) -> str | None:
    """None when kube-proxy of `version` has the configuration field, else what to tell the user."""
    since, change = OPTIONS_SINCE[path]
    if int(version.split(".")[1]) >= since:
        return None
    return f"kube-proxy {version} has no {'.'.join(path)} (added in 1.{since}, {change})"


def kube_proxy_image(version: str) -> str:
    """The image kube-proxy of `version` is built on (IMAGES_SINCE)."""
    minor = int(version.split(".")[1])
    return next(image for since, image in IMAGES_SINCE if minor >= since)
