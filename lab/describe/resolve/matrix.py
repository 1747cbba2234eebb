"""The matrix: its axes checked where they were written (the file's `matrix`, or a --matrix flag), bounded, and
expanded into variants, each the file with one value of every axis set where it applies."""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, get_args

from pydantic import TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from lab.describe import k8s, schema
from lab.describe.errors import ScenarioError
from lab.describe.kernel_when import KERNEL, KernelConditionError, conditions, holds
from lab.describe.releases import check_feature_gate, check_version
from lab.describe.topology import Axis, axis_text
from lab.describe.yamlsrc import FieldPath, Source

CLUSTER_AXES = {
    "proxyMode",
    "kubeVersion",
    "iptablesBackend",
    "kubeProxyClusterCIDR",
    "hairpinMode",
    "brNetfilter",
    "cni",
    "ipvsBindLoadBalancerIPs",
    "masqueradeAll",
    "natOutgoing",
}
CONNTRACK_AXES = {"tcpBeLiberal"}  # fields of cluster.conntrack
IPTABLES_AXES = {"localhostNodePorts"}  # fields of cluster.iptables
IPVS_AXES = {"strictARP"}  # fields of cluster.ipvs
GATE_AXES = set(get_args(schema.FeatureGate))  # keys of cluster.featureGates
SERVICE_AXES = {"externalTrafficPolicy", "internalTrafficPolicy"}
ANNOUNCER = "announcer"  # of every `mode: layer2` load balancer: the node whose speaker answers ARP for its VIPs
AXES = CLUSTER_AXES | CONNTRACK_AXES | IPTABLES_AXES | IPVS_AXES | GATE_AXES | SERVICE_AXES | {ANNOUNCER}
MAX_VARIANTS = 256  # variants one file may expand to: each builds a cluster, so more is a typo, not a plan


@dataclass(frozen=True)
class Variant:
    """One variant to resolve: the file as it reads it, and the matrix values it was given."""

    source: Source
    values: tuple[tuple[str, Axis], ...]  # (axis, value) in the matrix's order; () without a matrix
    declared: dict[str, list[Axis]]  # every value the file or the command line lists for each axis
    # The running kernel's release, as the pipeline read it; None when describing for no kernel (a `kernel:`
    # condition then applies to none).
    kernel: str | None = None
    # The machine's architecture by Go's name (kubelet's `kubernetes.io/arch` label on every node), as the runner
    # read it; None when describing for no machine (the nodes then have no such label).
    arch: str | None = None

    def applies(self, path: FieldPath, when: dict[str, Axis | list[str]]) -> bool:
        """Whether this variant, on this kernel, matches an item's `when` (checked against the declared matrix)."""
        axes = self.declared
        on_kernel = self.on_kernel(path, when)
        for axis, value in when.items():
            if axis == KERNEL:
                continue
            if isinstance(value, list):
                raise self.source.error(
                    (*path, "when", axis), f"one value of {axis} expected (a list, a range, is for `kernel` only)"
                )
            if axis not in axes:
                raise self.source.error((*path, "when", axis), f"{axis!r} is not a matrix axis of this scenario")
            # A value this run's matrix leaves out applies to no variant, so that `--matrix proxyMode=ipvs` keeps a
            # file's nftables expectations; one no variant could ever have is a mistake.
            if value not in axes[axis] and not self._could_be(axis, value):
                raise self.source.error(
                    (*path, "when", axis), f"{value!r} is no value of {axis} (the matrix lists {axes[axis]})"
                )
        chosen = dict(self.values)
        return on_kernel and all(chosen.get(a) == v for a, v in when.items() if a != KERNEL)

    def _could_be(self, axis: str, value: Axis) -> bool:
        """Whether a variant could give the axis this value: `announcer` names a node of the file (any text fits its
        field's type, so a misspelt node would leave the expectation applying to no variant, unsaid)."""
        if axis == ANNOUNCER:
            nodes = self.source.data.get("nodes") or []
            return any(isinstance(n, dict) and n.get("name") == value for n in nodes)
        # A quoted 'false' is text, which the field's lax boolean takes, yet no variant's boolean ever equals it.
        if isinstance(value, str) and _field(axis).annotation in (bool, bool | None):
            return False
        return _axis_takes(axis, value)

    def on_kernel(self, path: FieldPath, when: dict[str, Axis | list[str]]) -> bool:
        """Whether the kernel satisfies the `kernel:` condition of `when` (true without one)."""
        if KERNEL not in when:
            return True
        try:
            written = conditions(when[KERNEL])
            return self.kernel is not None and holds(self.kernel, written)
        except KernelConditionError as exc:
            raise self.source.error((*path, "when", KERNEL), str(exc)) from None


