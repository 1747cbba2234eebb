"""YAML loading that remembers the line of every value, so errors can point at it.

Only plain YAML is read: strings, numbers, booleans, null, lists and mappings. Anything else a YAML library
might build (tags such as `!!python/object`, `!!set`, merge keys `<<`) is refused with the line, as are
files that are no UTF-8 text, duplicate keys, and documents nested or expanded (through aliases) past the
bounds below, which no scenario comes near. Values are built straight from libyaml's parser's events, in time
and memory linear in the file; a file is one document, or several where the reader takes several (load_documents:
kubectl's outputs concatenated).
"""

from __future__ import annotations

import copy
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

try:
    from yaml.cyaml import CParser
except ImportError:  # PyYAML built without libyaml: its Python parser does the same, slower
    CParser = None

FieldPath = tuple[str | int, ...]

MAX_DEPTH = 64  # Kubernetes objects nest about 20 deep (managedFields' fieldsV1 the deepest)
MAX_VALUES = 100_000  # every value counted as often as aliases repeat it: an alias bomb stops here
# The values aliases may repeat in one file, whatever its bound on values: each is a copy, and no kubectl output
# has an alias at all (a dump's bound of millions would let a bomb of a few lines take a minute and GBs).
MAX_REPEATED = 100_000

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


@dataclass
class _Open:
    """A list or mapping being built: where it is, the key whose value comes next (a mapping's), and, when it has
    an anchor, its name, the values built before it began, and the lines of everything in it so far."""

    value: list[Any] | dict[str, Any]
    path: FieldPath
    line: int
    key: str | None = None
    anchor: str | None = None
    before: int = 0
    record: list[tuple[FieldPath, int]] | None = None


@dataclass(frozen=True)
class _Anchor:
    """What an alias repeats: the value, how many values it counts for, how deep it nests, and its lines."""

    value: Any
    size: int
    depth: int
    lines: tuple[tuple[FieldPath, int], ...]


def _line(event: yaml.Event) -> int:
    return event.start_mark.line + 1


