"""The names an imported scenario gives a cluster's objects: as written (a node's DNS-1123 subdomain made a label,
which the lab's own names are), or, with --anonymize, new ones given in order of first use, the same for every
mention of one object (a pod's nodeName, an endpoint's hints.forNodes, a probe's `from`)."""

from __future__ import annotations

import re

from lab.describe.names import DNS1123_LABEL

# Namespaces every cluster has: their names tell nothing about the cluster.
_WELL_KNOWN = ("default", "kube-system", "kube-public", "kube-node-lease")


class Names:
    def __init__(self, anonymize: bool) -> None:
        self.anonymize = anonymize
        self.given: dict[tuple[str, str], str] = {}
        self.taken: set[tuple[str, str]] = set()

    def _new(self, kind: str, key: str, fresh: str) -> str:
        if (kind, key) not in self.given:
            name, n = fresh, 1
            while (kind, name) in self.taken:
                n += 1
                name = f"{fresh[: 60 - len(str(n))]}-{n}"
            self.given[(kind, key)] = name
            self.taken.add((kind, name))
        return self.given[(kind, key)]

    def _numbered(self, kind: str, key: str, prefix: str) -> str:
        return self._new(kind, key, f"{prefix}-{sum(k == kind for k, _ in self.given) + 1}")

    def node(self, name: str) -> str:
        """A node's name as the lab takes it: a DNS-1123 label ("ip-10-0-1-5.ec2.internal" becomes
        "ip-10-0-1-5-ec2-internal")."""
        if self.anonymize:
            return self._numbered("node", name, "node")
        return self._new("node", name, _label(name))

    def renamed_nodes(self) -> list[tuple[str, str, str]]:
        """Each node whose name changed (told on standard error): its name, the scenario's, and why."""
        return [
            (key, name, self._why_renamed(key, name))
            for (kind, key), name in self.given.items()
            if kind == "node" and key != name
        ]

    def _why_renamed(self, key: str, name: str) -> str:
        if self.anonymize:
            return "--anonymize renames every node"
        label = _label(key)
        if label == key:  # a label already, taken by another node's name made one
            other = next(k for (kind, k), given in self.given.items() if kind == "node" and given == key)
            return f"node {other} is named {key} in the scenario"
        why = "not a DNS-1123 label (lower case, no dots), as the lab's node names are"
        return why if label == name else f"{why}, and {label} is another node's name in the scenario"

    def namespace(self, namespace: str) -> str:
        if not self.anonymize or namespace in _WELL_KNOWN:
            return namespace
        return self._numbered("namespace", namespace, "ns")

    def service(self, namespace: str, name: str) -> str:
        return self._numbered("service", f"{namespace}/{name}", "svc") if self.anonymize else name

    def pod(self, namespace: str, name: str) -> str:
        return self._numbered("pod", f"{namespace}/{name}", "pod") if self.anonymize else name

    def slice(self, namespace: str, name: str) -> str:
        return self._numbered("slice", f"{namespace}/{name}", "slice") if self.anonymize else name

    def zone(self, zone: str) -> str:
        return self._numbered("zone", zone, "zone") if self.anonymize else zone

    def container(self, name: str) -> str:
        return "main" if self.anonymize else name


def _label(name: str) -> str:
    """A node's name made a DNS-1123 label: lower case, dots made dashes, at most 63 characters ("node" when
    nothing of it is left)."""
    label = re.sub(r"-+", "-", name.lower().replace(".", "-"))[:63].strip("-") or "node"
    return label if DNS1123_LABEL.problem(label) is None else "node"
