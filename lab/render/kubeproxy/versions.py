"""Which Kubernetes versions' kube-proxy the renderers reproduce, and which iptables layout each writes.

The iptables layout changed in steps; each step is an "era" (see docs/kubeproxy-versions.md):

  A  1.19-1.21  KUBE-XLB chains; masquerade rules in KUBE-SERVICES / KUBE-NODEPORTS; KUBE-FW for
                every LoadBalancer IP; KUBE-MARK-DROP (filled by kubelet)
  B  1.22-1.23  masquerade rules moved into KUBE-SVC-* (#96959)
  C  1.24       KUBE-EXT / KUBE-SVL replace KUBE-XLB (#109060, #106497)
  D  1.25-1.26  no KUBE-MARK-DROP: filter DROP rules and KUBE-PROXY-FIREWALL (#110289, #110290)
  E  1.27-      kube-proxy writes its own KUBE-FIREWALL rule (#114470)

Smaller changes inside an era (1.20's FORWARD jump, 1.21's externalIP rework, 1.26's localhost
NodePorts flag, 1.29-1.31's INVALID-drop and nfacct details, ...) are switched by the minor version
in lab/render/kubeproxy/iptables.py, next to the rule they change.
"""

from __future__ import annotations

from lab.describe.releases import IPTABLES_VERSIONS, NEWEST_MINOR, check_version

# (era, first minor, last minor)
ERAS: tuple[tuple[str, int, int], ...] = (
    ("A", 19, 21),
    ("B", 22, 23),
    ("C", 24, 24),
    ("D", 25, 26),
    ("E", 27, NEWEST_MINOR),
)


def minor_of(version: str) -> int:
    """19 for "1.19"; ValueError for anything that is not a supported "1.N"."""
    if version not in IPTABLES_VERSIONS:
        raise ValueError(check_version(version))
    return int(version.split(".")[1])


def era_of(version: str) -> str:
    """The iptables layout era ("A".."E") that kube-proxy of this version writes."""
    minor = minor_of(version)
    return next(name for name, first, last in ERAS if first <= minor <= last)


def era_versions(era: str) -> tuple[str, ...]:
    """The supported versions of one era, oldest first."""
    first, last = next((first, last) for name, first, last in ERAS if name == era)
    return tuple(f"1.{minor}" for minor in range(first, last + 1))
