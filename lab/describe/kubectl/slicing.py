"""A cluster larger than the lab builds, imported sliced: the nodes its probes cross are built, each with
kube-proxy's rules for every Service and endpoint of the cluster, and every other node is a stand-in (`standIn:
true`, docs/scenarios.md "Stand-in nodes"): its pods are the endpoint addresses the EndpointSlices name, written
bare (the podCIDR says the node), so that thirty thousand endpoints fit a scenario."""

from __future__ import annotations

from typing import Any

from lab.describe.errors import ScenarioError
from lab.describe.resolve.network import MAX_NODES


def built_nodes(asked: list[str], wanted: list[str], probed: dict[str, list[str]]) -> list[str] | None:
    """The nodes to build, in the input's order: those `--nodes` names, else, over the lab's 100 nodes, those the
    probes of the first Service cross (its own endpoints' node and one of each other kind); None to build every
    node (no slicing)."""
    if asked:
        unknown = [n for n in asked if n not in wanted]
        if unknown:
            raise ScenarioError(
                "lab import", None, "--nodes", f"no node {', '.join(unknown)} in the input (or in the Services asked)"
            )
        chosen = set(asked)
    elif len(wanted) > MAX_NODES and probed:
        chosen = set(next(iter(probed.values())))
    else:
        return None
    if len(chosen) > MAX_NODES:
        raise ScenarioError("lab import", None, "--nodes", f"at most {MAX_NODES} nodes are built, not {len(chosen)}")
    return [n for n in wanted if n in chosen]


def probed_within(probed: dict[str, list[str]], built: list[str]) -> dict[str, list[str]]:
    """The Services every node of whose kinds is built: each is probed as a whole cluster would be; the others
    are written with their rules and endpoints, unprobed (a probe through a stand-in is refused)."""
    inside = set(built)
    kept = {key: nodes for key, nodes in probed.items() if set(nodes) <= inside}
    if not kept:
        raise ScenarioError(
            "lab import",
            None,
            "--nodes",
            f"no Service is probed through {', '.join(built)} alone: each is probed through one node of each kind "
            "its rules tell apart (its endpoints' node and one without); name those nodes",
        )
    return kept


def sliced_note(built: list[str], total: int, probed: int, services: int) -> str:
    return (
        f"lab import: sliced: {len(built)} of the {total} nodes are built ({', '.join(built)}), each with "
        f"kube-proxy's rules for all {services} Services; the other {total - len(built)} are stand-ins (standIn: "
        f"true: their pods are the endpoint addresses, answered from one namespace, docs/scenarios.md); {probed} "
        "Service(s) are probed, those whose probes cross built nodes alone (--nodes chooses others)"
    )


def stand_in_endpoint(endpoint: dict[str, Any]) -> dict[str, Any]:
    """An endpoint on a stand-in, written compactly: its address, and its conditions, zone and hints only where
    they are not a ready endpoint's defaults (a missing ready is ready, EndpointSlice's API)."""
    out = {k: v for k, v in endpoint.items() if k not in ("nodeName", "conditions")}
    conditions = endpoint.get("conditions") or {}
    if conditions.get("ready") is False or conditions.get("serving") is False or conditions.get("terminating"):
        out["conditions"] = conditions
    return out
