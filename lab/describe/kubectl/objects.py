"""kubectl's output as lab import reads it: each file (or standard input) recognised by what it holds, each
Kubernetes object with the file and line it came from, and every field read through `Obj.get`, which says in
words which file, object and field is wrong and what was expected.

Every input is untrusted: files are read through lab/describe/readfile.py (a regular file of bounded size) and
parsed as plain YAML (lab/describe/yamlsrc.py); JSON (`kubectl -o json`) is YAML too.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from lab.describe.errors import ScenarioError
from lab.describe.readfile import ReadError, utf8_text
from lab.describe.yamlsrc import Expected, FieldPath, Source, format_path, load_documents, parse_documents, parse_yaml

# A cluster's dump is larger than a scenario: `kubectl get pods -A -o yaml` holds a few kB and a few hundred
# values per pod (managedFields included), so 1 000 pods are some 8 MB and 500 000 values.
MAX_BYTES = 64 * 2**20
MAX_VALUES = 5_000_000

KINDS = ("Node", "Pod", "Service", "EndpointSlice", "ConfigMap", "KubeProxyConfiguration", "ServiceCIDR", "IPPool")
# MetalLB's address pools and advertisements, kube-vip's DaemonSet and Leases: who announces load balancer addresses.
ANNOUNCER_KINDS = ("IPAddressPool", "L2Advertisement", "BGPAdvertisement", "DaemonSet", "Lease")

_TYPES = {str: "text", int: "a whole number", bool: "true or false", dict: "a mapping", list: "a list"}


@dataclass(frozen=True)
class Obj:
    """One Kubernetes object (or document) of an input: its data, and where it is in its file."""

    src: Source
    path: FieldPath  # of the object inside its file: () or ("items", 3)
    data: dict[str, Any]
    label: str = ""  # for a document held in a field: "ConfigMap kube-system/kube-proxy: data.config.conf"

    def _text(self, *path: str) -> str:
        """A field of text, "" when missing or of another type (`get` says which, where it matters)."""
        value: Any = self.data
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        return value if isinstance(value, str) else ""

    @property
    def kind(self) -> str:
        return self._text("kind")

    @property
    def name(self) -> str:
        return self._text("metadata", "name")

    @property
    def namespace(self) -> str:
        return self._text("metadata", "namespace")

    @property
    def key(self) -> str:
        """NAMESPACE/NAME, or NAME for a cluster-scoped object."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def ident(self) -> str:
        return self.label or f"{self.kind or 'object'} {self.key}".strip()

    def _where(self, path: FieldPath) -> tuple[int | None, str]:
        return self.src.line_of((*self.path, *path)), f"{self.ident}: {format_path(path)}" if path else self.ident

    def error(self, path: FieldPath, message: str) -> ScenarioError:
        line, what = self._where(path)
        return ScenarioError(self.src.file, line, what, message)

    def note(self, path: FieldPath, message: str) -> str:
        """A line for standard error: what lab import left out or changed here, and why."""
        return str(self.error(path, message))

    def get(self, path: FieldPath, kind: type, default: Any = None) -> Any:
        """The value at `path` (`default` when it or a field above it is missing or null), which must be of `kind`."""
        value: Any = self.data
        for i, part in enumerate(path):
            if value is None:
                return default
            container = dict if isinstance(part, str) else list
            if not isinstance(value, container):
                raise self.error(path[:i], f"expected {_TYPES[container]}, got {_said(value)}")
            value = value.get(part) if isinstance(part, str) else value[part] if part < len(value) else None
        if value is None:
            return default
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.error(path, f"expected {_TYPES[kind]}, got {_said(value)}")
        return value

    def each(self, path: FieldPath) -> list[tuple[FieldPath, Any]]:
        """The items of a list field, each with its path."""
        return [((*path, i), item) for i, item in enumerate(self.get(path, list, []))]


