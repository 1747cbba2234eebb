"""console: read what the guest prints on its serial console.

The guest's /init brackets the command with marker lines that carry a token chosen per run, so output that
merely quotes a marker (a failing test's diff, say) cannot end the command early:

    @@LAB-VM-START <token>          the command starts now
    ...the command's output...
    @@LAB-VM-EXIT <token> <status>  the command ended with this exit status
    @@LAB-VM-FAIL <message>         /init could not set the guest up (no command ran)

A kernel panic can come at any time: it is recognised by the kernel's own words.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

START, EXIT, FAIL = "@@LAB-VM-START", "@@LAB-VM-EXIT", "@@LAB-VM-FAIL"
_PANIC = re.compile(r"^(?:\[\s*\d+\.\d+\]\s*)?(Kernel panic - not syncing:?.*)$")
# Escape sequences SeaBIOS and terminals put on the serial line, which are no part of any output.
_ESCAPES = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]|[()][0-9A-Za-z]|[=>c])")


class Phase(Enum):
    BOOT = "boot"
    COMMAND = "command"
    DONE = "done"


def clean_line(raw: bytes) -> str:
    """One console line as text: the serial line's \\r and terminal escapes removed."""
    return _ESCAPES.sub("", raw.decode("utf-8", errors="replace").rstrip("\r\n")).rstrip("\r")


@dataclass
class Console:
    """Feeds on console lines; tells the phase, the command's output, its exit status, a panic or a failure."""

    token: str
    phase: Phase = Phase.BOOT
    output: list[str] = field(default_factory=list)
    exit_status: int | None = None
    panic: str | None = None
    failure: str | None = None
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=40))  # the last lines, whatever the phase

    def feed(self, line: str) -> str | None:
        """Take one line; return the part of it that is the command's own output, else None."""
        self.tail.append(line)
        if match := _PANIC.match(line.strip()):
            self.panic = self.panic or match.group(1).strip()
            return None
        if self.phase is Phase.BOOT:
            self._boot_line(line.strip())
            return None
        if self.phase is Phase.COMMAND:
            return self._command_line(line)
        return None

    def _boot_line(self, line: str) -> None:
        # Firmware text without a newline ("Booting from ROM..") may precede the marker on its line.
        if re.search(rf"{START} {re.escape(self.token)}\s*$", line):
            self.phase = Phase.COMMAND
        elif line.startswith(FAIL):
            self.failure = line[len(FAIL) :].strip()

    def _command_line(self, line: str) -> str | None:
        # The command's last line may lack its newline: the marker then follows on the same line.
        if match := re.search(rf"{EXIT} {re.escape(self.token)} (-?\d+)\s*$", line):
            self.exit_status = int(match.group(1))
            self.phase = Phase.DONE
            line = line[: match.start()]
            if not line:
                return None
        self.output.append(line)
        return line

    def last_lines(self, count: int = 20) -> str:
        return "\n".join(list(self.tail)[-count:])
