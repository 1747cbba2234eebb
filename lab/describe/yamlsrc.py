"""YAML loading that remembers the line of every value, so errors can point at it.

Only plain YAML is read: strings, numbers, booleans, null, lists and mappings. Anything else a YAML library
might build (tags such as `!!python/object`, `!!set`, merge keys `<<`) is refused with the line, as are
files that are no UTF-8 text, duplicate keys, and documents nested or expanded (through aliases) past the
bounds below, which no scenario comes near.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from lab.describe.errors import ScenarioError
from lab.describe.readfile import ReadError, read_text

FieldPath = tuple[str | int, ...]

MAX_DEPTH = 64  # Kubernetes objects nest about 20 deep (managedFields' fieldsV1 the deepest)
MAX_VALUES = 100_000  # every value counted as often as aliases repeat it: an alias bomb stops here

_CORE = "tag:yaml.org,2002:"
_STR, _MAP, _SEQ, _MERGE, _TIMESTAMP = (_CORE + t for t in ("str", "map", "seq", "merge", "timestamp"))
_SCALARS = {_STR, _TIMESTAMP} | {_CORE + t for t in ("int", "float", "bool", "null")}


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


@dataclass(frozen=True)
class Expected:
    """The kind of file a reader expects, judged on the keys at its top before anything of it is quoted: until a
    file is recognised, its errors give lines, never its text (a path given to lab, running as root, may name any
    file of the machine). `what` names the kind in words; `misfit` says why a mapping with these top-level keys
    (each with its line) is not one, "" when it is."""

    what: str
    misfit: Callable[[dict[str, int]], str]


def _tag_name(tag: str) -> str:
    return "!!" + tag.removeprefix(_CORE) if tag.startswith(_CORE) else tag


class _Bounded(yaml.composer.Composer):
    """PyYAML's node tree, bounded: composing recurses per nesting level, and an alias inside the value
    it names would make the tree a cycle."""

    def _bound(self, file: str, max_values: int) -> None:
        self.file = file
        self.max_values = max_values
        self.open_anchors: list[str | None] = []  # one entry per node being composed, outermost first
        self.composed = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.open_anchors:
                raise ScenarioError(
                    self.file, line, "", f"alias *{event.anchor} is inside the value it names (a recursive alias)"
                )
            return super().compose_node(parent, index)
        if len(self.open_anchors) >= MAX_DEPTH:
            raise ScenarioError(self.file, line, "", f"nested deeper than {MAX_DEPTH} levels")
        self.composed += 1
        if self.composed > self.max_values:
            raise ScenarioError(self.file, line, "", f"more than {self.max_values} values")
        self.open_anchors.append(event.anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self.open_anchors.pop()


class _Composer(_Bounded, yaml.SafeLoader):
    def __init__(self, text: str, file: str, max_values: int = MAX_VALUES) -> None:
        yaml.SafeLoader.__init__(self, text)
        self._bound(file, max_values)


try:
    from yaml.cyaml import CParser
except ImportError:  # PyYAML built without libyaml: the Python parser does the same, slower
    _FAST: type[_Bounded] = _Composer
else:

    class _FastComposer(_Bounded, CParser, SafeConstructor, Resolver):
        """The same, with libyaml's scanner and parser (C): six times faster on a cluster's dump of megabytes
        (lab import); its syntax errors are libyaml's words."""

        def __init__(self, text: str, file: str, max_values: int = MAX_VALUES) -> None:
            CParser.__init__(self, text)
            yaml.composer.Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._bound(file, max_values)

    _FAST = _FastComposer


class _Builder:
    """Python values from the node tree, each value's line noted; aliases are expanded, so counted again."""

    def __init__(self, file: str, max_values: int = MAX_VALUES) -> None:
        self.file = file
        self.max_values = max_values
        self.lines: dict[FieldPath, int] = {}
        self.built = 0
        self.scalars = yaml.SafeLoader("")  # resolves and constructs single scalars

    def error(self, node: yaml.Node, path: FieldPath, message: str) -> ScenarioError:
        return ScenarioError(self.file, node.start_mark.line + 1, format_path(path), message)

    def too_large(self, path: FieldPath, message: str) -> ScenarioError:
        # Named by the top-level field: an aliased node's own line is where its anchor was, not where it grew.
        return ScenarioError(self.file, self.lines[path[:1]], format_path(path[:1]), message)

    def build(self, node: yaml.Node, path: FieldPath) -> Any:
        self.lines[path] = node.start_mark.line + 1
        if len(path) > MAX_DEPTH:
            raise self.too_large(path, f"nested deeper than {MAX_DEPTH} levels once aliases are expanded")
        self.built += 1
        if self.built > self.max_values:
            raise self.too_large(path, f"expands to more than {self.max_values} values (aliases repeat what they name)")
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            self.check_tag(node, path, {_SEQ})
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        return self.scalar(node, path)

    def check_tag(self, node: yaml.Node, path: FieldPath, allowed: set[str]) -> None:
        if node.tag == _MERGE:
            raise self.error(node, path, "merge keys (<<) are not supported: write the fields out")
        if node.tag not in allowed:
            raise self.error(node, path, f"the tag {_tag_name(node.tag)} is not supported: write plain YAML values")

    def mapping(self, node: yaml.MappingNode, path: FieldPath) -> dict[str, Any]:
        self.check_tag(node, path, {_MAP})
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.error(key_node, path, "a key must be a plain value, not a list or a mapping")
            key = self.scalar(key_node, path)
            if not isinstance(key, str | int | float | bool):
                raise self.error(key_node, path, f"a key must be a name, not {key!r}")
            key = str(key)
            key_path = (*path, key)
            if key in result:
                first = self.lines[key_path]
                raise self.error(key_node, key_path, f"duplicate key {key!r} (first at line {first})")
            result[key] = self.build(value_node, key_path)
            self.lines[key_path] = key_node.start_mark.line + 1
        return result

    def scalar(self, node: yaml.ScalarNode, path: FieldPath) -> Any:
        self.check_tag(node, path, _SCALARS)
        # An explicit tag must agree with the text: `!!int "abc"` or `!!null "x"` would otherwise fail late
        # or quietly become something else.
        if node.tag != _STR and self.scalars.resolve(yaml.ScalarNode, node.value, (True, False)) != node.tag:
            raise self.error(node, path, f"{node.value!r} is not a valid {_tag_name(node.tag)}")
        if node.tag == _TIMESTAMP:
            return node.value  # as written: no field reads a date, and YAML 1.1 dates such as 2024-13-01 fail
        try:
            return self.scalars.construct_object(node)
        except ValueError as exc:  # e.g. an integer with more digits than Python converts
            raise self.error(node, path, f"cannot read {node.value[:40]!r}: {exc}") from None


