"""describe: a scenario file in, one checked Topology per matrix variant out.

The file is read (yamlsrc), checked against the schema (resolve.parse) and expanded into its matrix variants
(resolve.matrix); each variant then runs the chain of resolve steps in `_resolve`, each step checking its part of
the file against what the steps before it returned.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from lab.describe import schema
from lab.describe.errors import ScenarioError, ScenarioErrors, raise_all
from lab.describe.resolve.actors import (
    gateway_routes,
    resolve_egress,
    resolve_load_balancers,
    resolve_masq_agent,
    unannounced,
)
from lab.describe.resolve.cluster import resolve_cluster
from lab.describe.resolve.matrix import Variant, expand
from lab.describe.resolve.network import resolve_externals, resolve_nodes
from lab.describe.resolve.parse import check_manifests, parse
from lab.describe.resolve.probes import resolve_probes
from lab.describe.resolve.remainder import as_written, probes_refused, without_probes
from lab.describe.resolve.steps import SCALED, scale_demand
from lab.describe.resolve.unrouted import unannounced_addresses
from lab.describe.resolve.whatif import ServiceField, set_service_fields
from lab.describe.resolve.workload import resolve_pods, resolve_services, unselected, without_endpoints
from lab.describe.topology import Axis, Topology
from lab.describe.yamlsrc import Expected, Source, load_yaml

_FIELDS = {f.alias or name: f.is_required() for name, f in schema.ScenarioFile.model_fields.items()}


def _not_a_scenario(keys: dict[str, int]) -> str:
    """Why a mapping with these top-level keys is no scenario ("" when it is one): it is when every key is a
    scenario's field (one in the making may lack a required one), or when it has every required field (one with
    a misspelt key, which the schema then names with a "did you mean")."""
    unknown = sorted(line for key, line in keys.items() if key not in _FIELDS)
    missing = [f"`{key}`" for key, required in _FIELDS.items() if required and key not in keys]
    if not unknown or not missing:
        return ""
    if "kind" in keys and ("apiVersion" in keys or "items" in keys):  # an object, or a List of them
        return "it is kubectl output (`apiVersion` and `kind`): `lab import FILE -o scenario.yaml` writes a scenario"
    where = f"line {unknown[0]} holds" if len(unknown) == 1 else f"lines {', '.join(map(str, unknown))} hold"
    return f"{where} no field of a scenario, and it has no {' or '.join(missing)}"


_SCENARIO = Expected("a scenario (a mapping with `name`, `nodes`, `workload` and `probes`)", _not_a_scenario)
# A scenario's values: a sliced 1 000-node import holds every endpoint of the cluster, 30 000 of them at about four
# values each (docs/scenarios.md, "Stand-in nodes"); aliases stay bounded apart (yamlsrc.MAX_REPEATED).
MAX_SCENARIO_VALUES = 250_000


@dataclass(frozen=True)
class Scenario:
    name: str
    file: str
    description: str
    variants: tuple[Topology, ...]

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every variant's warnings, each once."""
        return tuple(dict.fromkeys(w for v in self.variants for w in v.warnings))


def load_scenario(
    path: Path | str,
    matrix: dict[str, list[Axis]] | None = None,
    extra_probes: tuple[dict, ...] = (),
    kernel: str | None = None,
    arch: str | None = None,
    own_probes: bool = True,
    service_fields: tuple[ServiceField, ...] = (),
) -> Scenario:
    """Load, check and expand a scenario; `matrix` adds or replaces axes (e.g. proxyMode from the command line);
    `extra_probes` are checked and resolved after the file's own, as if written at its end (`lab probe`'s ad hoc
    one); `own_probes` False leaves the file's own probes out, so that `extra_probes` are resolved against the
    workload as it starts (the Python API's probes and steps, lab.api); `kernel` is the release the variants will
    run on (lab.doctor.running_kernel), which `when: {kernel: ...}` is judged against (None: no kernel, and such
    a condition applies to nothing); `arch` the machine's
    architecture (lab.doctor.machine_arch), each node's `kubernetes.io/arch` label (None: no such label);
    `service_fields` are Services' fields set in every variant after its matrix (`lab run --what-if`). What
    is wrong is raised all at once (ScenarioErrors): every field the schema refuses, or, in a file the schema
    reads, what each variant's resolve steps refuse."""
    source = load_yaml(path, max_values=MAX_SCENARIO_VALUES, expected=_SCENARIO)
    if (extra_probes or not own_probes) and isinstance(source.data.get("probes"), list):
        source.data["probes"] = [*(source.data["probes"] if own_probes else ()), *extra_probes]
    errors = check_manifests(source)
    try:
        base = parse(source)
    except ScenarioError as exc:
        raise_all([*errors, *_each(exc), *_in_the_rest(source, [*errors, *_each(exc)], matrix or {}, kernel, arch)])
    raise_all(errors)
    variants = _variants(source, base, matrix or {}, kernel, arch, service_fields)
    return Scenario(base.name, source.file, base.description, tuple(variants))


