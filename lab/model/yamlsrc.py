"""YAML loading that remembers the line of every value, so errors can point at it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lab.model.errors import ScenarioError

FieldPath = tuple[str | int, ...]


def format_path(path: FieldPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass(frozen=True)
class Source:
    """A parsed YAML document plus the line (1-based) where each field path starts."""

    file: str
    data: Any
    lines: dict[FieldPath, int]

    def line_of(self, path: FieldPath) -> int | None:
        """Line of the deepest known prefix of path (a missing field points at its parent)."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None

    def error(self, path: FieldPath, message: str) -> ScenarioError:
        return ScenarioError(self.file, self.line_of(path), format_path(path), message)


def _construct(node: yaml.Node, path: FieldPath, lines: dict[FieldPath, int], loader: yaml.SafeLoader) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node)
            if not isinstance(key, str | int | bool | float):
                raise ScenarioError("", key_node.start_mark.line + 1, format_path(path), "keys must be scalars")
            key = str(key)
            lines[(*path, key)] = key_node.start_mark.line + 1
            result[key] = _construct(value_node, (*path, key), lines, loader)
            lines[(*path, key)] = key_node.start_mark.line + 1
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_construct(item, (*path, i), lines, loader) for i, item in enumerate(node.value)]
    return loader.construct_object(node)


def load_yaml(path: Path | str) -> Source:
    name = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ScenarioError(name, None, "", f"cannot read: {exc.strerror}") from exc
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise ScenarioError(name, line, "", f"not valid YAML: {exc.problem}") from exc
    finally:
        loader.dispose()
    if root is None:
        raise ScenarioError(name, None, "", "the file is empty")
    lines: dict[FieldPath, int] = {}
    try:
        data = _construct(root, (), lines, yaml.SafeLoader(""))
    except ScenarioError as exc:
        raise ScenarioError(name, exc.line, exc.field, exc.message) from exc
    return Source(name, data, lines)
