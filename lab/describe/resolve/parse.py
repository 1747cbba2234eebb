"""The file's data against the schema: a ScenarioFile, or the first wrong field named as the user wrote it."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from lab.describe import k8s, schema
from lab.describe.errors import did_you_mean
from lab.describe.yamlsrc import FieldPath, Source


def check_manifests(source: Source) -> None:
    """Refuse what Kubernetes' API would (kubectl apply --validate=strict): a field its objects do not have."""
    workload = source.data.get("workload")
    for i, manifest in enumerate(workload if isinstance(workload, list) else []):
        if isinstance(manifest, dict) and (problem := k8s.api_problem(manifest)):
            path, message = problem
            raise source.error(("workload", i, *path), message)


def parse(source: Source) -> schema.ScenarioFile:
    """The file (or a variant of it) as the schema reads it; one error, at the line of the field that is wrong."""
    try:
        return schema.ScenarioFile.model_validate(source.data)
    except ValidationError as exc:
        path, error = _most_telling([(_field_path(e, source.data), e) for e in exc.errors()])
        raise source.error(path, _explain(error)) from None


def _most_telling(errors: list[tuple[FieldPath, Any]]) -> tuple[FieldPath, Any]:
    """The error to show of the first field that is wrong."""
    first = errors[0]
    # A required field missing beside an unknown one is most likely that one misspelt: name the misspelling.
    if first[1]["type"] == "missing":
        siblings = (e for e in errors if e[1]["type"] == "extra_forbidden" and e[0][:-1] == first[0][:-1])
        first = next(siblings, first)
    # A union (`expect: {...}` or a list of them) fails in each of its forms; the form that got furthest into
    # the value is the one the user meant.
    return max((e for e in errors if e[0][: len(first[0])] == first[0]), key=lambda e: len(e[0]))


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


def _explain(error: Any) -> str:
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
    "int_type": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected text",
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
