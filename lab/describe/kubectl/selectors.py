"""Label selectors (metav1.LabelSelector) as the API machinery reads and matches them: every `matchLabels` pair and
every `matchExpressions` requirement must hold; an empty selector selects everything (LabelSelectorAsSelector and
the Requirement it builds, kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go at
d68e3f8f2285888c69be33127a862070984cb2e5)."""

from __future__ import annotations

from lab.describe.kubectl.objects import Obj
from lab.describe.yamlsrc import FieldPath

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def selects(obj: Obj, path: FieldPath, labels: dict[str, str]) -> bool:
    """Whether the selector at `path` of `obj` selects an object with `labels`; a malformed selector is refused at
    its field (the API server would have refused the object)."""
    wanted = _match_labels(obj, path)
    requirements = [_requirement(obj, p) for p, _ in obj.each((*path, "matchExpressions"))]
    if any(labels.get(k) != v for k, v in wanted.items()):
        return False
    return all(_holds(op, labels.get(key), values) for key, op, values in requirements)


def _match_labels(obj: Obj, path: FieldPath) -> dict[str, str]:
    found = obj.get((*path, "matchLabels"), dict, {})
    for key in found:
        obj.get((*path, "matchLabels", key), str)  # text, or an error naming the label
    return found


def _requirement(obj: Obj, path: FieldPath) -> tuple[str, str, list[str]]:
    key = obj.get((*path, "key"), str)
    if not key:
        raise obj.error((*path, "key"), "missing: expected a label key")
    operator = obj.get((*path, "operator"), str, "")
    if operator not in _OPERATORS:
        raise obj.error((*path, "operator"), f"expected In, NotIn, Exists or DoesNotExist, got {operator!r}")
    values = [obj.get(p, str) for p, _ in obj.each((*path, "values"))]
    if operator in ("In", "NotIn") and not values:
        raise obj.error((*path, "values"), f"{operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise obj.error((*path, "values"), f"{operator} takes no values")
    return key, operator, values


def _holds(operator: str, value: str | None, values: list[str]) -> bool:
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values  # a missing label is not in any set
    return (value is not None) == (operator == "Exists")