def expand(
    source: Source,
    file_axes: dict[str, list[Axis]],
    flags: dict[str, list[Axis]],
    kernel: str | None = None,
    arch: str | None = None,
) -> Iterator[Variant]:
    """The variants of the file, in the matrix's order (the file's axes, then the flags' new ones); the axes and
    their bound are checked before the first is given."""
    written = [_MatrixAxis(source, name, tuple(values)) for name, values in file_axes.items()]
    flagged = [
        _MatrixAxis(source, name, tuple(_flag_value(name, v) for v in values), _flag(name, values))
        for name, values in flags.items()
    ]
    axes = {a.name: a for a in written + flagged}  # a flag replaces the file's axis in its place
    for axis in axes.values():
        axis.check()
    count = math.prod(len(a.values) for a in axes.values())
    if count > MAX_VARIANTS:
        raise _too_many(source, flagged, count)
    # `when` may name any value the file or the command line lists, whichever variants run.
    declared: dict[str, list[Axis]] = {}
    for axis in written + flagged:
        declared[axis.name] = declared.get(axis.name, []) + [
            v for v in axis.values if v not in declared.get(axis.name, [])
        ]
    for indexes in itertools.product(*(range(len(a.values)) for a in axes.values())):
        choice = tuple(zip(axes.values(), indexes, strict=True))
        values = tuple((axis.name, axis.values[k]) for axis, k in choice)
        yield Variant(_variant(source, choice) if choice else source, values, declared, kernel, arch)


def _flag(axis: str, values: list[Axis]) -> str:
    return f"--matrix {axis}={','.join(axis_text(v) for v in values)}"


def _flag_value(axis: str, text: Axis) -> Axis:
    """A value as the file would hold it: `true` and `false` of a boolean axis are YAML's booleans, so that the
    schema (which converts nothing) takes them and `when: {AXIS: true}` matches them."""
    if axis in AXES and _field(axis).annotation is bool and text in ("true", "false"):
        return text == "true"
    return text


def _too_many(source: Source, flagged: list[_MatrixAxis], count: int) -> ScenarioError:
    message = f"the matrix expands to {count} variants; at most {MAX_VARIANTS} are run from one file"
    if flagged:
        return ScenarioError(" ".join(a.flag or "" for a in flagged), None, "", f"{message} ({source.file})")
    return source.error(("matrix",), message)


@dataclass(frozen=True)
class _MatrixAxis:
    """One axis of the matrix and where its values were written: the file's `matrix`, or a --matrix flag."""

    source: Source
    name: str
    values: tuple[Axis, ...]
    flag: str | None = None

    def error(self, index: int | None, message: str) -> ScenarioError:
        """An error about the axis (index None) or one of its values, at the line or the flag that gave it."""
        if self.flag:
            return ScenarioError(
                self.flag, None, "", message if index is None else f"{self.values[index]!r}: {message}"
            )
        path: FieldPath = ("matrix", self.name) if index is None else ("matrix", self.name, index)
        return self.source.error(path, message)

    def check(self) -> None:
        if self.name not in AXES:
            raise self.error(None, f"unknown matrix axis; expected one of {', '.join(sorted(AXES))}")
        if self.name == ANNOUNCER and not _layer2_balancers(self.source.data):
            raise self.error(None, "pins the node of a `mode: layer2` load balancer, and `loadBalancers` has none")
        if not self.values:
            raise self.error(None, "needs at least one value")
        for k, value in enumerate(self.values):
            if value in self.values[:k]:
                first = self.values.index(value)
                where = "" if self.flag else f" (line {self.source.line_of(('matrix', self.name, first))})"
                raise self.error(k, f"{axis_text(value)!r} is listed twice{where}")


@dataclass(frozen=True)
class _VariantSource(Source):
    """The file as one variant reads it: an error about a field the variant set names the matrix value instead."""

    origins: dict[FieldPath, tuple[_MatrixAxis, int]] = field(default_factory=dict)

    def error(self, path: FieldPath, message: str) -> ScenarioError:
        for where, (axis, k) in self.origins.items():
            if path[: len(where)] == where:
                return axis.error(k, message)
        return super().error(path, message)


