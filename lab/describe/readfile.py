"""Reading a file lab was given (a scenario, a dump to replay, what a cache holds): a regular file of at most a
limit, as UTF-8 text, or an error that says which of these it is not.

Every file is untrusted: `/dev/zero` would grow until MemoryError, a FIFO would block its reader forever, and a
device or directory is no file anyone meant to give. The file is opened without blocking (a FIFO's open waits for
a writer otherwise), checked to be a regular file, and read to one byte past the limit.

lab runs as root, often through sudo, so a path is never followed through a symlink at its end (one pointing at
/etc/shadow would be read with root's rights), and under sudo a file the calling user could not read themselves
is refused: lab reads for its user nothing they could not read without it. Errors never quote the file: a
caller quotes a file's content only once it has recognised the file as the kind it expected.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from pathlib import Path

from lab.describe.digits import is_ascii_number

MAX_BYTES = 4 * 2**20  # a scenario is a few kB; a node's dump with 10 000 Services, a few MB

_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
}
_LINK = "is a symbolic link: lab does not follow links on input; give the file itself"


class ReadError(Exception):
    """Why a file cannot be read as input; `line` (1-based) when one line is to blame."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        self.reason, self.line = reason, line
        super().__init__(f"line {line}: {reason}" if line else reason)


def read_bytes(path: Path | str, limit: int | None = None, dir_fd: int | None = None, caller: bool = True) -> bytes:
    """The bytes of the regular file at `path` (never through a symlink), if there are at most `limit`
    (MAX_BYTES) of them. `caller` False for lab's own state (in a directory opened once, `dir_fd`), which is
    root's alone: every other file must be one the user who ran lab through sudo could read."""
    limit = MAX_BYTES if limit is None else limit
    fd = _open(path, dir_fd)
    try:
        _check_opened(fd, caller)
    except ReadError:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise ReadError(f"cannot read it: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ReadError(f"more than {limit} bytes, the most lab reads from one file of this kind")
    return data


def read_text(path: Path | str, limit: int | None = None, dir_fd: int | None = None, caller: bool = True) -> str:
    """The file as UTF-8 text (utf8_text)."""
    return utf8_text(read_bytes(path, limit, dir_fd, caller))


def utf8_text(data: bytes) -> str:
    """`data` as UTF-8 text; a byte that is not names its line and where in the line it is (not its value: a file
    that is no text is nothing lab quotes)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise ReadError(f"not UTF-8 text (byte {column} of the line is not)", line) from None


def _open(path: Path | str, dir_fd: int | None) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP and _is_link(path, dir_fd):  # ELOOP is also a loop in a directory's links
            raise ReadError(_LINK) from None
        raise ReadError(f"cannot read it: {exc.strerror or exc}") from None


def _is_link(path: Path | str, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def _check_opened(fd: int, caller: bool) -> None:
    """A regular file, and, for `caller`, one the user behind sudo could read: judged on the file opened, so that
    nothing can swap it between the check and the read."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise ReadError(f"{_KINDS.get(stat.S_IFMT(st.st_mode), 'no regular file')}, not a regular file: give a file")
    user = _sudo_caller() if caller else None
    if user is not None and (why := _unreadable_for(user, fd, st)):
        raise ReadError(why)


def _sudo_caller() -> tuple[int, frozenset[int]] | None:
    """The user who ran lab through sudo (SUDO_UID, SUDO_GID) and their groups; None without sudo, or when that
    user is root."""
    uid, gid = (os.environ.get(name, "") for name in ("SUDO_UID", "SUDO_GID"))
    if not is_ascii_number(uid) or int(uid) == 0:
        return None
    try:
        entry = pwd.getpwuid(int(uid))
    except KeyError:  # a user no longer in the passwd database: only the group sudo named
        return int(uid), frozenset({int(gid)} if is_ascii_number(gid) else ())
    primary = int(gid) if is_ascii_number(gid) else entry.pw_gid
    return int(uid), frozenset(os.getgrouplist(entry.pw_name, primary))


def _unreadable_for(user: tuple[int, frozenset[int]], fd: int, st: os.stat_result) -> str:
    """Why `user` could not read the file themselves ("" when they could): its permission bits, and search
    permission on every directory above it (where it really is, past any link in the path). Mode bits only, as
    the kernel checks them for a user who is not root (owner, else group, else other); ACLs are not consulted,
    so a file shared with the user by an ACL alone is refused."""
    uid, _ = user
    if not _permits(user, st, stat.S_IRUSR):
        return f"the user who ran lab through sudo (uid {uid}) may not read this file: lab reads only what they could"
    real = Path(os.readlink(f"/proc/self/fd/{fd}"))
    for directory in real.parents:
        try:
            above = os.stat(directory)
        except OSError:
            continue  # gone since: the file was opened all the same, and its own bits allowed it
        if not _permits(user, above, stat.S_IXUSR):
            return (
                f"the user who ran lab through sudo (uid {uid}) may not enter {directory}, which holds this file: "
                "lab reads only what they could"
            )
    return ""


def _permits(user: tuple[int, frozenset[int]], st: os.stat_result, owner_bit: int) -> bool:
    """Whether the owner bit given (S_IRUSR, S_IXUSR) or its group or other counterpart lets `user` in."""
    uid, groups = user
    if st.st_uid == uid:
        return bool(st.st_mode & owner_bit)
    if st.st_gid in groups:
        return bool(st.st_mode & (owner_bit >> 3))
    return bool(st.st_mode & (owner_bit >> 6))
