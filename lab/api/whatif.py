"""`lab run --what-if PROBE`: the variant run as written, then once per change the probe's chain names
(lab/judge/whatif.py), every probe again each time, all on the kernel.

A Service field is what kube-proxy resyncs: the lab is built as the file has it, and kube-proxy on every node is
told of the changed Service before the first probe (a step, as a probe's `before:` is done), the probes then run
as describe resolves them with the field set. Where the field changes more than kube-proxy sees (a cloud load
balancer's nodes follow externalTrafficPolicy), the variant is built anew with the field set instead. A node's
setup (proxy mode, hairpin mode, kube-proxy's flags) is another variant of the matrix, built anew."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from lab.api.variant import run_variant
from lab.describe.errors import ScenarioError
from lab.describe.load import load_scenario
from lab.describe.resolve.whatif import ServiceField
from lab.describe.topology import Axis, StepSpec, Topology
from lab.doctor import machine_arch, running_kernel
from lab.judge.whatif import RESYNC, Change, Tried, WhatIf, choose, diagnoses_of, settings_of


def what_if(topo: Topology, probe: str, timeout: float, progress: Callable[[str], None]) -> WhatIf | str:
    """The what-if of `probe` in the variant `topo`; `progress` is told what runs. A string says why it could not
    run (the variant cannot run here)."""
    progress(f"{topo.scenario} ({topo.variant_label}) as written")
    baseline = run_variant(topo, timeout)
    if baseline.skipped:
        return f"{topo.scenario} ({topo.variant_label}) cannot run here: {baseline.skipped}"
    target = next(r for r in baseline.results if r.probe.name == probe)
    diagnoses = diagnoses_of(target.observed)
    changes, untried = choose(diagnoses, topo, target.probe)
    tried = []
    for change in changes:
        progress(f"{topo.scenario} ({topo.variant_label}) with {change}")
        tried.append(_try(change, topo, timeout))
    return WhatIf(probe, tuple(baseline.results), settings_of(diagnoses, topo), tuple(tried), untried)


def _try(change: Change, topo: Topology, timeout: float) -> Tried:
    """Every probe of the variant under the change."""
    fields = (change.service,) if change.service else ()
    try:
        changed = _load(topo, {change.name: [change.value]} if change.how != RESYNC else {}, fields)
    except ScenarioError as exc:  # a value this scenario cannot take (promiscuous-bridge on an IPv6 cluster)
        return Tried(change, skipped=f"the scenario cannot take it: {exc}")
    built = "a variant built anew"
    if change.how == RESYNC:
        if changed.load_balancers == topo.load_balancers:
            assert change.service is not None
            changed, built = _resynced(topo, changed, change.service), "the lab as built, kube-proxy resynced"
        else:
            built = "a variant built anew: the load balancer's nodes change with it, not only kube-proxy's rules"
    run = run_variant(changed, timeout)
    return Tried(change, tuple(run.results), run.skipped, built)


def _load(topo: Topology, axes: dict[str, list[Axis]], fields: tuple[ServiceField, ...]) -> Topology:
    """The variant `topo` with the matrix values `axes` instead of its own, and the Service fields set."""
    matrix = {axis: [value] for axis, value in topo.variant} | axes
    scenario = load_scenario(topo.file, matrix, kernel=running_kernel(), arch=machine_arch(), service_fields=fields)
    return scenario.variants[0]


def _resynced(topo: Topology, changed: Topology, field: ServiceField) -> Topology:
    """The lab `topo` builds, told of the changed Services before its first probe (kube-proxy's resync on every
    node), then the probes of `changed`."""
    step = StepSpec(text=f"set {field} (kube-proxy resyncs every node)", pods=changed.pods, services=changed.services)
    first, *rest = changed.probes
    probes = (dataclasses.replace(first, before=(step, *first.before)), *rest)
    return dataclasses.replace(topo, probes=probes)