def _variant(source: Source, choice: tuple[tuple[_MatrixAxis, int], ...]) -> _VariantSource:
    """The file with one value of each axis set where it applies (the cluster, the Services)."""
    data = copy.deepcopy(source.data)
    origins = {path: (axis, k) for axis, k in choice for path in _set_axis(data, axis.name, axis.values[k])}
    _leave_out_unknown_gates_off(data, choice)
    return _VariantSource(source.file, data, source.lines, origins)


def _set_axis(data: dict[str, Any], axis: str, value: Axis) -> list[FieldPath]:
    """Write one matrix value where it applies; the paths written."""
    if axis in CLUSTER_AXES:
        data.setdefault("cluster", {})[axis] = value
        return [("cluster", axis)]
    sections = (
        ("conntrack", CONNTRACK_AXES),
        ("iptables", IPTABLES_AXES),
        ("ipvs", IPVS_AXES),
        ("featureGates", GATE_AXES),
    )
    for section, axes in sections:
        if axis in axes:
            data.setdefault("cluster", {}).setdefault(section, {})[axis] = value
            return [("cluster", section, axis)]
    if axis == ANNOUNCER:
        # Every layer 2 load balancer's, one a file pins too: the axis is what the variant varies.
        layer2 = _layer2_balancers(data)
        for i in layer2:
            data["loadBalancers"][i][axis] = value
        return [("loadBalancers", i, axis) for i in layer2]
    # externalTrafficPolicy only means something for Services with external frontends.
    types = (
        ("ClusterIP", "NodePort", "LoadBalancer") if axis == "internalTrafficPolicy" else ("NodePort", "LoadBalancer")
    )
    paths: list[FieldPath] = []
    for i, manifest in enumerate(data.get("workload", [])):
        if manifest.get("kind") == "Service" and manifest["spec"].get("type", "ClusterIP") in types:
            manifest["spec"][axis] = value
            paths.append(("workload", i, "spec", axis))
    return paths


def _leave_out_unknown_gates_off(data: dict[str, Any], choice: tuple[tuple[_MatrixAxis, int], ...]) -> None:
    """A gate's axis turns it on or off. Off, for a release without the gate, is leaving it out (such a release
    refuses to start when it is named at all, lab/pipeline.py); a release that knows it gets it written off, which
    matters where it is on by default (1.38's KubeProxyNFTablesLocalhostNodePorts)."""
    cluster = data.get("cluster", {})
    version = cluster.get("kubeVersion", schema.Cluster.model_fields["kube_version"].default)
    known = isinstance(version, str) and check_version(version) is None
    for axis, k in choice:
        off = axis.name in GATE_AXES and axis.values[k] is False
        if off and (not known or check_feature_gate(version, axis.name) is not None):
            del cluster["featureGates"][axis.name]


def _layer2_balancers(data: dict[str, Any]) -> list[int]:
    """The indexes of the file's `mode: layer2` load balancers (what the schema checks later is not checked here)."""
    balancers = data.get("loadBalancers")
    if not isinstance(balancers, list):
        return []
    return [i for i, lb in enumerate(balancers) if isinstance(lb, dict) and lb.get("mode") == "layer2"]


def _axis_takes(axis: str, value: Axis) -> bool:
    """Whether a variant could give the axis this value: the field's own type and constraints decide."""
    info = _field(axis)
    kind = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    try:
        TypeAdapter(kind).validate_python(value)
    except ValidationError:
        return False
    return True


def _field(axis: str) -> FieldInfo:
    """The schema's field an axis sets (a feature gate: a value of featureGates, a boolean)."""
    if axis in GATE_AXES:
        return FieldInfo(annotation=bool)
    models = (
        (CLUSTER_AXES, schema.Cluster),
        (CONNTRACK_AXES, schema.Conntrack),
        (IPTABLES_AXES, schema.Iptables),
        (IPVS_AXES, schema.Ipvs),
        ({ANNOUNCER}, schema.LoadBalancer),
    )
    model = next((m for axes, m in models if axis in axes), k8s.ServiceSpec)
    return next(f for name, f in model.model_fields.items() if (f.alias or name) == axis)
