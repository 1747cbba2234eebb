"""The file's data against the schema: a ScenarioFile, or the first wrong field named as the user wrote it."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from lab.describe import k8s, schema
from lab.describe.errors import ScenarioError, did_you_mean, raise_all
from lab.describe.yamlsrc import FieldPath, Source


def check_manifests(source: Source) -> list[ScenarioError]:
    """What Kubernetes' API would refuse (kubectl apply --validate=strict): a field its objects do not have; the
    first such field of each manifest."""
    workload = source.data.get("workload")
    found = []
    for i, manifest in enumerate(workload if isinstance(workload, list) else []):
        if isinstance(manifest, dict) and (problem := k8s.api_problem(manifest)):
            path, message = problem
            found.append(source.error(("workload", i, *path), message))
    return found


def parse(source: Source) -> schema.ScenarioFile:
    """The file (or a variant of it) as the schema reads it; else every field that is wrong, each at its line."""
    try:
        return schema.ScenarioFile.model_validate(source.data)
    except ValidationError as exc:
        raise_all(schema_errors(source, exc.errors()))
        raise AssertionError("a ValidationError without errors") from None


def schema_errors(source: Source, errors: list[Any]) -> list[ScenarioError]:
    """pydantic's errors as the user wrote the file: one per field that is wrong, in the form of a union the
    value meant."""
    chosen = _meant(source.data, [(tuple(e["loc"]), e) for e in errors])
    by_path: dict[FieldPath, Any] = {}
    for _, error in chosen:
        by_path.setdefault(_field_path(error, source.data), error)
    # A required field missing beside an unknown one is most likely that one misspelt: name the misspelling only.
    misspelt = {path[:-1] for path, e in by_path.items() if e["type"] == "extra_forbidden"}
    return [
        source.error(path, explain(e))
        for path, e in by_path.items()
        if not (e["type"] == "missing" and path[:-1] in misspelt)
    ]


def _meant(data: Any, errors: list[tuple[tuple[Any, ...], Any]]) -> list[tuple[tuple[Any, ...], Any]]:
    """The errors of the union forms the file meant: a union (`expect: {...}` or a list of them) fails in each of
    its forms, and the form that got furthest into the value is the one the user meant; unions inside it alike."""
    plain, unions = [], {}
    for loc, error in errors:
        at = _union_at(loc, data, error)
        if at is None:
            plain.append((loc, error))
        else:
            unions.setdefault(loc[:at], {}).setdefault(loc[at], []).append((loc[:at] + loc[at + 1 :], error))
    for forms in unions.values():
        meant = max(forms.values(), key=lambda form: max(len(_field_path(e, data)) for _, e in form))
        plain += _meant(data, meant)
    return plain


def _union_at(loc: tuple[Any, ...], data: Any, error: Any) -> int | None:
    """Where in loc pydantic names a union's form (`str`, `Expectation`): the first part that is not in the data."""
    node = data
    for i, part in enumerate(loc):
        if (isinstance(node, dict) and part in node) or (isinstance(node, list) and isinstance(part, int)):
            node = node[part]
        elif not (i == len(loc) - 1 and error["type"] == "missing"):
            return i
    return None


def _field_path(error: Any, data: Any) -> FieldPath:
    """Where in the file pydantic's error is: its loc without the union members it names (`str`, `Expectation`)."""
    path: list[str | int] = []
    node = data
    loc = error["loc"]
    for i, part in enumerate(loc):
        if (isinstance(node, dict) and part in node) or (isinstance(node, list) and isinstance(part, int)):
            path.append(part)
            node = node[part]
        elif i == len(loc) - 1 and error["type"] == "missing":
            path.append(part)
    return tuple(path)


