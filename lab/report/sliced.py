"""What every report says of a sliced variant (docs/scenarios.md, "Stand-in nodes"): which nodes the lab built and
which stand in for the rest of the cluster, and what a stand-in is, so that no reader takes a result through a
stand-in's pods for that node's own rules at work. The terminal's line, the HTML report's paragraph and `--json`'s
`sliced` entries all take their words from here."""

from __future__ import annotations

from typing import Any

from lab.describe.topology import Topology
from lab.judge.results import ProbeResult, VariantRun

# A stand-in has no namespace (its pods answer from the one stand-in namespace), no rules and no kube-proxy: what
# a probe to its pods shows is the built node's rules choosing it (lab/realize/standins.py).
STAND_INS = (
    "nodes the lab does not build: their pods answer as addresses routed where the real ones would be, with no "
    "namespace and no kube-proxy of their own; a result through their pods is the built nodes' rules at work"
)


def sliced_line(topo: Topology, most: int | None = 5) -> str:
    """One line naming the built nodes and the stand-ins (`most` of them named, then their count; None: all)."""
    names = [n.name for n in topo.stand_ins]
    shown = ", ".join(names[:most])
    if most is not None and len(names) > most:
        shown += f", ... ({len(names)})"
    return f"sliced: built {', '.join(n.name for n in topo.nodes)}; stand-ins ({STAND_INS}): {shown}"


def sliced_record(topo: Topology) -> dict[str, Any]:
    """A sliced variant in `--json`: named as its probes' records name it, every node built and standing in."""
    return {
        "scenario": topo.scenario,
        "file": topo.file,
        "variant": dict(topo.variant),
        "built": [n.name for n in topo.nodes],
        "stand_ins": [n.name for n in topo.stand_ins],
        "stand_in": f"stand-ins are {STAND_INS}",
    }


def sliced_records(results: list[ProbeResult], runs: list[VariantRun]) -> list[dict[str, Any]]:
    """Each sliced variant that ran, once, in the order run; a variant cut short is known by its results alone (it
    has no run yet); a variant this machine skipped built nothing, so it names no built node."""
    topologies = [run.topology for run in runs if not run.skipped] + [r.topology for r in results]
    seen: dict[tuple[str, str, tuple], Topology] = {}
    for topo in topologies:
        if topo.stand_ins:
            seen.setdefault((topo.scenario, topo.file, topo.variant), topo)
    return [sliced_record(topo) for topo in seen.values()]