class _Builder:
    """Python values straight from the parser's events, each value's line noted. No node tree is made: at a dump
    of 60 MB PyYAML's tree, two marks per node, was most of the time and memory of `lab import`. The bounds are
    counted as values are made, an alias counting every value it repeats before any is copied, so an alias bomb
    stops at the bound, not after it is built."""

    def __init__(self, file: str, max_values: int) -> None:
        self.file = file
        self.max_values = max_values
        self.lines: dict[FieldPath, int] = {}
        self.built = 0
        self.repeated = 0
        self.anchors: dict[str, _Anchor] = {}
        self.open: list[_Open] = []  # outermost first
        self.recording: list[_Open] = []  # the open ones with an anchor
        self.resolver = Resolver()
        self.constructor = SafeConstructor()
        self.resolved: dict[str, str] = {}  # plain scalar text -> its tag: a dump repeats the same words

    def document(self, parser: Any) -> Any:
        """The values of the document whose start event was just read, up to and with its end event."""
        self.anchors.clear()
        root: list[Any] = []
        handle = {
            yaml.ScalarEvent: self.scalar_event,
            yaml.SequenceStartEvent: self.start,
            yaml.MappingStartEvent: self.start,
            yaml.SequenceEndEvent: self.end,
            yaml.MappingEndEvent: self.end,
            yaml.AliasEvent: self.alias,
        }
        while (kind := type(event := parser.get_event())) is not yaml.DocumentEndEvent:
            handle[kind](event, root)
        return root[0]

    def error(self, event: yaml.Event, path: FieldPath, message: str) -> ScenarioError:
        return ScenarioError(self.file, _line(event), format_path(path), message)

    def too_large(self, path: FieldPath, message: str) -> ScenarioError:
        # Named by the top-level field: an aliased value's own line is where its anchor was, not where it grew.
        return ScenarioError(self.file, self.lines.get(path[:1]), format_path(path[:1]), message)

    def slot(self) -> tuple[FieldPath, bool]:
        """Where the next value goes, and whether it is a mapping's key."""
        if not self.open:
            return (), False
        top = self.open[-1]
        if isinstance(top.value, list):
            return (*top.path, len(top.value)), False
        if top.key is None:
            return top.path, True
        return (*top.path, top.key), False

    def note(self, path: FieldPath, line: int) -> None:
        self.lines[path] = line
        for held in self.recording if self.recording else ():
            held.record.append((path[len(held.path) :], line))  # type: ignore[union-attr]

    def begin(self, event: yaml.Event, path: FieldPath) -> None:
        """Count a value starting at `path`; a list item's or the document's line is its own (a mapping value's
        is its key's)."""
        if len(path) >= MAX_DEPTH:
            raise ScenarioError(self.file, _line(event), "", f"nested deeper than {MAX_DEPTH} levels")
        self.built += 1
        if self.built > self.max_values:
            raise ScenarioError(self.file, _line(event), "", f"more than {self.max_values} values")
        if not path or isinstance(path[-1], int):
            self.note(path, _line(event))

    def place(self, value: Any, root: list[Any]) -> None:
        if not self.open:
            root.append(value)
            return
        top = self.open[-1]
        if isinstance(top.value, list):
            top.value.append(value)
        else:
            assert top.key is not None
            top.value[top.key] = value
            top.key = None

    def keep(self, anchor: str, line: int, value: Any, size: int, record: list[tuple[FieldPath, int]]) -> None:
        if anchor in self.anchors:
            raise ScenarioError(self.file, line, "", "not valid YAML: found duplicate anchor")
        depth = max(len(path) for path, _ in record)
        self.anchors[anchor] = _Anchor(value, size, depth, tuple(record))

    def scalar_event(self, event: yaml.ScalarEvent, root: list[Any]) -> None:
        path, is_key = self.slot()
        value = self.scalar(event, path)
        if is_key:
            self.key(event, path, value)
        else:
            self.begin(event, path)
            self.place(value, root)
        if event.anchor is not None:
            self.keep(event.anchor, _line(event), value, 1, [((), _line(event))])

    def key(self, event: yaml.Event, path: FieldPath, key: Any) -> None:
        if not isinstance(key, str | int | float | bool):
            raise self.error(event, path, f"a key must be a name, not {key!r}")
        top = self.open[-1]
        name = str(key)
        key_path = (*path, name)
        if name in top.value:
            first = self.lines[key_path]
            raise self.error(event, key_path, f"duplicate key {name!r} (first at line {first})")
        top.key = name
        self.note(key_path, _line(event))

    def start(self, event: yaml.SequenceStartEvent | yaml.MappingStartEvent, root: list[Any]) -> None:
        path, is_key = self.slot()
        if is_key:
            raise self.error(event, path, "a key must be a plain value, not a list or a mapping")
        mapping = isinstance(event, yaml.MappingStartEvent)
        if event.tag not in (None, "!"):
            self.check_tag(event, event.tag, path, {_MAP if mapping else _SEQ})
        before = self.built
        self.begin(event, path)
        held = _Open({} if mapping else [], path, _line(event), anchor=event.anchor, before=before)
        if event.anchor is not None:
            held.record = [((), _line(event))]
            self.recording.append(held)
        self.open.append(held)

    def end(self, event: yaml.Event, root: list[Any]) -> None:
        held = self.open.pop()
        if held.anchor is not None:
            self.recording.remove(held)
            self.keep(held.anchor, held.line, held.value, self.built - held.before, held.record or [])
        self.place(held.value, root)

    def alias(self, event: yaml.AliasEvent, root: list[Any]) -> None:
        path, is_key = self.slot()
        if any(held.anchor == event.anchor for held in self.open):
            raise ScenarioError(
                self.file, _line(event), "", f"alias *{event.anchor} is inside the value it names (a recursive alias)"
            )
        anchor = self.anchors.get(event.anchor)
        if anchor is None:
            column = event.start_mark.column + 1
            raise ScenarioError(self.file, _line(event), "", f"not valid YAML: found undefined alias (column {column})")
        if is_key:
            if isinstance(anchor.value, list | dict):
                raise self.error(event, path, "a key must be a plain value, not a list or a mapping")
            self.key(event, path, anchor.value)
            return
        if len(path) + anchor.depth > MAX_DEPTH:
            raise self.too_large(path, f"nested deeper than {MAX_DEPTH} levels once aliases are expanded")
        if self.built + anchor.size > self.max_values:
            raise self.too_large(path, f"expands to more than {self.max_values} values (aliases repeat what they name)")
        self.repeated += anchor.size
        if self.repeated > MAX_REPEATED:
            raise self.too_large(path, f"aliases repeat more than {MAX_REPEATED} values: write the values out")
        self.built += anchor.size
        own = not path or isinstance(path[-1], int)  # a mapping value's line is its key's
        for inner, line in anchor.lines:
            if inner or own:
                self.note((*path, *inner), line)
        self.place(copy.deepcopy(anchor.value), root)

    def check_tag(self, event: yaml.Event, tag: str, path: FieldPath, allowed: set[str]) -> None:
        if tag == _MERGE:
            raise self.error(event, path, "merge keys (<<) are not supported: write the fields out")
        if tag not in allowed:
            raise self.error(event, path, f"the tag {_tag_name(tag)} is not supported: write plain YAML values")

    def scalar(self, event: yaml.ScalarEvent, path: FieldPath) -> Any:
        text = event.value
        if event.tag not in (None, "!"):
            tag = event.tag
            self.check_tag(event, tag, path, _SCALARS)
            # An explicit tag must agree with the text: `!!int "abc"` or `!!null "x"` would otherwise fail late
            # or quietly become something else.
            if tag != _STR and self.resolve(text) != tag:
                raise self.error(event, path, f"{text!r} is not a valid {_tag_name(tag)}")
        else:
            tag = self.resolve(text) if event.implicit[0] else _STR
            self.check_tag(event, tag, path, _SCALARS)
        if tag in (_STR, _TIMESTAMP):
            return text  # a timestamp as written: no field reads a date, and YAML 1.1 dates such as 2024-13-01 fail
        try:
            return self.constructor.yaml_constructors[tag](self.constructor, yaml.ScalarNode(tag, text))
        except ValueError as exc:  # e.g. an integer with more digits than Python converts
            raise self.error(event, path, f"cannot read {text[:40]!r}: {exc}") from None

    def resolve(self, text: str) -> str:
        """The tag of a plain scalar, as YAML 1.1's implicit rules give it."""
        tag = self.resolved.get(text)
        if tag is None:
            if len(self.resolved) > 10_000:
                self.resolved.clear()
            tag = self.resolved[text] = self.resolver.resolve(yaml.ScalarNode, text, (True, False))
        return tag


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


