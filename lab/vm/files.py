"""files: lab vm's cache on disk. What it holds is booted with the host's root shared, so the cache lives in
directories nobody else can write, every file is written so that a reader (or a second `lab vm` running at the
same time) never sees half, and what is booted is checked against the digest taken when it was made."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from lab.vm.errors import VmError


def write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(partial, 0o644)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def _check_private(path: Path) -> None:
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise VmError(f"{path} is not a directory (a symlink?): lab vm keeps its cache only in a directory of its own")
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise VmError(
            f"{path} belongs to uid {info.st_uid} or others may write in it (mode {info.st_mode & 0o7777:o}): "
            "lab vm boots what its cache holds with this machine's root shared, so nobody else may write there; "
            f"make it yours and not group/other-writable (chmod go-w), or remove it"
        )


def private_dir(root: Path, *parts: str) -> Path:
    """root/parts..., each made (mode 0700) when missing, and each refused when it is a symlink, not a directory,
    not this user's or writable by others."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    _check_private(root)
    path = root
    for part in parts:
        path = path / part
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        _check_private(path)
    return path


def sha256_file(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _entry_digest(path: Path) -> str | None:
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode):
        return f"symlink:{os.readlink(path)}"
    if stat.S_ISREG(mode):
        return f"sha256:{sha256_file(path)}"
    return None if stat.S_ISDIR(mode) else "other"


def tree_digests(root: Path) -> dict[str, str]:
    """Every entry under `root` but directories: path -> `sha256:<hex>`, `symlink:<target>` or `other`."""
    paths = [Path(top, name) for top, dirs, files in os.walk(root) for name in dirs + files]
    digests = {str(path.relative_to(root)): _entry_digest(path) for path in paths}
    return {path: digest for path, digest in digests.items() if digest is not None}


def changed_entries(root: Path, recorded: dict[str, str]) -> list[str]:
    """The entries under root that differ from the recorded tree_digests (changed, added or gone), sorted."""
    found = tree_digests(root)
    return sorted(path for path in recorded.keys() | found.keys() if recorded.get(path) != found.get(path))


def _digest_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.sha256")


def write_checked(path: Path, data: bytes) -> None:
    """write_atomically, then the data's digest beside it, for intact()."""
    write_atomically(path, data)
    write_atomically(_digest_path(path), f"{hashlib.sha256(data).hexdigest()}\n".encode())


def intact(path: Path) -> bool:
    """Does `path` hold exactly what write_checked put there? False when it or its digest is missing, or when
    a second `lab vm` is rewriting the pair this very moment: the caller makes the file anew."""
    try:
        return sha256_file(path) == _digest_path(path).read_text().strip()
    except OSError:
        return False
