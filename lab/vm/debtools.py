"""debtools: the userspace tools of one Debian release (nft, iptables), fetched from Debian's archive and run on
this machine with that release's own loader and libraries.

kube-proxy runs the nft and iptables of its image (the distroless-iptables image, built from Debian packages), not
the host's; outages come from the meeting of two versions (kubernetes/kubernetes#136786: an older nft crashing on
a set a newer nft wrote). The packages come through the private apt of lab.vm.apt: apt checks them against the
release's signed Release and Packages indexes and each file is checked again against its stanza's SHA256. The
unpacked tree is recorded file by file and checked at every use. A package's absolute symlink (libc6's
lib64/ld-linux-x86-64.so.2 -> /lib/...) means a path of the release's root, but this machine's kernel would follow
it to the host's own file: on unpacking, each is made relative within the tree, and any symlink that then leads
outside the tree (absolute, or climbing out) is refused, so nothing of the cache is followed out of it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lab.paths import cache_root
from lab.vm.apt import depends_names, stanza_field
from lab.vm.errors import VmError
from lab.vm.files import changed_entries, private_dir, sha256_file, tree_digests, write_atomically
from lab.vm.kernels import locked, run_checked, tool_path, updated_apt

RELEASES = ("bullseye", "bookworm", "trixie")
# A tool's package and the file it runs. iptables' and ip6tables' commands of one backend are all names of one
# multi-call binary (called by its own name, it takes the command as its first argument: `xtables-nft-multi
# iptables-nft-restore`); the legacy backend's is in the same package.
TOOLS = {
    "nft": ("nftables", "usr/sbin/nft"),
    "iptables-nft": ("iptables", "usr/sbin/xtables-nft-multi"),
    "iptables-legacy": ("iptables", "usr/sbin/xtables-legacy-multi"),
}
# Where a release's iptables loads its match and target extensions from: its own, not this machine's (an extension
# of another libxtables version is refused, or misreads the rule).
_XTABLES_LIBDIR = "usr/lib/x86_64-linux-gnu/xtables"
_LIBDIRS = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu")
_LOADER = "ld-linux-x86-64.so.2"
# The record's format: 2 since absolute symlinks are made relative on unpacking; a tree recorded before (its
# absolute links kept) is fetched again rather than refused.
_FORMAT = 2


@dataclass(frozen=True)
class ReleaseTools:
    """A release's unpacked tools: `argv("nft")` runs its nft with its own loader and libraries."""

    release: str
    tree: Path
    versions: dict[str, str]

    def argv(self, tool: str) -> list[str]:
        binary = TOOLS[tool][1]
        libdirs = [str(self.tree / d) for d in _LIBDIRS if (self.tree / d).is_dir()]
        extensions = [f"XTABLES_LIBDIR={self.tree / _XTABLES_LIBDIR}"] if tool.startswith("iptables") else []
        run = [str(self.loader()), "--library-path", ":".join(libdirs), str(self.tree / binary)]
        return ["env", *extensions, *run] if extensions else run

    def loader(self) -> Path:
        for libdir in _LIBDIRS:
            if (self.tree / libdir / _LOADER).is_file():
                return self.tree / libdir / _LOADER
        raise VmError(f"the {self.release} tools in {self.tree} hold no {_LOADER} (libc6 was not unpacked)")


def check_release(release: str) -> str:
    if release not in RELEASES:
        raise VmError(
            f"{release!r} is no Debian release the lab fetches tools of: expected one of {', '.join(RELEASES)}"
        )
    return release


def package_closure(show: Callable[[str], str], roots: list[str]) -> list[str]:
    """The packages the roots need, transitively through Depends, keeping only libraries (lib*) beyond the roots:
    the tools run from the unpacked tree, so no maintainer script or non-library dependency matters."""
    found: list[str] = []
    todo = list(roots)
    while todo:
        name = todo.pop(0)
        if name in found:
            continue
        found.append(name)
        todo += [dep for dep in depends_names(show(name)) if dep.startswith("lib") and dep not in found]
    return found


def _links(tree: Path) -> list[Path]:
    return [
        Path(top, name) for top, dirs, files in os.walk(tree) for name in dirs + files if Path(top, name).is_symlink()
    ]


