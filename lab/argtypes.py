"""Command-line value types: a bad flag is refused by argparse, naming the flag, before anything is built."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def seconds(limit: float) -> Callable[[str], float]:
    """A duration in seconds: a finite number above 0 and at most `limit` (0, nan and inf would hang or never wait)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and 0 < value <= limit):
            raise argparse.ArgumentTypeError(f"expected seconds, a number above 0 and at most {limit:g}, got {text!r}")
        return value

    return parse


def count(limit: int) -> Callable[[str], int]:
    """A whole number from 1 to `limit`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if not 1 <= value <= limit:
            raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {limit}, got {text!r}")
        return value

    return parse
