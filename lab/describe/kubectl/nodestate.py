"""What an imported node's state means for the Services the lab reproduces, said once per node and state: NotReady,
cordoned, tainted, being deleted, labelled out of load balancers. None of it changes kube-proxy's rules, which it
writes on every node it runs on; it changes what kube-proxy's /healthz answers and which nodes a cloud's load
balancer sends to. The lab's kube-proxy /healthz always answers 200 (lab/install/health.py), so where the cluster's
load balancer would not send to a node, the import leaves the node out of the scenario's load balancer pool
(`loadBalancers[].nodes`) instead, and says so.

Sources (kubernetes/kubernetes unless said):
- pkg/proxy/healthcheck/proxier_health.go at 08dd657a71c07cf5e71e1b191fd9e8588786b3db: SyncNode makes the node
  ineligible when it has a deletionTimestamp or a ToBeDeletedByClusterAutoscaler taint (any effect), and /healthz
  then answers 503 (KEP-3836); /livez and the healthCheckNodePort servers ignore it; nothing reads readiness,
  spec.unschedulable or other taints.
- pkg/features/versioned_kube_features.go at 0021731de5897e81f1d576a134db15c7c301eeff:
  KubeProxyDrainingTerminatingNodes, which registers that node handler, is alpha (off) in 1.28, beta (on) in 1.30,
  GA in 1.31.
- kubernetes/cloud-provider controllers/service/controller.go at 49ed9ccec081c4ecd023d35ea792d6f259a330d8: the
  cloud's service controller leaves out of every load balancer's nodes those labelled
  node.kubernetes.io/exclude-from-external-load-balancers or tainted ToBeDeletedByClusterAutoscaler, and, without
  StableLoadBalancerNodeSet (on by default from 1.27, KEP-3458), NotReady nodes from the pools of Services with
  externalTrafficPolicy Cluster; it does not read spec.unschedulable.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.describe.kubectl.objects import Obj
from lab.describe.yamlsrc import FieldPath

TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
EXCLUDE_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
DRAINING_GATE = "KubeProxyDrainingTerminatingNodes"
# Taints the node's state puts there, said with that state (the node lifecycle controller's and kubectl cordon's).
_STATE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.kubernetes.io/unschedulable")


# The releases where what a node's state does changed (see the sources above).
DRAINING_GATE_SINCE = 28  # kube-proxy takes KubeProxyDrainingTerminatingNodes (alpha, off)
DRAINING_SINCE = 30  # ... on by default (beta; GA and locked on from 1.31)
STABLE_NODE_SET_SINCE = 27  # the service controller keeps NotReady nodes (StableLoadBalancerNodeSet beta, on)
NOT_READY = (
    f"that is NotReady, before 1.{STABLE_NODE_SET_SINCE}, from the pool of a Service of externalTrafficPolicy Cluster"
)


@dataclass(frozen=True)
class Release:
    """What of the cluster's release the node notes depend on."""

    version: str  # 1.MINOR
    draining_gate: bool | None  # KubeProxyDrainingTerminatingNodes as kube-proxy's configuration sets it

    def since(self, first: int) -> bool:
        """Whether the release is 1.`first` or later."""
        return int(self.version.split(".")[1]) >= first

    @property
    def drains(self) -> bool:
        """Whether kube-proxy's /healthz answers 503 on a node being deleted."""
        if self.draining_gate is not None and self.since(DRAINING_GATE_SINCE) and not self.since(DRAINING_SINCE + 1):
            return self.draining_gate
        return self.since(DRAINING_SINCE)


@dataclass(frozen=True)
class Pool:
    """Whether the import writes a load balancer, and whether it serves only Services of externalTrafficPolicy
    Cluster."""

    written: bool
    cluster_only: bool


def not_ready(obj: Obj) -> tuple[FieldPath, str] | None:
    """The Ready condition's path and status when it is False or Unknown."""
    for path, cond in obj.each(("status", "conditions")):
        if isinstance(cond, dict) and cond.get("type") == "Ready" and cond.get("status") in ("False", "Unknown"):
            return path, str(cond["status"])
    return None


def _taints(obj: Obj) -> list[tuple[FieldPath, str, str]]:
    """Each taint's path, key and `key=value:Effect` as kubectl describe prints it."""
    found = []
    for path, taint in obj.each(("spec", "taints")):
        if not isinstance(taint, dict):
            raise obj.error(path, "expected a taint (a mapping of key, value and effect)")
        key = obj.get((*path, "key"), str, "")
        value = obj.get((*path, "value"), str, "")
        found.append((path, key, f"{key}{'=' + value if value else ''}:{obj.get((*path, 'effect'), str, '')}"))
    return found


