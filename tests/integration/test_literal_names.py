"""A scenario whose probe names and why hold rich markup, an OSC-8 link and raw ESC: `lab run` on the kernel runs
every probe and prints each name as written, control characters escaped, no markup rendered or refused."""

from __future__ import annotations

import subprocess
import sys

from support.host import REPO

SCENARIO = REPO / "tests" / "integration" / "topologies" / "markup-names.yaml"


def test_markup_and_escapes_in_names_are_printed_as_text(host_unchanged):
    done = subprocess.run(
        [sys.executable, "-m", "lab", "run", "-v", str(SCENARIO)], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert done.returncode == 0, done.stderr  # -v: every probe's evidence, with its why
    out = done.stdout
    assert "MarkupError" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "closes-[/]" in out and "2 passed, 0 failed" in out
    assert "[bold red]styled[/]\\x1b[31m-red" in out
    assert "[link=https://example.com]x[/link] \\x1b]8;;https://example.com\\x1b\\link\\x1b]8;;\\x1b\\" in out
    assert "\\x0d\\u202eend" in out
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out
