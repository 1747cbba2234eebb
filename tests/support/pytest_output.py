"""What a pytest run printed, cut down to what a reader of a failure needs."""

from __future__ import annotations

import re

_SECTION = re.compile(r"^=+ short test summary info =+$")


def failure_summary(output: str, fallback: int = 30) -> str:
    """The short test summary (each failing item with its assertion message) and the final count; without one
    (pytest itself failed), the last `fallback` lines."""
    lines = output.rstrip().splitlines()
    start = next((i for i, line in enumerate(lines) if _SECTION.match(line)), None)
    return "\n".join(lines[start:] if start is not None else lines[-fallback:])
