"""The tools of a Debian release: which packages are fetched, which release names are taken, the command line that
runs a release's nft with its own loader, and the symlinks a cached tree may not hold."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lab.vm.debtools import (
    ReleaseTools,
    check_release,
    escaping_links,
    package_closure,
    relative_links,
    release_tools,
)
from lab.vm.errors import VmError
from lab.vm.files import tree_digests

STANZAS = {
    "nftables": "Package: nftables\nDepends: libnftables1 (= 1.1.3-1), libc6 (>= 2.34), libedit2 | libreadline8\n",
    "libnftables1": "Package: libnftables1\nDepends: libc6, libjansson4 (>= 2.14), libmnl0, libnftnl11 (>= 1.2.9)\n",
    "libc6": "Package: libc6\nDepends: libgcc-s1\n",
    "libgcc-s1": "Package: libgcc-s1\nDepends: gcc-14-base (= 14.2.0-19), libc6 (>= 2.35)\n",
    "libjansson4": "Package: libjansson4\nDepends: libc6\n",
    "libmnl0": "Package: libmnl0\nDepends: libc6\n",
    "libnftnl11": "Package: libnftnl11\nDepends: libc6, libmnl0\n",
    "libedit2": "Package: libedit2\nDepends: libbsd0, libc6, libtinfo6\n",
    "libbsd0": "Package: libbsd0\n",
    "libtinfo6": "Package: libtinfo6\nDepends: libc6\n",
}


def test_package_closure_follows_library_depends_only() -> None:
    found = package_closure(STANZAS.__getitem__, ["nftables"])
    assert found[0] == "nftables"
    assert set(found) == set(STANZAS)  # the first of alternatives (libedit2), never gcc-14-base (no library)
    assert len(found) == len(set(found))


@pytest.mark.parametrize("release", ["bullseye", "bookworm", "trixie"])
def test_the_three_releases_are_taken(release: str) -> None:
    assert check_release(release) == release


@pytest.mark.parametrize("release", ["buster", "sid", "../trixie", "Trixie", ""])
def test_other_release_names_are_refused_in_words(release: str) -> None:
    with pytest.raises(VmError, match="expected one of bullseye, bookworm, trixie"):
        check_release(release)


def test_argv_runs_the_release_loader_with_its_libraries(tmp_path: Path) -> None:
    libdir = tmp_path / "usr/lib/x86_64-linux-gnu"
    libdir.mkdir(parents=True)
    (libdir / "ld-linux-x86-64.so.2").write_bytes(b"")
    argv = ReleaseTools("trixie", tmp_path, {}).argv("nft")
    assert argv == [str(libdir / "ld-linux-x86-64.so.2"), "--library-path", str(libdir), str(tmp_path / "usr/sbin/nft")]


@pytest.mark.parametrize(("tool", "binary"), [("iptables-nft", "nft"), ("iptables-legacy", "legacy")])
def test_a_release_iptables_loads_its_own_extensions(tmp_path: Path, tool: str, binary: str) -> None:
    libdir = tmp_path / "usr/lib/x86_64-linux-gnu"
    libdir.mkdir(parents=True)
    (libdir / "ld-linux-x86-64.so.2").write_bytes(b"")
    argv = ReleaseTools("bookworm", tmp_path, {}).argv(tool)
    assert argv[:2] == ["env", f"XTABLES_LIBDIR={libdir / 'xtables'}"]
    assert argv[-1] == str(tmp_path / f"usr/sbin/xtables-{binary}-multi")


def test_a_tree_without_its_loader_is_refused(tmp_path: Path) -> None:
    with pytest.raises(VmError, match="no ld-linux-x86-64.so.2"):
        ReleaseTools("bookworm", tmp_path, {}).argv("nft")


def test_links_leading_out_of_the_tree_are_found(tmp_path: Path) -> None:
    (tmp_path / "lib64").mkdir()
    # This machine's kernel follows an absolute link from the host's root, whatever the release meant by it.
    (tmp_path / "lib64/ld-linux-x86-64.so.2").symlink_to("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
    (tmp_path / "lib64/inside").symlink_to("../lib64/ld-linux-x86-64.so.2")
    (tmp_path / "lib64/outside").symlink_to("../../etc/shadow")
    (tmp_path / "lib64/sibling").symlink_to(f"../../{tmp_path.name}x/lib")
    assert escaping_links(tmp_path) == ["lib64/ld-linux-x86-64.so.2", "lib64/outside", "lib64/sibling"]


def test_absolute_links_are_made_relative_within_the_tree(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "lib/x86_64-linux-gnu").mkdir(parents=True)
    (tree / "lib/x86_64-linux-gnu/ld-2.31.so").write_bytes(b"loader")
    (tree / "lib64").mkdir()
    (tree / "lib64/ld-linux-x86-64.so.2").symlink_to("/lib/x86_64-linux-gnu/ld-2.31.so")
    (tree / "lib64/up").symlink_to("/../../etc/shadow")
    relative_links(tree)
    assert os.readlink(tree / "lib64/ld-linux-x86-64.so.2") == "../lib/x86_64-linux-gnu/ld-2.31.so"
    assert (tree / "lib64/ld-linux-x86-64.so.2").read_bytes() == b"loader"
    # Climbing above the release's root stays a way out of the tree, and is refused as one.
    assert escaping_links(tree) == ["lib64/up"]


def _cached(cache: Path) -> Path:
    """A cache of trixie's tools as a download leaves it: the tree and the record of its digests."""
    tdir = cache / "tools" / "trixie"
    (tdir / "tree/usr/sbin").mkdir(parents=True)
    (tdir / "tree/usr/sbin/nft").write_bytes(b"nft")
    (tdir / "tree/usr/sbin/nft-link").symlink_to("nft")
    for path in (cache, cache / "tools", tdir):
        path.chmod(0o700)
    record = {"format": 2, "versions": {"nftables": "1.1.3-1"}, "files": tree_digests(tdir / "tree")}
    (tdir / "tools.json").write_text(json.dumps(record))
    return tdir


