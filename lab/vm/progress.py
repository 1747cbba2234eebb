"""What `lab vm` is doing while it prepares a kernel: stages, and a download's bytes, on stderr.

On a terminal one line is rewritten in place (bytes, total, rate); elsewhere (a CI log, a pipe) each stage is one
line, and a download says its size and time once when it ends, so that a log stays short and grep finds each
line whole.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

POLL = 0.25  # seconds between looks at a download's size


def megabytes(count: float) -> str:
    return f"{count / 1e6:.0f} MB" if count >= 10e6 else f"{count / 1e6:.1f} MB"


def download_line(what: str, done: int, total: int, seconds: float) -> str:
    """`what: 123 MB of 490 MB (25%), 12.3 MB/s` (without a known total: the bytes and the rate)."""
    rate = f"{done / seconds / 1e6:.1f} MB/s" if seconds > 0 else ""
    share = f" of {megabytes(total)} ({100 * done // total}%)" if total else ""
    return f"{what}: {megabytes(done)}{share}" + (f", {rate}" if rate else "")


class Progress:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self._open = False  # a line being rewritten in place

    def stage(self, text: str) -> None:
        self._end_line()
        self.stream.write(f"lab vm: {text}\n")
        self.stream.flush()

    def update(self, text: str) -> None:
        """A line rewritten in place on a terminal; nothing elsewhere (the stage's end says it)."""
        if self.live:
            self.stream.write(f"\r\033[Klab vm: {text}")
            self.stream.flush()
            self._open = True

    def _end_line(self) -> None:
        if self._open:
            self.stream.write("\n")
            self._open = False


def watch_download(
    argv: list[str], directory: Path, what: str, total: int, progress: Progress
) -> subprocess.CompletedProcess[str]:
    """Run the downloading command `argv` in `directory`, showing the bytes written there as they grow."""
    start = time.monotonic()
    with subprocess.Popen(argv, cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        while proc.poll() is None:
            progress.update(download_line(what, _size(directory), total, time.monotonic() - start))
            time.sleep(POLL)
        out, err = proc.communicate()
    done = _size(directory)
    progress.stage(download_line(what, done, total, time.monotonic() - start) + f" in {time.monotonic() - start:.0f} s")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _size(directory: Path) -> int:
    total = 0
    for entry in os.scandir(directory):
        try:
            if entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
        except FileNotFoundError:
            continue  # renamed meanwhile
    return total
