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


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """'; did you mean X?' with the known name closest to a misspelt one, or '' when none is close."""
    names = list(known)
    close = [k for k in names if k.lower() == name.lower()] or difflib.get_close_matches(name, names, n=1)
    return f"; did you mean {close[0]}?" if close else ""