def _excluded(obj: Obj) -> bool:
    """The label set, whatever its value, as the cited controller reads it (later ones keep a node labelled false)."""
    return EXCLUDE_LABEL in obj.get(("metadata", "labels"), dict, {})


def _deleting(obj: Obj) -> bool:
    return bool(obj.get(("metadata", "deletionTimestamp"), str))


def left_out_of_pool(obj: Obj, release: Release, pool: Pool) -> str | None:
    """Why the cloud's service controller leaves the node out of a load balancer's nodes, None when it keeps it."""
    if not pool.written:
        return None
    if _excluded(obj):
        return f"labelled {EXCLUDE_LABEL}"
    if any(key == TO_BE_DELETED for _, key, _ in _taints(obj)):
        return f"tainted {TO_BE_DELETED}"
    if _deleting(obj):
        return "being deleted"
    if not release.since(STABLE_NODE_SET_SINCE) and pool.cluster_only and not_ready(obj):
        return NOT_READY
    return None


def node_notes(obj: Obj, release: Release, pool: Pool, left_out: str | None) -> list[str]:
    """One line per state of the node: what kube-proxy and a load balancer do with it, and what the lab does."""
    notes = []
    if found := not_ready(obj):
        notes.append(obj.note(found[0], _not_ready_text(found[1], release, pool, left_out)))
    if obj.get(("spec", "unschedulable"), bool, False):
        notes.append(
            obj.note(
                ("spec", "unschedulable"),
                "true (cordoned): only the scheduler reads it, not kube-proxy (its rules, its /healthz) nor the "
                f"cloud's service controller: built like any node; {_pool_text(pool, left_out)}",
            )
        )
    taints = _taints(obj)
    for path, key, said in taints:
        if key == TO_BE_DELETED:
            notes.append(obj.note(path, f"{said}: {_draining_text(release, pool, left_out)}"))
    if _deleting(obj):
        notes.append(
            obj.note(
                ("metadata", "deletionTimestamp"),
                f"being deleted: {_draining_text(release, pool, left_out)}",
            )
        )
    others = [said for _, key, said in taints if key not in (TO_BE_DELETED, *_STATE_TAINTS)]
    if others:
        notes.append(
            obj.note(
                ("spec", "taints"),
                f"{', '.join(others)}: built like any node: kube-proxy reads no taint but {TO_BE_DELETED}, and "
                "the pods are where the input has them",
            )
        )
    if _excluded(obj):
        said = _pool_text(pool, left_out)
        notes.append(obj.note(("metadata", "labels", EXCLUDE_LABEL), f"{said}; kube-proxy ignores the label"))
    return notes


def _pool_text(pool: Pool, left_out: str | None) -> str:
    """What the import did with the node's place in the load balancer's pool."""
    if not pool.written:
        return "the scenario has no cloud load balancer"
    if left_out is None:
        return "kept in the load balancer's pool"
    return (
        f"left out of the load balancer's pool (loadBalancers[].nodes), as the cloud's service controller leaves "
        f"out a node {left_out}"
    )


def _not_ready_text(status: str, release: Release, pool: Pool, left_out: str | None) -> str:
    text = (
        f"Ready {status}: built like any node, with kube-proxy's rules (it writes them on every node it runs on, "
        "whatever the node's readiness) and its endpoints as the EndpointSlices hold them (the EndpointSlice "
        f"controller marks a NotReady node's pods not ready); {_pool_text(pool, left_out)}"
    )
    if pool.written and left_out is None:
        why = (
            f"from 1.{STABLE_NODE_SET_SINCE}"
            if release.since(STABLE_NODE_SET_SINCE)
            else f"before 1.{STABLE_NODE_SET_SINCE} where a Service is of externalTrafficPolicy Local"
        )
        text += (
            f", as the cloud's service controller keeps a NotReady node {why}; the lab's kube-proxy answers its health "
            "checks as a running kube-proxy does"
        )
    return text


def _draining_text(release: Release, pool: Pool, left_out: str | None) -> str:
    if release.drains:
        healthz = (
            f"kube-proxy {release.version} answers /healthz 503 on this node (KEP-3836, on by default from "
            f"1.{DRAINING_SINCE}), "
            "which the lab's kube-proxy does not model (it answers 200)"
        )
    else:
        healthz = (
            f"kube-proxy {release.version} answers /healthz 200 on this node (from 1.{DRAINING_SINCE}, or with "
            f"{DRAINING_GATE} from 1.{DRAINING_GATE_SINCE}, 503: KEP-3836)"
        )
    return f"{healthz}; {_pool_text(pool, left_out)}"
