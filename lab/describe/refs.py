"""How a scenario names a Kubernetes object, parsed in one place: `Kind/[NAMESPACE/]NAME` (a step's Deployment,
ReplicaSet, Pod or Service), `[NAMESPACE/]NAME` where the kind is known (a load balancer's Service, a probe's
pod, the lab's own name of a pod), and a replica's name, OWNER-INDEX, which the lab gives each pod of a
Deployment or ReplicaSet (replica_name)."""

from __future__ import annotations

from dataclasses import dataclass

from lab.describe.digits import is_ascii_number
from lab.describe.names import DNS1123_SUBDOMAIN


@dataclass(frozen=True)
class ObjectRef:
    kind: str  # "" where the notation has none
    namespace: str  # as written, else (none, or an empty one) the default the caller gave
    name: str
    replica: int | None  # N of a name OWNER-N (a replica's, or a pod's whose name reads like one); else None
    owner: str  # OWNER of a name OWNER-N, as far as the name keeps it (replica_name cuts a long one); else ""
    namespaced: bool  # a NAMESPACE/ was written (a bare NAME may mean any namespace's)

    @classmethod
    def parse(cls, text: str, kinded: bool = False, default_namespace: str = "default") -> ObjectRef:
        """`Kind/[NAMESPACE/]NAME` when `kinded`, else `[NAMESPACE/]NAME`. Checks nothing: the caller says which
        kinds it takes, and names reach rule text only after lab/describe/names.py's checks."""
        kind, _, rest = text.partition("/") if kinded else ("", "", text)
        namespace, slash, name = rest.rpartition("/")
        owner, dash, index = name.rpartition("-")
        # Only the index replica_name writes (no sign, no leading zero) makes a replica's name.
        replica = int(index) if dash and is_ascii_number(index) else None
        if replica is not None and replica_name(owner, replica) != name:
            replica = None
        owned_by = "" if replica is None else owner
        return cls(kind, namespace or default_namespace, name, replica, owned_by, bool(slash))


def replica_name(owner: str, index: int) -> str:
    """The lab's name for a replica, OWNER-INDEX (readable, and the same in every run), within a pod name's 253
    characters: a long owner's name is cut, never leaving a '.' before the '-' (an empty part of the name).
    Kubernetes names a replica by generateName instead, OWNER-HASH- and five random characters, the prefix cut
    to 58 (kubernetes/kubernetes 18b46af2bc28de9f6f15b9359c8789735bef1b7e,
    staging/src/k8s.io/apiserver/pkg/storage/names/generate.go), so its replicas' names are at most 63: a pod
    name past that comes from a Pod written with it."""
    suffix = f"-{index}"
    return owner[: DNS1123_SUBDOMAIN.longest - len(suffix)].rstrip(".") + suffix
