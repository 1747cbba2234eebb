"""Errors about scenario files: always name the file, the line and the field."""

from __future__ import annotations


class ScenarioError(Exception):
    def __init__(self, file: str, line: int | None, field: str, message: str) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.message = message
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")