def _said(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return repr(value[:60])
    return _TYPES.get(type(value), type(value).__name__)


@dataclass
class Inputs:
    """Everything given, sorted by kind; `unused` counts what lab import does not read, per file and kind."""

    objects: dict[str, list[Obj]] = field(default_factory=lambda: {k: [] for k in KINDS + ANNOUNCER_KINDS})
    versions: list[Obj] = field(default_factory=list)  # `kubectl version -o yaml` documents
    unused: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, obj: Obj) -> None:
        kind = obj.get(("kind",), str, "")
        if not kind and ("serverVersion" in obj.data or "clientVersion" in obj.data):
            self.versions.append(obj)
        elif kind.endswith("List"):  # List, or NodeList and the like
            for path, item in obj.each(("items",)):
                if not isinstance(item, dict):
                    raise obj.error(path, f"expected a Kubernetes object, got {_said(item)}")
                self.add(Obj(obj.src, (*obj.path, *path), item))
        elif kind in self.objects:
            obj.get(("metadata", "namespace"), str)  # text, or an error naming it
            if not obj.get(("metadata", "name"), str) and kind != "KubeProxyConfiguration":
                raise obj.error(("metadata", "name"), "every object has a name")
            self.objects[kind].append(obj)
        elif not kind:
            raise obj.error(
                ("kind",),
                "expected a Kubernetes object or List (kubectl get ... -o yaml|json) or kubectl version -o yaml",
            )
        else:
            self.unused[(obj.src.file, kind)] = self.unused.get((obj.src.file, kind), 0) + 1

    def notes(self) -> list[str]:
        return [
            f"{file}: {count} {kind} object(s) not read: lab import reads Nodes, Pods, Services, EndpointSlices, "
            "Calico's IPPools, "
            "ServiceCIDRs, kube-proxy's ConfigMap, kubectl version, MetalLB's IPAddressPools, L2Advertisements and "
            "BGPAdvertisements, DaemonSets and Leases (kube-vip's)"
            for (file, kind), count in self.unused.items()
        ]


def _not_kubectl_output(keys: dict[str, int]) -> str:
    """Every Kubernetes object and List has a `kind`; `kubectl version -o yaml`, its client's and server's."""
    if "kind" in keys or "serverVersion" in keys or "clientVersion" in keys:
        return ""
    return "it has no `kind` (nor `serverVersion`, as kubectl version writes)"


KUBECTL = Expected(
    "kubectl output (a Kubernetes object or List, kubectl get ... -o yaml|json, or kubectl version -o yaml)",
    _not_kubectl_output,
)


def read_inputs(files: list[str]) -> Inputs:
    """Every file's objects, of each of its YAML documents (kubectl's outputs concatenated, `---` between them);
    `-` is standard input."""
    inputs = Inputs()
    for name in files:
        for src in _stdin() if name == "-" else load_documents(name, MAX_BYTES, MAX_VALUES, KUBECTL):
            inputs.add(Obj(src, (), src.data))
    return inputs


def _stdin() -> list[Source]:
    data = sys.stdin.buffer.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ScenarioError("<stdin>", None, "", f"more than {MAX_BYTES} bytes, the most lab import reads")
    try:
        text = utf8_text(data)
    except ReadError as exc:
        raise ScenarioError("<stdin>", exc.line, "", exc.reason) from None
    return parse_documents("<stdin>", text, MAX_VALUES, KUBECTL)


def embedded(obj: Obj, path: FieldPath) -> Obj:
    """A YAML document held as text in a field (a ConfigMap's data), read as an object of its own: its errors and
    notes name the field, and the line of the file (the text is a block under the field's key, as kubectl prints
    it)."""
    text = obj.get(path, str)
    if text is None:
        raise obj.error(path, "missing: expected kube-proxy's configuration (a KubeProxyConfiguration) as text")
    line, what = obj._where(path)
    inner = parse_yaml(obj.src.file, text, MAX_VALUES)
    if not isinstance(inner.data, dict):
        raise obj.error(path, f"expected a KubeProxyConfiguration document, got {_said(inner.data)}")
    shifted = Source(obj.src.file, inner.data, {p: n + (line or 0) for p, n in inner.lines.items()})
    return Obj(shifted, (), inner.data, what)