def escaping_links(tree: Path) -> list[str]:
    """Symlinks under tree that lead outside it: an absolute one (this machine's kernel follows it from the
    host's root), or a relative one climbing out."""
    bad = []
    for path in _links(tree):
        target = os.readlink(path)
        resolved = os.path.normpath(path.parent / target)
        if target.startswith("/") or not (resolved + "/").startswith(str(tree) + "/"):
            bad.append(str(path.relative_to(tree)))
    return sorted(bad)


def relative_links(tree: Path) -> None:
    """Make each absolute symlink under tree (a path of the release's root) relative, to the same path inside
    the tree: the link the lab leaves is its own, and leads where the release meant."""
    for path in _links(tree):
        target = os.readlink(path)
        if target.startswith("/"):
            inside = os.path.normpath(tree / target.lstrip("/"))
            path.unlink()
            path.symlink_to(os.path.relpath(inside, path.parent))


def release_tools(release: str, cache: Path | None = None) -> ReleaseTools:
    """The release's tools, fetched into the cache on first use and checked against their record at every use."""
    tdir = private_dir(cache or cache_root(), "tools", check_release(release))
    with locked(tdir.parent / f"{release}.lock"):
        record = _read_record(tdir)
        if record is None:
            record = _fetch(release, tdir)
            write_atomically(tdir / "tools.json", (json.dumps(record, indent=2) + "\n").encode())
        _verify(tdir, record["files"])
    return ReleaseTools(release, tdir / "tree", record["versions"])


def _read_record(tdir: Path) -> dict | None:
    try:
        fd = os.open(tdir / "tools.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd) as handle:
        try:
            record = json.load(handle)
        except ValueError:
            return None
    ok = isinstance(record, dict) and isinstance(record.get("files"), dict) and isinstance(record.get("versions"), dict)
    return record if ok and record.get("format") == _FORMAT else None


def _verify(tdir: Path, files: dict[str, str]) -> None:
    if differ := changed_entries(tdir / "tree", files):
        raise VmError(
            f"the cached tools in {tdir} are not what was downloaded: {len(differ)} file(s) differ from the digests "
            f"taken then, e.g. tree/{differ[0]}; remove {tdir} and the lab downloads them again"
        )
    if bad := escaping_links(tdir / "tree"):
        raise VmError(f"the cached tools in {tdir} hold a symlink leading outside them: tree/{bad[0]}")


def _fetch(release: str, tdir: Path) -> dict:
    apt = updated_apt(tdir / "apt", release)
    apt_get, apt_cache = tool_path("apt-get"), tool_path("apt-cache")
    stanzas: dict[str, str] = {}

    def show(package: str) -> str:
        if package not in stanzas:
            argv = [apt_cache, *apt.options(), "show", "--no-all-versions", package]
            stanzas[package] = run_checked(argv, f"apt-cache show {package} ({release})")
        return stanzas[package]

    packages = package_closure(show, list(dict.fromkeys(package for package, _ in TOOLS.values())))
    with tempfile.TemporaryDirectory(dir=tdir, prefix="download-") as tmp:
        run_checked(
            [apt_get, *apt.options(), "-q", "download", *packages], f"apt-get download ({release})", cwd=Path(tmp)
        )
        staging = tdir / "tree.new"
        run_checked(["rm", "-rf", str(staging)], f"removing {staging}")
        for package in packages:
            run_checked(
                [tool_path("dpkg-deb"), "-x", str(_checked_deb(Path(tmp), package, show(package))), str(staging)],
                package,
            )
    relative_links(staging)
    if bad := escaping_links(staging):
        raise VmError(f"{release}'s packages hold a symlink leading outside their tree: {bad[0]}")
    run_checked(["rm", "-rf", str(tdir / "tree")], f"removing {tdir / 'tree'}")
    staging.rename(tdir / "tree")
    versions = {package: stanza_field(show(package), "Version") for package in packages}
    return {
        "format": _FORMAT,
        "release": release,
        "mirror": apt.mirror,
        "versions": versions,
        "files": tree_digests(tdir / "tree"),
    }


def _checked_deb(tmp: Path, package: str, stanza: str) -> Path:
    """The downloaded .deb of package, its sha256 that of the release's (signed) index."""
    deb = next(iter(sorted(tmp.glob(f"{package}_*.deb"))), None)
    if deb is None:
        raise VmError(f"apt-get download {package} left no .deb")
    digest, wanted = sha256_file(deb), stanza_field(stanza, "SHA256")
    if digest != wanted:
        raise VmError(f"{deb.name}: sha256 {digest} is not the {wanted} of the release's index")
    return deb
