"""The probes an imported scenario starts with: one per frontend of each Service port and node probed (its
cluster IP from a pod on each such node, its NodePort from outside through each, each external IP and load balancer
IP from outside, and from inside and outside a loadBalancerSourceRange), each with `expect: observe`: the run
records what the kernel did; the user writes what it should have done. A dual-stack Service is probed in its
primary family (a probe's default) and again in its secondary one (`family: IPv6`); the spoofed probe from a source
range goes once per family that has a range.

The nodes probed are one of each kind kube-proxy's rules for the Service tell apart (`probed_nodes`), not every
node: a cluster of a thousand nodes and Services would have a million probes, each the same as its neighbours'."""

from __future__ import annotations

from typing import Any

from lab.describe.families import family_of
from lab.describe.ip import parse_network
from lab.describe.kubectl.services import Service

# What kube-proxy's rules for a Service on a node depend on, from the endpoints: the conditions of the node's own
# endpoints (local ones serve eTP/iTP Local, terminating ones serve when no other is ready), the node's zone (hints
# forZones) and whether a hint forNodes names it (kubernetes/kubernetes pkg/proxy/topology.go at
# 008b3652959ca58af8be3fb5b6ecfe9ae7638282, CategorizeEndpoints: availableForTopology, filterEndpoints).
NodeKind = tuple[frozenset[tuple[bool, bool, bool]], str, bool]
_NONE: frozenset[tuple[bool, bool, bool]] = frozenset()  # a node without endpoints of the Service: most nodes

OBSERVE = "observe"


def probes_for(
    service: dict[str, Any],
    namespace: str,
    clients: dict[str, str],
    nodes: list[str],
    outside: str,
    ranges: list[str],
) -> list[dict[str, Any]]:
    """`service` is the written manifest; `clients` a pod (NAMESPACE/NAME) or the node itself, per node."""
    name, spec = service["metadata"]["name"], service["spec"]
    status = service.get("status", {}).get("loadBalancer", {}).get("ingress", [])
    families = spec.get("ipFamilies") or ["IPv4"]
    probes = []
    for port in spec["ports"]:
        target = {"service": name, "port": port["name"] or port["port"]}
        if namespace != "default":
            target["namespace"] = namespace
        label = f"{namespace}-{name}-{port['name'] or port['port']}"
        for node in nodes:
            probes.append(_probe(f"{label}-cluster-ip-from-{node}", clients[node], target))
        if spec["type"] != "ClusterIP" and "nodePort" in port:
            for node in nodes:
                probes.append(
                    _probe(f"{label}-node-port-via-{node}", outside, target | {"via": "nodePort", "node": node})
                )
        if spec.get("externalIPs"):
            probes.append(_probe(f"{label}-external-ip", outside, target | {"via": "externalIP"}))
        if status or spec.get("loadBalancerIP"):
            via = target | {"via": "loadBalancer"}
            probes.append(_probe(f"{label}-load-balancer", outside, via))
            for i, family in enumerate(families):
                inside = _inside(ranges, family)
                if inside is None:
                    continue
                name = f"{label}-load-balancer-from-source-range" + (f"-{family.lower()}" if i else "")
                secondary = {"family": family} if i else {}
                probes.append(_probe(name, outside, via) | secondary | {"sourceAddress": inside})
    if len(families) == 2:
        second = families[1]
        probes += [
            p | {"name": f"{p['name']}-{second.lower()}", "family": second}
            for p in probes
            if "sourceAddress" not in p and _has_address(p["to"].get("via"), second, spec, status)
        ]
    return probes


def probed_nodes(service: Service, nodes: list[str], zones: dict[str, str], pod_client: set[str]) -> list[str]:
    """Of `nodes` (in their order), one of each kind the Service's rules tell apart (NodeKind): the first of each
    whose client is a pod (a cluster IP is mostly reached from pods), else the first. A node whose rules differ
    from another's only in its own address (the NodePort it serves, the source a masquerade gives) is of its kind."""
    local: dict[str, set[tuple[bool, bool, bool]]] = {}
    named = set()
    for s in service.slices:
        for ep in s.endpoints:
            local.setdefault(ep.node, set()).add(_state(ep.conditions))
            named.update(ep.nodes)
    chosen: dict[NodeKind, str] = {}
    for node in nodes:
        kind = (frozenset(local[node]) if node in local else _NONE, zones.get(node, ""), node in named)
        if kind not in chosen or (chosen[kind] not in pod_client and node in pod_client):
            chosen[kind] = node
    picked = set(chosen.values())
    return [n for n in nodes if n in picked]


def _state(conditions: dict[str, bool]) -> tuple[bool, bool, bool]:
    """ready, serving, terminating; an unset one read as kube-proxy reads it (ready and serving true, terminating
    false: lab/describe/resolve/workload.py)."""
    return conditions.get("ready", True), conditions.get("serving", True), conditions.get("terminating", False)


def _has_address(via: str | None, family: str, spec: dict[str, Any], status: list[dict[str, Any]]) -> bool:
    """Whether the frontend a probe goes through has an address of `family`: a load balancer's address of the other
    family may be missing (never assigned, or left out by the import as one the lab cannot announce)."""
    if via != "loadBalancer":
        return True
    addresses = [i["ip"] for i in status] or ([spec["loadBalancerIP"]] if "loadBalancerIP" in spec else [])
    return any(family_of(a) == family for a in addresses)


def _inside(ranges: list[str], family: str) -> str | None:
    """An address inside the first source range of the family (each proxier filters on its own family's)."""
    for text in ranges:
        network = parse_network(text.strip())  # as the API server reads a source range: space around it trimmed
        if ("IPv4" if network.version == 4 else "IPv6") == family:
            return str(next(iter(network.hosts()), network.network_address))  # a /32's hosts() is a list
    return None


def _probe(name: str, source: str, target: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "from": source, "to": target, "expect": OBSERVE}
