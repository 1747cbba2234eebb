"""Command-line value types: a bad flag is refused by argparse, naming the flag, before anything is built."""

from __future__ import annotations

import argparse
import difflib
import math
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, TypeVar

T = TypeVar("T")


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


def refusing(parse: Callable[[str], T]) -> Callable[[str], T]:
    """A flag's value read by `parse`, its ValueError said by argparse as the flag's refusal."""

    def read(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return read


class Parser(argparse.ArgumentParser):
    """lab's parser, every subcommand's too (add_subparsers makes them of the parser's class): a misspelt
    subcommand, choice or option is refused with the closest known one ("did you mean"), which Python 3.11's
    argparse does not say (its suggest_on_error came in 3.14)."""

    _given: tuple[str, ...] = ()  # what this parser was last given to parse

    def _check_value(self, action: argparse.Action, value: object) -> None:
        # argparse's own check, for a subcommand and a flag's choices alike; a near miss named after its refusal.
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            known = [str(choice) for choice in action.choices or ()]
            raise argparse.ArgumentError(action, exc.message + _did_you_mean(str(value), known)) from None

    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """As argparse parses; a misspelt option is refused here, by the (sub)command that was given it, so that
        the suggestion is among that command's options (the top parser would only say "unrecognized")."""
        self._given = tuple(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        if misspelt := self._misspelt(extras):
            self.error(f"unrecognized arguments: {' '.join(extras)}; did you mean {misspelt[1]}?")
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        # A required option missing may be one misspelt ("--nod node1"): argparse says the first, not the second.
        if message.startswith("the following arguments are required") and (misspelt := self._misspelt(self._given)):
            message += f" ({misspelt[0]} is no option of {self.prog}: did you mean {misspelt[1]}?)"
        super().error(message)

    def _misspelt(self, args: Sequence[str]) -> tuple[str, str] | None:
        """The first of `args` (before any `--`) that is no option of this parser but close to one, and that one.
        An abbreviation argparse takes (--verb for --verbose) is no misspelling."""
        options = [option for action in self._actions for option in action.option_strings]
        for arg in args[: args.index("--")] if "--" in args else args:
            word = arg.split("=", 1)[0]
            if not word.startswith("-") or any(o == word or (word[:2] == "--" and o.startswith(word)) for o in options):
                continue
            if close := difflib.get_close_matches(word, options, n=1):
                return word, close[0]
        return None


def _did_you_mean(word: str, known: list[str]) -> str:
    """ "; did you mean X?" for the known word closest to `word` (difflib's ratio of at least 0.6), else ""."""
    close = difflib.get_close_matches(word, known, n=1)
    return f"; did you mean {close[0]}?" if close else ""
