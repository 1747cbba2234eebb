"""A what-if's change to one Service's field (`lab run --what-if`), written into a variant's file as a user would
write it, after the matrix has set its values: describe then resolves the variant as it would any file, so that
what the field changes beyond kube-proxy's rules (the load balancer's nodes, a healthCheckNodePort) is derived as
for any other Service."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lab.describe.yamlsrc import Source


@dataclass(frozen=True)
class ServiceField:
    """spec.`field` of the Service `namespace`/`name` set to `value`."""

    namespace: str
    name: str
    field: str  # externalTrafficPolicy, internalTrafficPolicy, sessionAffinity
    value: str

    def __str__(self) -> str:
        return f"{self.field}: {self.value} on Service {self.namespace}/{self.name}"


# Fields the API server forbids or clears beside a value: ValidateService refuses sessionAffinityConfig "when
# session affinity is None" (kubernetes/kubernetes pkg/apis/core/validation/validation.go); dropTypeDependentFields
# wipes a healthCheckNodePort the Service no longer needs (pkg/registry/core/service/strategy.go at
# 184c25044c666174d63e81780ecfb499b5ec31ed).
_CLEARED = {
    ("sessionAffinity", "None"): "sessionAffinityConfig",
    ("externalTrafficPolicy", "Cluster"): "healthCheckNodePort",
}


def set_service_fields(source: Source, fields: tuple[ServiceField, ...]) -> None:
    """Write each field into the variant's Service manifest; a Service the file does not hold is an error naming
    its workload."""
    for change in fields:
        spec = _service_spec(source, change)
        spec[change.field] = change.value
        spec.pop(_CLEARED.get((change.field, change.value), ""), None)


def _service_spec(source: Source, change: ServiceField) -> dict[str, Any]:
    for manifest in source.data.get("workload") or []:
        if not isinstance(manifest, dict) or manifest.get("kind") != "Service":
            continue
        metadata = manifest.get("metadata") or {}
        if (metadata.get("namespace") or "default", metadata.get("name")) == (change.namespace, change.name):
            return manifest.setdefault("spec", {})
    raise source.error(("workload",), f"no Service {change.namespace}/{change.name} to set {change.field} on")