def _parser(text: str) -> Any:
    """libyaml's parser (C) where PyYAML has it, five times faster than PyYAML's own, which does the same."""
    return CParser(text) if CParser is not None else yaml.SafeLoader(text)


def _syntax_error(name: str, text: str, exc: yaml.YAMLError) -> ScenarioError:
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - text.rfind("\n", 0, exc.position)
        what = _refused_character(exc.character)
        return ScenarioError(name, line, "", f"not valid YAML: {what} cannot appear in YAML (column {column})")
    assert isinstance(exc, yaml.MarkedYAMLError)
    mark = exc.problem_mark or exc.context_mark
    # "while parsing a flow sequence, expected ..."
    what = ", ".join(_grammar_only(part) for part in (exc.context, exc.problem) if part)
    column = f" (column {mark.column + 1})" if mark else ""
    return ScenarioError(name, mark.line + 1 if mark else None, "", f"not valid YAML: {what}{column}")


def _in_python_words(name: str, text: str, error: ScenarioError) -> ScenarioError:
    """A syntax error libyaml found, said in the words of PyYAML's parser where that parser finds one too (the
    words lab said before it read with libyaml)."""
    try:
        parser = yaml.SafeLoader(text)  # which checks every character first
        while not isinstance(parser.get_event(), yaml.StreamEndEvent):
            pass
    except yaml.YAMLError as exc:
        return _syntax_error(name, text, exc)
    return error


@dataclass(frozen=True)
class _Document:
    data: Any
    lines: dict[FieldPath, int]
    line: int  # where it starts


def _documents(name: str, text: str, max_values: int, one: str | None) -> list[_Document]:
    """Each YAML document of the text; a second one is refused when the text is `one` document (of the kind
    it names). The bound on values is the whole text's."""
    parser = _parser(text)
    builder = _Builder(name, max_values)
    documents = []
    try:
        parser.get_event()  # the stream's start
        while isinstance(start := parser.get_event(), yaml.DocumentStartEvent):
            if documents and one is not None:
                raise ScenarioError(
                    name, _line(start), "", f"a second YAML document starts here (---): {one} is one document"
                )
            builder.lines = {}
            data = builder.document(parser)
            if data is not None or one is not None:  # of several, an empty one (--- at the end) is nothing
                documents.append(_Document(data, builder.lines, _line(start)))
    except yaml.YAMLError as exc:
        raise _syntax_error(name, text, exc) from None
    finally:
        parser.dispose()
    if not documents:
        raise ScenarioError(name, None, "", "the file is empty")
    return documents