def _read(name: str, path: Path | str, limit: int | None = None) -> str:
    try:
        return read_text(path, limit)
    except ReadError as exc:
        hint = "; is it a YAML file?" if exc.line else ""
        raise ScenarioError(name, exc.line, "", f"{exc.reason}{hint}") from None


# PyYAML's syntax errors quote what they found ("found character '\\t' that cannot start any token", "found undefined
# alias 'x'"); a file that is not even YAML is no scenario or dump, so only the grammar's own quoted words stay:
# token names ('<block end>') and YAML's indicator characters (expected ',' or ']').
_QUOTED = re.compile(r"""\s*('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
_GRAMMAR = re.compile(r"'<[a-z ]+>'|'[][{},:?!&*#|>%@`-]'")


def _grammar_only(text: str) -> str:
    kept = _QUOTED.sub(lambda m: m.group() if _GRAMMAR.fullmatch(m.group(1)) else "", text)
    return re.sub(r"\b(but (?:found|got))(?=$|[;,])", r"\1 something else", kept)


def _refused_character(character: int) -> str:
    """What sort of character YAML refuses (not which: the file is no YAML)."""
    if character == 0:
        return "a NUL byte (a binary file?)"
    return "a control character" if unicodedata.category(chr(character)) == "Cc" else "a character of this kind"


def _compose(name: str, text: str, max_values: int, fast: bool = False) -> yaml.Node | None:
    loader = None
    try:
        loader = (_FastComposer if fast and CParser is not None else _Composer)(
            text, name, max_values
        )  # checks every character first
        return loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        # "while parsing a flow sequence, expected ..."
        what = ", ".join(_grammar_only(part) for part in (exc.context, exc.problem) if part)
        column = f" (column {mark.column + 1})" if mark else ""
        raise ScenarioError(name, mark.line + 1 if mark else None, "", f"not valid YAML: {what}{column}") from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - text.rfind("\n", 0, exc.position)
        what = _refused_character(exc.character)
        raise ScenarioError(name, line, "", f"not valid YAML: {what} cannot appear in YAML (column {column})") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml(
    path: Path | str,
    limit: int | None = None,
    max_values: int = MAX_VALUES,
    fast: bool = False,
    expected: Expected | None = None,
) -> Source:
    """A file's YAML; `limit` (bytes) and `max_values` raise the bounds for inputs larger than scenarios, `fast`
    parses with libyaml, `expected` is the kind of file it must be before any error quotes it."""
    return parse_yaml(str(path), _read(str(path), path, limit), max_values, fast, expected)


def parse_yaml(
    name: str, text: str, max_values: int = MAX_VALUES, fast: bool = False, expected: Expected | None = None
) -> Source:
    """YAML text read elsewhere (standard input, a document embedded in a field), under the name errors give."""
    root = _compose(name, text, max_values, fast)
    if root is None:
        raise ScenarioError(name, None, "", "the file is empty")
    if expected is not None:
        _recognise(name, root, expected)
    builder = _Builder(name, max_values)
    data = builder.build(root, ())
    return Source(name, data, builder.lines)


def _recognise(name: str, root: yaml.Node, expected: Expected) -> None:
    """Refuse, naming lines only, a document that is not the kind expected."""
    if isinstance(root, yaml.MappingNode):
        keys = {k.value: k.start_mark.line + 1 for k, _ in root.value if isinstance(k, yaml.ScalarNode)}
        why = expected.misfit(keys)
    else:
        why = f"it holds {'a list' if isinstance(root, yaml.SequenceNode) else 'a single value'}, not a mapping"
    if why:
        raise ScenarioError(
            name,
            root.start_mark.line + 1,
            "",
            f"not {expected.what}: {why}; lab quotes nothing of a file it does not recognise",
        )
