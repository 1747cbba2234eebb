"""Run identity and leftovers.

Every namespace a run creates is named `lab-<6 hex>-<actor>`. A run claims its prefix by writing a state file,
/run/lab/<prefix>.json, before it creates anything: its pid, the start time of that process, and the name of
every namespace it creates, added to the file before the namespace exists. The file is always replaced whole
(written beside it, then renamed over it), so a reader never sees half of one.

A run may keep more beside its state, named after its prefix (BESIDE: a live lab's description and the socket
its keeper answers on, lab/live); they go with the state.

A run killed with SIGKILL leaves both behind. `lab down` (and the start of every `lab run`) removes the
recorded namespaces of runs whose process is gone: the pid no longer exists, or now belongs to a process that
started at another time. It never removes anything no state file records, never follows a symlink, and leaves
whatever in /run/netns is not a plain file (a namespace is pinned by a bind mount on an empty file).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import secrets
import signal
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lab.describe.readfile import ReadError, read_text
from lab.paths import NETNS_DIR, STATE_DIR
from lab.realize.enter import NamespaceError
from lab.realize.terminate import deferred

PREFIX_RE = re.compile(r"^(lab-[0-9a-f]{6})-")
STATE_RE = re.compile(r"^(lab-[0-9a-f]{6})\.json$")
LOCK_NAME = ".lock"
BESIDE = (".live.json", ".sock", ".log")  # what a run may keep beside its state file, named <prefix><suffix>
MNT_DETACH, UMOUNT_NOFOLLOW = 2, 8
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class RunState:
    """What /run/lab/<prefix>.json says: which process runs under the prefix, and what it created."""

    prefix: str
    pid: int
    start: int  # field 22 of /proc/<pid>/stat: tells the run's process from a later one given the same pid
    namespaces: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps({"pid": self.pid, "start": self.start, "namespaces": list(self.namespaces)}) + "\n"

    @classmethod
    def from_json(cls, prefix: str, text: str) -> RunState | None:
        """The state in `text`, or None when it is not one a lab run wrote for this prefix."""
        try:
            data = json.loads(text)
            pid, start, names = data["pid"], data["start"], data["namespaces"]
        except (ValueError, TypeError, KeyError):
            return None
        if not (_is_int(pid) and _is_int(start) and isinstance(names, list)):
            return None
        if not all(isinstance(n, str) and _owned_name(prefix, n) for n in names):
            return None
        return cls(prefix, pid, start, tuple(names))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _owned_name(prefix: str, name: str) -> bool:
    """A name a run with this prefix may record: one entry directly in /run/netns, under the prefix."""
    return name.startswith(f"{prefix}-") and "/" not in name and "\0" not in name


def start_time(stat_text: str) -> int:
    """Field 22 (starttime) of a /proc/<pid>/stat line; the command name before it may hold spaces and ')'."""
    return int(stat_text.rsplit(")", 1)[1].split()[19])


def process_start(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), or None when there is no such process."""
    try:
        return start_time(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return None


def alive(state: RunState) -> bool:
    return process_start(state.pid) == state.start


# ---------------------------------------------------------------- the state directory


def _open_dir(path: Path) -> int:
    try:
        return os.open(path, _O_DIR)
    except OSError as exc:
        raise NamespaceError(f"{path} must be a directory, not a symlink: {exc.strerror}") from None


@contextlib.contextmanager
def _state_dir() -> Iterator[int]:
    """/run/lab, created root-only; refused when it is a symlink or someone else could write to it.

    A state file names what root will remove: only root may write one.
    """
    with contextlib.suppress(FileExistsError):
        os.mkdir(STATE_DIR, 0o700)
    fd = _open_dir(STATE_DIR)
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            raise NamespaceError(
                f"{STATE_DIR} is owned by uid {info.st_uid} or writable by others (mode {info.st_mode & 0o7777:o}): "
                "lab keeps its run state only in a directory nobody else can write"
            )
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _exclusive(dir_fd: int) -> Iterator[None]:
    """Claiming a prefix and cleaning up leftovers exclude each other, so a prefix freed by one cleanup is
    never claimed by a new run while another cleanup still works from what it read before."""
    fd = os.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_state(dir_fd: int, state: RunState) -> None:
    partial = f".{state.prefix}.{secrets.token_hex(4)}"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(state.to_json())
        os.replace(partial, f"{state.prefix}.json", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial, dir_fd=dir_fd)
        raise


def _read_state(dir_fd: int, filename: str, prefix: str) -> RunState | None:
    text = _read_own(dir_fd, filename)
    return None if text is None else RunState.from_json(prefix, text)


def _read_own(dir_fd: int, filename: str) -> str | None:
    """A file of /run/lab, if it is a plain one of bounded size (never a symlink's target, a FIFO or a device)."""
    try:
        return read_text(filename, dir_fd=dir_fd, caller=False)
    except ReadError:
        return None


# ---------------------------------------------------------------- this process's runs

_mine: dict[str, RunState] = {}
_mine_lock = threading.Lock()


def new_prefix() -> str:
    """Claim a fresh prefix: its state file exists before any namespace of the run does."""
    with _state_dir() as dir_fd, _exclusive(dir_fd):
        taken = set(os.listdir(dir_fd)) | set(_netns_entries())
        while True:
            prefix = f"lab-{secrets.token_hex(3)}"
            if f"{prefix}.json" not in taken and not any(n.startswith(f"{prefix}-") for n in taken):
                break
        start = process_start(os.getpid())
        assert start is not None  # this very process
        state = RunState(prefix, os.getpid(), start)
        _write_state(dir_fd, state)
    with _mine_lock:
        _mine[prefix] = state
    return prefix


def record(prefix: str, *names: str) -> None:
    """Add `names` to the run's state; called before the namespaces are created, so none ever goes unrecorded
    (one write for many: the state is rewritten whole each time)."""
    for name in names:
        if not _owned_name(prefix, name):
            raise NamespaceError(f"{name}: not a namespace name under the run's prefix {prefix}")
    with _mine_lock:
        state = _mine.get(prefix)
        if state is None:
            raise NamespaceError(f"{prefix} was not claimed by this process (runs.new_prefix)")
        state = RunState(prefix, state.pid, state.start, (*state.namespaces, *names))
        with _state_dir() as dir_fd:
            _write_state(dir_fd, state)
        _mine[prefix] = state


def release(prefix: str) -> None:
    """The run is over: remove what it recorded that is still there, then forget it.

    Its teardown removed the namespaces its builder knew; a signal that arrives while a namespace is being
    created can leave one recorded but never handed to the builder, and once forgotten it would stay for good.
    """
    with _mine_lock:
        state = _mine.pop(prefix, None)
    if state is not None:
        _remove_all(state.namespaces)
    with _state_dir() as dir_fd:
        _unlink_run(dir_fd, prefix)


def _unlink_run(dir_fd: int, prefix: str) -> None:
    """A run's state file and what it kept beside it."""
    for suffix in (".json", *BESIDE):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{prefix}{suffix}", dir_fd=dir_fd)


def write_beside(prefix: str, suffix: str, text: str) -> None:
    """Keep `text` beside this process's run state (written aside and renamed, root-only, never through a
    symlink)."""
    if suffix not in BESIDE:
        raise ValueError(f"{suffix}: not one of {BESIDE}")
    with _mine_lock:
        if prefix not in _mine:
            raise NamespaceError(f"{prefix} was not claimed by this process (runs.new_prefix)")
    with _state_dir() as dir_fd:
        partial = f".{prefix}.{secrets.token_hex(4)}"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(partial, f"{prefix}{suffix}", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def read_beside(prefix: str, suffix: str) -> str | None:
    """What a run keeps beside its state, if it is a plain file (None otherwise)."""
    with _state_dir() as dir_fd:
        return _read_own(dir_fd, f"{prefix}{suffix}")


def recorded_runs() -> list[RunState]:
    """Every run with a readable state, live or not."""
    found = []
    with _state_dir() as dir_fd:
        for filename in sorted(os.listdir(dir_fd)):
            if (match := STATE_RE.match(filename)) and (state := _read_state(dir_fd, filename, match.group(1))):
                found.append(state)
    return found


# ---------------------------------------------------------------- removing namespaces


def _netns_entries() -> list[str]:
    """Names in /run/netns that look like a lab run's (whatever kind of entry they are)."""
    try:
        fd = _open_dir(NETNS_DIR)
    except NamespaceError:
        if not os.path.lexists(NETNS_DIR):
            return []
        raise
    try:
        return sorted(n for n in os.listdir(fd) if PREFIX_RE.match(n))
    finally:
        os.close(fd)


def _remove_one(dir_fd: int, name: str) -> bool | None:
    """Unpin and unlink /run/netns/<name>: True when removed, None when absent, False when it is not a plain
    file (a directory, a symlink, a device...): no namespace was ever pinned on that, so it is left."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return False
    # Through the directory's fd, not its path: the checks above were made on this very directory.
    path = f"/proc/self/fd/{dir_fd}/{name}".encode()
    if _libc.umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) != 0:
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOENT):  # nothing mounted there (a creation cut short); gone meanwhile
            raise NamespaceError(f"umount {NETNS_DIR / name} failed: {os.strerror(err)}")
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    return True


def _remove_all(names: list[str] | tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(removed, left) of `names` in /run/netns; names that do not exist are neither."""
    if not names or not os.path.lexists(NETNS_DIR):
        return [], []
    removed, left = [], []
    fd = _open_dir(NETNS_DIR)
    try:
        for name in names:
            done = _remove_one(fd, name)
            if done is not None:
                (removed if done else left).append(name)
    finally:
        os.close(fd)
    return removed, left


def _kill_processes_inside(names: tuple[str, ...]) -> None:
    """Processes that outlived their run inside its namespaces (a trace monitor whose lab process was
    SIGKILLed) would keep each namespace alive once its mount is gone, waiting for events forever: they are
    killed first. Only processes whose network namespace is one of these (by device and inode) are touched."""
    if not names or not os.path.lexists(NETNS_DIR):
        return
    fd = _open_dir(NETNS_DIR)
    try:
        inside: set[tuple[int, int]] = set()
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISREG(info.st_mode):
                    inside.add((info.st_dev, info.st_ino))
    finally:
        os.close(fd)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to read
            info = os.stat(f"/proc/{pid}/ns/net")
            if (info.st_dev, info.st_ino) in inside and int(pid) != os.getpid():
                os.kill(int(pid), signal.SIGKILL)


def remove_namespaces(names: list[str]) -> None:
    """A run's own teardown. A process still inside one of its namespaces (a tracer whose close was cut short)
    is killed first, as `lab down` does for a dead run. Whatever is left (see _remove_one) stays for `lab down`
    to report. SIGTERM waits for the end: stopped halfway, the rest would be left too."""
    with deferred():
        _kill_processes_inside(tuple(names))
        _remove_all(names)


@dataclass
class Cleanup:
    """What `lab down` did, and what it left and why."""

    removed: list[str] = field(default_factory=list)  # recorded namespaces of runs that are gone (or --all)
    live: list[str] = field(default_factory=list)  # namespaces of runs still running
    not_plain: list[str] = field(default_factory=list)  # recorded, but a directory, a symlink...
    unrecorded: list[str] = field(default_factory=list)  # lab-* entries no run's state names
    bad_states: list[str] = field(default_factory=list)  # files in /run/lab that are no run's state

    @property
    def empty(self) -> bool:
        """Nothing removed and nothing left to speak of."""
        return not (self.removed or self.live or self.not_plain or self.unrecorded or self.bad_states)

    def lines(self) -> list[str]:
        said = [f"removed {len(self.removed)} namespaces" + (f": {' '.join(self.removed)}" if self.removed else "")]
        left = [
            (self.live, "namespaces of runs still running (lab down --all removes them too)"),
            (self.not_plain, f"entries in {NETNS_DIR} a run recorded that are not a plain file, so no namespace"),
            (self.unrecorded, f"entries in {NETNS_DIR} no lab run recorded (ip netns delete NAME if yours)"),
            (self.bad_states, f"files in {STATE_DIR} that are no run's state (what they name is left too)"),
        ]
        said += [f"left {len(names)} {why}: {' '.join(names)}" for names, why in left if names]
        return said


def remove_leftovers(include_live: bool = False, only: str | None = None) -> Cleanup:
    """Remove the recorded namespaces of runs that are gone (with include_live, of every recorded run); with
    `only`, of that run alone, and say nothing of any other (other users' runs are theirs to sweep)."""
    cleanup = Cleanup()
    live: set[str] = set()
    with _state_dir() as dir_fd, _exclusive(dir_fd):
        for filename in sorted(os.listdir(dir_fd)):
            if not (match := STATE_RE.match(filename)) or (only is not None and match.group(1) != only):
                continue
            state = _read_state(dir_fd, filename, match.group(1))
            if state is None:
                cleanup.bad_states.append(filename)
            elif alive(state) and not include_live:
                live.add(state.prefix)
            else:
                _kill_processes_inside(state.namespaces)
                removed, left = _remove_all(state.namespaces)
                cleanup.removed += removed
                cleanup.not_plain += left
                _unlink_run(dir_fd, state.prefix)
        for name in _netns_entries():
            if only is not None and not name.startswith(f"{only}-"):
                continue
            if name.startswith(tuple(f"{prefix}-" for prefix in live)):
                cleanup.live.append(name)
            elif name not in cleanup.not_plain:
                cleanup.unrecorded.append(name)
    return cleanup
