"""The `lab` command's first moments: lab's modules take a second or so to import on a loaded machine, and
Ctrl-C meanwhile ended it with a traceback from whichever import it interrupted. Nothing is built before
cli.main runs, so an interrupt then ends the command at once, with one line and the shell's code for Ctrl-C.

Only `os` and `_signal` are imported before the handler is in place: both are loaded with the interpreter, so
the import cannot be interrupted itself (`signal` would import enum first). What the interpreter does before
it runs this module (its own startup, the `site` module) is Python's, not lab's."""

import _signal
import os
from types import FrameType

INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command Ctrl-C stopped


def _interrupted(signum: int, frame: FrameType | None) -> None:
    os.write(2, b"interrupted\n")
    os._exit(INTERRUPTED)  # mid-import: no state to unwind, and nothing half-imported may run on


def main() -> None:
    _signal.signal(_signal.SIGINT, _interrupted)
    from lab.cli import main as cli_main  # the imports Ctrl-C may cut short

    # From here Ctrl-C is a KeyboardInterrupt again: cli.main takes down what a run built, then exits 130.
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    cli_main()