def explain(error: Any) -> str:
    """pydantic's message in the words of the file: the misspelt field's likely name, the kinds a manifest may be."""
    kind, message = error["type"], error["msg"]
    if kind == "extra_forbidden":
        return "unknown field" + did_you_mean(str(error["loc"][-1]), _allowed_fields(error["loc"]))
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":
        kinds = "Pod, Deployment, ReplicaSet, Service or EndpointSlice"
        return f"unsupported kind {error['input'].get('kind')!r}; expected {kinds}"
    if kind == "union_tag_not_found":
        return "every manifest needs a `kind` (Pod, Deployment, ReplicaSet, Service or EndpointSlice)"
    if kind == "value_error":
        return message.removeprefix("Value error, ")
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, not {_written(error['input'], kind)}"
    words = _WORDS.get(kind)
    if words is None:  # a check no scenario field has today: pydantic's sentence, in the file's words
        return message.replace("Input should be", "expected").replace(" should ", " must ")
    said = words.format(**error.get("ctx", {}))
    shown = error.get("input")
    return f"{said}, not {shown!r}" if isinstance(shown, str | int | float) else said


# pydantic's error types the schema can raise, in the words of the file (its own messages say "Input should be").
_WORDS = {
    "greater_than_equal": "expected a number of at least {ge}",
    "greater_than": "expected a number above {gt}",
    "less_than_equal": "expected a number of at most {le}",
    "less_than": "expected a number below {lt}",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_parsing": "expected a number",
    "bool_parsing": "expected true or false",
    "list_type": "expected a list",
    "dict_type": "expected a mapping (KEY: VALUE)",
    "model_type": "expected a mapping of fields",
    "model_attributes_type": "expected a mapping of fields",
    "too_short": "expected at least {min_length} item(s), got {actual_length}",
    "too_long": "expected at most {max_length} item(s), got {actual_length}",
    "string_too_short": "expected at least {min_length} character(s)",
    "string_too_long": "expected at most {max_length} character(s)",
    "literal_error": "expected {expected}",
}


# Types the schema reads strictly, as Kubernetes' API does: `replicas: true` or `keep: "yes"` is refused, not
# converted (pydantic's lax mode would read true as 1 and "yes" as true).
_EXPECTED = {
    "int_type": "a whole number",
    "bool_type": "true or false",
    "string_type": "text",
    "float_type": "a number",
}


def _written(value: Any, kind: str) -> str:
    """A value as the file wrote it, and what YAML read it as when that is the surprise."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, str):
        if kind == "bool_type":
            unquoted = value.lower() in ("true", "false")
        else:
            unquoted = kind != "string_type" and value.strip().lstrip("-").isdigit()
        return f"{value!r} (quoted text: write it without quotes)" if unquoted else repr(value)
    if isinstance(value, float) and kind == "string_type":
        return f'the number {value!r} (YAML reads 1.30 as 1.3: write it in quotes, "1.30")'
    if isinstance(value, float):
        return f"{value!r} (a decimal number)"
    if isinstance(value, list | dict):
        return "a list" if isinstance(value, list) else "a mapping"
    return "null" if value is None else repr(value)


def _allowed_fields(loc: tuple[str | int, ...]) -> list[str]:
    """The fields the schema has where loc's last part was found."""
    kind: Any = schema.ScenarioFile
    for part in loc[:-1]:
        kind = _inner_type(kind, part)
    if typing.get_origin(kind) in (typing.Union, types.UnionType):  # an optional model (`to: Target | None`)
        kind = next((a for a in typing.get_args(kind) if a is not type(None)), None)
    if not (isinstance(kind, type) and issubclass(kind, BaseModel)):
        return []
    return [f.alias or name for name, f in kind.model_fields.items()]


def _inner_type(kind: Any, part: str | int) -> Any:
    """The type at `part` of a pydantic loc inside `kind`: a model's field, a list's item, a dict's value, or
    the member of a union that pydantic names (`Expectation`, `list[Expectation]`)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        named = [a for a in members if str(part).split("[")[0] == getattr(typing.get_origin(a) or a, "__name__", "")]
        return named[0] if named else _inner_type(members[0], part)  # Optional[Model]: pydantic names no member
    if origin is list:
        return args[0]
    if origin is dict:
        return args[1]
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return next((f.annotation for name, f in kind.model_fields.items() if (f.alias or name) == part), None)
    return None
