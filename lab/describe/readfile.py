"""Reading a file lab was given (a scenario, a dump to replay, what a cache holds): a regular file of at most a
limit, as UTF-8 text, or an error that says which of these it is not.

Every file is untrusted: `/dev/zero` would grow until MemoryError, a FIFO would block its reader forever, and a
device or directory is no file anyone meant to give. The file is opened without blocking (a FIFO's open waits for
a writer otherwise), checked to be a regular file, and read to one byte past the limit.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_BYTES = 4 * 2**20  # a scenario is a few kB; a node's dump with 10 000 Services, a few MB

_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
}


class ReadError(Exception):
    """Why a file cannot be read as input; `line` (1-based) when one line is to blame."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        self.reason, self.line = reason, line
        super().__init__(f"line {line}: {reason}" if line else reason)


def read_bytes(path: Path | str, limit: int | None = None, dir_fd: int | None = None, follow: bool = True) -> bytes:
    """The bytes of the regular file at `path`, if there are at most `limit` (MAX_BYTES) of them; `dir_fd` and
    `follow=False` (never through a symlink) for lab's own state, in a directory opened once."""
    limit = MAX_BYTES if limit is None else limit
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        raise ReadError(f"cannot read it: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ReadError(f"{_KINDS.get(stat.S_IFMT(mode), 'no regular file')}, not a regular file: give a file")
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise ReadError(f"cannot read it: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ReadError(f"more than {limit} bytes, the most lab reads from one file of this kind")
    return data


def read_text(path: Path | str, limit: int | None = None, dir_fd: int | None = None, follow: bool = True) -> str:
    """The file as UTF-8 text; a byte that is not names its line."""
    data = read_bytes(path, limit, dir_fd, follow)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ReadError(f"not UTF-8 text (byte 0x{data[exc.start]:02x})", line) from None