def _top_keys(text: str) -> list[tuple[int, str, dict[str, int]]]:
    """Per document: its line, what its top is (a mapping, a list, a single value), and its top-level keys with
    their lines: what a file is recognised by, read without building anything."""
    parser = _parser(text)
    found: list[tuple[int, str, dict[str, int]]] = []
    depth, is_key = 0, False
    try:
        while not isinstance(event := parser.get_event(), yaml.StreamEndEvent):
            if isinstance(event, yaml.DocumentStartEvent):
                found.append((_line(event), "", {}))
                continue
            if depth == 0 and isinstance(event, yaml.ScalarEvent) and event.value == "" and event.implicit[0]:
                found.pop()  # an empty document (--- at the end), which a file of several may hold
            elif depth == 0 and isinstance(event, yaml.NodeEvent):
                top = "mapping" if isinstance(event, yaml.MappingStartEvent) else "list"
                scalar = isinstance(event, yaml.ScalarEvent | yaml.AliasEvent)
                found[-1] = (_line(event), "a single value" if scalar else top, {})
            elif depth == 1 and found[-1][1] == "mapping" and isinstance(event, yaml.NodeEvent):
                is_key = not is_key
                if is_key and isinstance(event, yaml.ScalarEvent):
                    found[-1][2].setdefault(event.value, _line(event))
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    finally:
        parser.dispose()
    return found


def _recognise(name: str, line: int, top: str, keys: dict[str, int], expected: Expected) -> None:
    """Refuse, naming lines only, a document that is not the kind expected."""
    why = expected.misfit(keys) if top == "mapping" else f"it holds {top}, not a mapping"
    if why:
        raise ScenarioError(
            name, line, "", f"not {expected.what}: {why}; lab quotes nothing of a file it does not recognise"
        )


def _top(data: Any) -> str:
    return "mapping" if isinstance(data, dict) else "a list" if isinstance(data, list) else "a single value"


def load_yaml(
    path: Path | str,
    limit: int | None = None,
    max_values: int = MAX_VALUES,
    fast: bool = False,
    expected: Expected | None = None,
) -> Source:
    """A file's YAML; `limit` (bytes) and `max_values` raise the bounds for inputs larger than scenarios, `fast`
    says syntax errors in libyaml's words (not re-read by PyYAML's slower parser), `expected` is the kind of
    file it must be before any error quotes it."""
    return parse_yaml(str(path), _read(str(path), path, limit), max_values, fast, expected)


def load_documents(
    path: Path | str, limit: int | None, max_values: int, expected: Expected | None = None
) -> list[Source]:
    """Each document of a file of several (`---` between them, as kubectl's outputs concatenated give), with
    the lines of the whole file; syntax errors in libyaml's words."""
    return parse_documents(str(path), _read(str(path), path, limit), max_values, expected)


def parse_yaml(
    name: str, text: str, max_values: int = MAX_VALUES, fast: bool = False, expected: Expected | None = None
) -> Source:
    """YAML text of one document read elsewhere (standard input, a document embedded in a field), under the
    name errors give."""
    (document,) = _checked(name, text, max_values, fast, expected, several=False)
    return Source(name, document.data, document.lines)


def parse_documents(name: str, text: str, max_values: int, expected: Expected | None = None) -> list[Source]:
    """`load_documents` of text read elsewhere (standard input)."""
    return [Source(name, d.data, d.lines) for d in _checked(name, text, max_values, True, expected, several=True)]


def _checked(
    name: str, text: str, max_values: int, fast: bool, expected: Expected | None, several: bool
) -> list[_Document]:
    """The documents, each recognised as `expected` before an error quotes anything of it: an error found while
    building is said only once the file's top-level keys show it is the kind expected. A syntax error is said in
    PyYAML's parser's words unless `fast` (libyaml's, at a dump of megabytes)."""
    one = None if several else expected.what if expected else "this file"
    try:
        try:
            documents = _documents(name, text, max_values, one)
        except ScenarioError:
            if expected is not None:
                for line, top, keys in _top_keys(text):
                    _recognise(name, line, top, keys, expected)
            raise
    except yaml.YAMLError as exc:  # the syntax error _top_keys met past a build's error
        raise _syntax_error(name, text, exc) from None
    except ScenarioError as exc:
        if exc.message.startswith("not valid YAML") and not fast:
            raise _in_python_words(name, text, exc) from None
        raise
    if expected is not None:
        for d in documents:
            keys = {str(path[0]): line for path, line in d.lines.items() if len(path) == 1}
            _recognise(name, d.lines.get((), d.line), _top(d.data), keys, expected)
    return documents
