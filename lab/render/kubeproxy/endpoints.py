"""Which endpoints a Service port uses on one node: kube-proxy's CategorizeEndpoints (pkg/proxy/topology.go,
1.24+, with topology-aware routing by the endpoints' zone and node hints) and the FilterEndpoints / ready-only
selection of older releases, once for every mode."""

from __future__ import annotations

from dataclasses import dataclass

from lab.render.kubeproxy.because import Setting, topology_hints
from lab.render.kubeproxy.service import Endpoint
from lab.render.kubeproxy.versions import Release
from lab.render.kubeproxy.view import ServiceView


@dataclass(frozen=True)
class Categorized:
    cluster: tuple[Endpoint, ...]  # balanced over for the Cluster policy
    local: tuple[Endpoint, ...]  # balanced over for the Local policy
    reachable: tuple[Endpoint, ...]  # the ones that get an endpoint chain
    has_endpoints: bool  # any usable endpoint on any node


def categorize(svc: ServiceView, release: Release) -> Categorized:
    if release.endpoint_selection == "ready":
        return _ready_only(svc)
    if release.endpoint_selection == "filtered":
        return _filtered(svc, release)
    return _categorized(svc, release)


def _ready_only(svc: ServiceView) -> Categorized:
    """1.19-1.21: ready endpoints only (1.21 filters them in syncProxyRules, older releases never put the others
    into the endpoints map)."""
    ready = tuple(ep for ep in svc.endpoints if ep.ready)
    return Categorized(ready, _local(ready), ready, bool(ready))


def _filtered(svc: ServiceView, release: Release) -> Categorized:
    """1.22-1.23 FilterEndpoints: internalTrafficPolicy=Local keeps only this node's endpoints for the whole
    Service, unless externalTrafficPolicy is Local (which returns them all)."""
    narrowed = svc.internal_local and not svc.external_local
    eps = tuple(ep for ep in svc.endpoints if ep.is_local or not narrowed)
    ready = tuple(ep for ep in eps if ep.ready)
    if release.unready_endpoint_chains:
        return Categorized(ready, _local(ready), eps, bool(eps))
    return Categorized(ready, _local(ready), ready, bool(ready))


def _categorized(svc: ServiceView, release: Release) -> Categorized:
    """Ready endpoints, else (ProxyTerminatingEndpoints) serving+terminating ones, chosen separately for the
    Cluster and the Local policy."""
    eps = svc.endpoints
    fallback = release.terminating_fallback

    def usable(ep: Endpoint) -> bool:
        return ep.ready or (fallback and ep.serving and ep.terminating)

    # eTP=Local still needs the cluster endpoints: pods and the node short-circuit to them.
    uses_cluster = not svc.internal_local or svc.externally_accessible
    uses_local = svc.internal_local or (svc.external_local and svc.externally_accessible)
    cluster: tuple[Endpoint, ...] = ()
    local: tuple[Endpoint, ...] = ()
    if uses_cluster:
        topology = topology_mode(svc, release)
        cluster = tuple(ep for ep in eps if ep.ready and _available(ep, topology, svc))
        # The fallback ignores topology: the hints were for ready endpoints, and there are none.
        if not cluster and fallback:
            cluster = tuple(ep for ep in eps if ep.serving and ep.terminating)
    if uses_local:
        local = _local(tuple(ep for ep in eps if ep.ready))
        if not local and fallback:
            local = _local(tuple(ep for ep in eps if ep.serving and ep.terminating))
    has_endpoints = bool(cluster) or (uses_local and any(map(usable, eps)))
    merged = {ep.address: ep for ep in [*cluster, *local]}
    reachable = tuple(sorted(merged.values(), key=lambda ep: ep.address))
    return Categorized(cluster, local, reachable, has_endpoints)


def topology_mode(svc: ServiceView, release: Release) -> str:
    """Which hints the Cluster endpoints follow on this node: "node", "zone", or "" (every ready endpoint).
    Every ready endpoint must carry a hint of that kind and one must name this node (or its zone): a Service half
    hinted, or hinted only for other zones, is balanced over everything (topologyModeFromHints, canUseTopology)."""
    if release.topology_hints == "off":
        return ""
    if release.topology_hints == "annotation":
        value = svc.port.hints_annotation
        enabled = (
            value not in ("", "disabled", "Disabled") if release.topology_mode_annotation else value in ("auto", "Auto")
        )
        if not enabled:
            return ""
    ready = [ep for ep in svc.endpoints if ep.ready]
    here = svc.port.node
    if release.node_hints and all(ep.node_hints for ep in ready) and any(here.name in ep.node_hints for ep in ready):
        return "node"
    if all(ep.zone_hints for ep in ready) and any(here.zone and here.zone in ep.zone_hints for ep in ready):
        return "zone"
    return ""


def hinted(svc: ServiceView, release: Release) -> Setting | None:
    """The topology hints that narrowed the Cluster endpoints on this node, as the setting behind their choice."""
    mode = topology_mode(svc, release)
    if not mode:
        return None
    return topology_hints(svc.name, mode, svc.port.node.name if mode == "node" else svc.port.node.zone)


def _available(ep: Endpoint, topology: str, svc: ServiceView) -> bool:
    if topology == "node":
        return svc.port.node.name in ep.node_hints
    return topology == "" or svc.port.node.zone in ep.zone_hints


def _local(eps: tuple[Endpoint, ...]) -> tuple[Endpoint, ...]:
    return tuple(ep for ep in eps if ep.is_local)
