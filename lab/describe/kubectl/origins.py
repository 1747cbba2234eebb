"""Where each part of an imported scenario came from, so that what `lab validate` refuses in the scenario written
(a name Kubernetes would not take, a value out of its range) is said at the input's own file, line, object and
field: the scenario is checked before it is written, and its own lines are nobody's to read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lab.describe.errors import ScenarioError
from lab.describe.kubectl.objects import Obj
from lab.describe.yamlsrc import FieldPath, format_path

# A node of the scenario is written in the lab's own form: its fields' places in the Node it came from.
NODE_FIELDS: Mapping[str, FieldPath] = {
    "name": ("metadata", "name"),
    "labels": ("metadata", "labels"),
    "ip": ("status", "addresses"),
    "podCIDR": ("spec", "podCIDRs"),
}
# The scenario's `cluster` fields written from kube-proxy's configuration, and their places in it; the others
# (the release, the networks, the CNI) are the import's own reading of the whole input, no field's.
CLUSTER_FIELDS: Mapping[str, FieldPath] = {
    "proxyMode": ("mode",),
    "kubeProxyClusterCIDR": ("clusterCIDR",),
    "nodePortAddresses": ("nodePortAddresses",),
    "masqueradeAll": ("iptables", "masqueradeAll"),
    "masqueradeBit": ("iptables", "masqueradeBit"),
    "iptables": ("iptables",),
    "ipvs": ("ipvs",),
    "conntrack": ("conntrack",),
    "featureGates": ("featureGates",),
}
_PART = re.compile(r"\[(\d+)\]|\.?([^.\[]+)")


@dataclass(frozen=True)
class Origin:
    """The input object a part of the scenario (a node, a workload manifest) was written from."""

    obj: Obj
    fields: Mapping[str, FieldPath] = field(default_factory=dict)  # written field -> its path in the object
    only: bool = False  # the object wrote only the fields of `fields`


def located(
    error: ScenarioError, origins: Mapping[FieldPath, Origin], scenario: dict[str, Any]
) -> ScenarioError | None:
    """`error` (about the scenario written) said at the input it came from, None when no input object wrote that
    part. `origins` are keyed by the part's path (("workload", 5), ("cluster",)). The field is the input's own where
    the value written is the one read there (a name, a label, a policy), else the object's, with the field as the
    scenario has it."""
    written = _parse(error.field)
    size = next((n for n in (2, 1) if written[:n] in origins), 0)
    origin = origins.get(written[:size])
    rest = written[size:]
    if origin is None or origin.only and (not rest or rest[0] not in origin.fields):
        return None
    inside = (*origin.fields.get(str(rest[0]), rest[:1]), *rest[1:]) if rest else ()
    if not rest or _same(_at(scenario, written), origin.obj, inside):
        return origin.obj.error(inside, error.message)
    return origin.obj.error((), f"{format_path(rest)} as lab import writes it: {error.message}")


def _parse(text: str) -> FieldPath:
    """A field path from its text ("workload[5].spec.ports[0].name")."""
    return tuple(int(index) if index else key for index, key in _PART.findall(text))


def _at(data: Any, path: FieldPath) -> Any:
    for part in path:
        if isinstance(part, int):
            data = data[part] if isinstance(data, list) and part < len(data) else None
        else:
            data = data.get(part) if isinstance(data, dict) else None
    return data


def _same(value: Any, obj: Obj, path: FieldPath) -> bool:
    """Whether the input holds `value` at `path` (a mapping or list there: the place of what was written from it)."""
    if not path or obj.src.lines.get((*obj.path, *path)) is None:
        return False
    found = _at(obj.data, path)
    return isinstance(found, dict | list) or found == value
