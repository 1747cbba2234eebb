"""Which Kubernetes versions' kube-proxy the renderers reproduce."""

from __future__ import annotations

# The current iptables layout (KUBE-EXT/KUBE-SVL, filter drops instead of KUBE-MARK-DROP, kube-proxy's own
# KUBE-FIREWALL) holds from 1.28 on; see docs/kubeproxy-versions.md.
IPTABLES_VERSIONS = tuple(f"1.{minor}" for minor in range(28, 36))


def check_version(version: str) -> str | None:
    """None when supported, else what to tell the user."""
    if version in IPTABLES_VERSIONS:
        return None
    return f"kube-proxy {version} is not reproduced; supported: {', '.join(IPTABLES_VERSIONS)}"
