"""The API's arguments, checked where a caller hands them over and before anything is built or run: a wrong type
or value is a LabError naming the argument, what was given and what was expected. One check (`checked`) over
the kinds of argument below; a misspelt keyword stays Python's own TypeError, as for any function.

A scenario given by name alone is the catalogue's (`lab.up("hairpin")`): the scenarios shipped with lab, found
from any directory."""

from __future__ import annotations

import numbers
import os
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from lab.describe.topology import ProbeSpec, Topology
from lab.install.steps import StepDone
from lab.judge.results import ProbeResult
from lab.selection import CATALOGUE, default_scenarios

PROBE_SECONDS = 60  # a probe's wait for an answer: at most what `lab run --timeout` takes
EXEC_SECONDS = 86_400  # a command run in an actor: at most a day (None: no limit)

T = TypeVar("T")


class LabError(Exception):
    """What the API refuses or what failed, in words (the scenario's file and line where there is one)."""


@dataclass(frozen=True)
class Kind:
    """What an argument must be: `expected`, in words (it follows "expected"), and `fits`, the test."""

    expected: str
    fits: Callable[[Any], bool]


def checked(where: str, value: T, kind: Kind) -> T:
    """`value` as given, if it is of `kind`; else a LabError: `where` (the argument), what is expected, what came."""
    if not kind.fits(value):
        raise LabError(f"{where}: expected {kind.expected}, got {given(value)}")
    return value


_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60  # a megabyte given is not said back whole


def given(value: object) -> str:
    """The value as Python writes it, cut short, and its type."""
    try:
        shown = _SHORT.repr(value)
    except Exception:  # noqa: BLE001 - an int of more digits than Python prints, or a caller's __repr__ that fails
        shown = "a value that cannot be shown"
    return f"{shown} ({type(value).__name__})"


def _text(value: object) -> str | None:
    """The text of a str or os.PathLike that the kernel can take as a path or a command's word; None for
    anything else (bytes, a path of bytes, a number) and for text with a NUL, which would end it there."""
    if not isinstance(value, str | os.PathLike):
        return None
    try:
        text = os.fspath(value)
    except TypeError:  # a __fspath__ that gives neither str nor bytes
        return None
    return text if isinstance(text, str) and "\0" not in text else None


def _seconds(limit: float, optional: bool = False) -> Kind:
    """A number of seconds above 0 and at most `limit`. Compared before any conversion: an int too large for a
    float does not overflow, and NaN and the infinities fail the comparison. A bool is an int to Python, never
    meant as seconds."""

    def fits(value: object) -> bool:
        if value is None:
            return optional
        return isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 < value <= limit

    return Kind(f"{'None or ' if optional else ''}seconds, a number above 0 and at most {limit:g}", fits)


def _one_of(*types: type) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, types)


def _or_none(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or test(value)


def _each(test: Callable[[Any], bool], *containers: type) -> Callable[[Any], bool]:
    """One of `containers` whose items (a mapping's keys) each pass `test`. A str is never one: it is a sequence
    of strings, and was meant as one value."""
    return lambda value: isinstance(value, containers) and all(test(item) for item in value)


_STR = _one_of(str)
_FIELDS = _each(_STR, Mapping)  # a scenario file's entry: field names to values
SCENARIO = Kind(
    "a scenario file's path (a non-empty str or os.PathLike without NUL characters) or a catalogue scenario's name",
    lambda value: bool(_text(value)),
)
VARIANT = Kind(
    "None or a mapping of each matrix axis named (a string) to its value, e.g. {'proxyMode': 'nftables'}",
    _or_none(_each(_STR, Mapping)),
)
AXIS_VALUE = Kind("one value (a string, number or boolean)", _one_of(str, int, float))
PROBE_WAIT = _seconds(PROBE_SECONDS)
EXEC_WAIT = _seconds(EXEC_SECONDS, optional=True)
PROBE_ENTRY = Kind(
    "a probe as a mapping of its fields (an entry of a scenario's probes:), or the name of one of the file's probes",
    _or_none(lambda value: isinstance(value, str) or _FIELDS(value)),
)
STEP_ENTRY = Kind(
    "a step as a mapping of its fields (an entry of a probe's before:), e.g. {'scale': 'Deployment/web', "
    "'replicas': 2}",
    _FIELDS,
)
NAME = Kind("a name (a string)", _STR)
ARGV = Kind("the command as a list of words, e.g. ['ip', 'route']", lambda v: isinstance(v, list | tuple) and bool(v))
WORD = Kind("a word (a str or os.PathLike without NUL characters)", lambda value: _text(value) is not None)
INPUT = Kind("None or text (a str: decode bytes first) for the command's standard input", _or_none(_STR))
PROBE_SPEC = Kind("a probe as describe resolved it (one of cluster.topology.probes)", _one_of(ProbeSpec))
STEPS_DONE = Kind(
    "the steps done for the probe (what cluster.steps_of returned)", _each(_one_of(StepDone), list, tuple)
)
RESULT = Kind("a probe's result (what cluster.probe returns)", _one_of(ProbeResult))
TOPOLOGY = Kind("a scenario variant as describe loaded it (a lab.describe.topology.Topology)", _one_of(Topology))
PCAP_DIR = Kind("None or a directory (a pathlib.Path)", _or_none(_one_of(Path)))
ON_RESULT = Kind("None or a function taking each probe's result", _or_none(callable))
ONLY = Kind("None or a set of probe names (strings)", _or_none(_each(_STR, set, frozenset, list, tuple)))


def words(where: str, argv: Any) -> list[str]:
    """A command's argv, each word checked and named by its index when it is not one."""
    for index, word in enumerate(checked(where, argv, ARGV)):
        checked(f"{where}[{index}]", word, WORD)
    return [os.fspath(word) for word in argv]


def scenario_file(file: str | os.PathLike[str]) -> Path:
    """The scenario file `file` names: a path as given (relative to the caller's directory), or, for a name alone
    (no directory, no .yaml/.yml), the catalogue's scenario of that name. A name never reads the caller's
    directory: a scenario runs commands as root, and only files the caller names, or lab's own, are run
    (lab.selection)."""
    checked("file", file, SCENARIO)
    if not isinstance(file, str) or "/" in file or file.endswith((".yaml", ".yml")):
        return Path(file)
    shipped = {path.stem: path for path in default_scenarios()}
    if file not in shipped:
        known = ", ".join(sorted(shipped)) or f"none: {CATALOGUE} holds no scenario file"
        raise LabError(
            f"file: no catalogue scenario is named {file!r} (the catalogue's: {known}); a file of your own is "
            f"given by its path, e.g. './{file}.yaml'"
        )
    return shipped[file]