def _each(exc: ScenarioError) -> list[ScenarioError]:
    return exc.errors if isinstance(exc, ScenarioErrors) else [exc]


def _variants(
    source: Source,
    base: schema.ScenarioFile,
    matrix: dict[str, list[Axis]],
    kernel: str | None,
    arch: str | None,
    service_fields: tuple[ServiceField, ...] = (),
) -> list[Topology]:
    """Every variant, resolved; or every error of every variant (one may refuse what another does not)."""
    variants, errors = [], []
    for v in expand(source, base.matrix, matrix, kernel, arch):
        try:
            set_service_fields(v.source, service_fields)
            variants.append(_resolve(v, parse(v.source) if v.values or service_fields else base))
        except ScenarioError as exc:
            errors += _each(exc)
    raise_all(errors)
    return variants


def _in_the_rest(
    source: Source,
    errors: list[ScenarioError],
    matrix: dict[str, list[Axis]],
    kernel: str | None,
    arch: str | None,
) -> list[ScenarioError]:
    """What the resolve steps refuse in the file without the probes the schema refused (none when the schema
    refused more than probes)."""
    refused = probes_refused(errors, source)
    rest = without_probes(source, refused) if refused is not None else None
    if rest is None:
        return []
    reduced, places = rest
    try:
        _variants(reduced, parse(reduced), matrix, kernel, arch)
    except ScenarioError as exc:
        return [as_written(e, places) for e in _each(exc)]
    return []


def _resolve(variant: Variant, f: schema.ScenarioFile) -> Topology:
    """One variant's Topology: every name bound to an address, the first inconsistency reported with its line."""
    src = variant.source
    cluster = resolve_cluster(src, f.cluster)
    every_node = resolve_nodes(src, f.nodes, cluster, variant.arch)
    nodes = tuple(n for n in every_node if not n.stand_in)  # the built ones: every stage below works on these
    externals = resolve_externals(src, f.external_hosts, cluster, every_node)
    demand = scale_demand(variant, f.probes, f.workload)
    pods, pending = resolve_pods(src, f.workload, cluster, every_node, demand, externals)
    # Every Service as if every built pod ran; at the start without the replicas a later step creates.
    potential = resolve_services(src, f.workload, cluster, every_node, (*pods, *pending), externals)
    services = tuple(without_endpoints(s, {p.name for p in pending}) for s in potential)
    egress = resolve_egress(src, f.egress_gateway, cluster, nodes)
    balancers, announced = resolve_load_balancers(src, f.load_balancers, cluster, nodes, externals, services, egress)
    fabric = Topology(
        scenario=f.name,
        file=src.file,
        variant=variant.values,
        kernel=variant.kernel or "",
        cluster=cluster,
        nodes=nodes,
        pods=pods,
        externals=externals,
        services=services,
        probes=(),
        description=f.description,
        lb_routes=gateway_routes(nodes, services, balancers, announced),
        load_balancers=balancers,
        announcements=announced,
        egress=egress,
        masq_agent=resolve_masq_agent(src, f.ip_masq_agent, nodes),
        pending_pods=pending,
        stand_ins=tuple(n for n in every_node if n.stand_in),
        warnings=unselected(src, f.workload, pods)
        + unannounced(src, f.load_balancers, announced)
        + unannounced_addresses(src, f.workload, cluster, nodes, externals, services, (balancers, announced)),
    )
    controllers = frozenset((m.kind, m.metadata.namespace, m.metadata.name) for m in f.workload if m.kind in SCALED)
    return dataclasses.replace(fabric, probes=resolve_probes(variant, f.probes, fabric, potential, controllers))
