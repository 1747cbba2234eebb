"""Errors about scenario files: always name the file, the line and the field."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ScenarioError(Exception):
    def __init__(self, file: str, line: int | None, field: str, message: str) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.message = message
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


class ScenarioErrors(ScenarioError):
    """Every error found in one file, in the order of its lines; it reads as the first of them where one error is
    expected (`.file`, `.line`, `.field`, `.message`), and as all of them, one a line, when printed."""

    def __init__(self, errors: list[ScenarioError]) -> None:
        self.errors = sorted(errors, key=lambda e: e.line or 0)
        first = self.errors[0]
        super().__init__(first.file, first.line, first.field, first.message)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)


def raise_all(errors: list[ScenarioError]) -> None:
    """Raise what was found, if anything: one error as itself, several together."""
    unique = list({str(e): e for e in errors}.values())  # variants of a file often find the same error
    if len(unique) == 1:
        raise unique[0]
    if unique:
        raise ScenarioErrors(unique)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """'; did you mean X?' with the known name closest to a misspelt one, or '' when none is close."""
    names = list(known)
    close = [k for k in names if k.lower() == name.lower()] or difflib.get_close_matches(name, names, n=1)
    return f"; did you mean {close[0]}?" if close else ""