def test_a_cached_tree_is_used_as_recorded(tmp_path: Path) -> None:
    _cached(tmp_path / "cache")
    tools = release_tools("trixie", tmp_path / "cache")
    assert tools.versions == {"nftables": "1.1.3-1"}


def test_a_tree_recorded_before_links_were_made_relative_is_fetched_again(tmp_path: Path, monkeypatch) -> None:
    tdir = _cached(tmp_path / "cache")
    record = json.loads((tdir / "tools.json").read_text())
    (tdir / "tools.json").write_text(json.dumps({k: v for k, v in record.items() if k != "format"}))
    fetched = []
    monkeypatch.setattr("lab.vm.debtools._fetch", lambda release, into: fetched.append(release) or record)
    release_tools("trixie", tmp_path / "cache")
    assert fetched == ["trixie"]
    assert json.loads((tdir / "tools.json").read_text())["format"] == 2


def test_a_changed_file_in_the_cache_is_refused(tmp_path: Path) -> None:
    tdir = _cached(tmp_path / "cache")
    (tdir / "tree/usr/sbin/nft").write_bytes(b"something else")
    with pytest.raises(VmError, match=r"1 file\(s\) differ .* e.g. tree/usr/sbin/nft;"):
        release_tools("trixie", tmp_path / "cache")


def test_a_recorded_link_out_of_the_cache_is_refused(tmp_path: Path) -> None:
    tdir = _cached(tmp_path / "cache")
    (tdir / "tree/usr/sbin/nft").unlink()
    (tdir / "tree/usr/sbin/nft").symlink_to("../../../../outside")
    record = json.loads((tdir / "tools.json").read_text())
    (tdir / "tools.json").write_text(json.dumps(record | {"files": tree_digests(tdir / "tree")}))
    with pytest.raises(VmError, match="symlink leading outside them: tree/usr/sbin/nft"):
        release_tools("trixie", tmp_path / "cache")


def test_a_symlinked_cache_directory_is_refused(tmp_path: Path) -> None:
    tdir = _cached(tmp_path / "elsewhere")
    (tmp_path / "cache" / "tools").mkdir(parents=True, mode=0o700)
    (tmp_path / "cache").chmod(0o700)
    (tmp_path / "cache" / "tools" / "trixie").symlink_to(tdir)
    with pytest.raises(VmError, match="is not a directory"):
        release_tools("trixie", tmp_path / "cache")
