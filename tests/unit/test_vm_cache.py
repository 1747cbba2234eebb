"""lab vm's kernel cache: only in directories nobody else can write, its lock never through a symlink, and a cached
kernel checked against the digests taken at download before it boots with the host's root shared (no network)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lab.vm import files, kernels
from lab.vm.errors import VmError

RELEASE = "6.1.0-50-amd64"


def test_the_cache_is_made_for_this_user_only(tmp_path):
    made = files.private_dir(tmp_path / "lab", "kernels", "debian-12")
    assert made == tmp_path / "lab" / "kernels" / "debian-12"
    assert all((p.stat().st_mode & 0o777) == 0o700 for p in (made, made.parent, made.parent.parent))


def test_a_symlink_anywhere_in_the_cache_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "lab").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(VmError, match="is not a directory"):
        files.private_dir(tmp_path / "lab")
    (tmp_path / "real" / "kernels").mkdir(parents=True, mode=0o700)
    (tmp_path / "real").chmod(0o700)
    (tmp_path / "real" / "kernels" / "debian-12").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(VmError, match=r"debian-12 is not a directory \(a symlink\?\)"):
        files.private_dir(tmp_path / "real", "kernels", "debian-12")


def test_a_cache_others_may_write_or_someone_else_owns_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(VmError, match="mode 777.*chmod go-w"):
        files.private_dir(shared)
    shared.chmod(0o700)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    with pytest.raises(VmError, match=f"belongs to uid {os.getuid()}"):
        files.private_dir(shared)


def test_the_lock_file_is_never_opened_through_a_symlink(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / "debian-12.lock").symlink_to(victim)
    with pytest.raises(VmError, match="a symlink is never followed"), kernels.locked(tmp_path / "debian-12.lock"):
        pass
    assert victim.read_text() == "keep me"  # open(path, "w") used to truncate it


def test_a_checked_file_is_intact_until_it_changes(tmp_path):
    target = tmp_path / "vmlinux-1-2"
    assert not files.intact(target)
    files.write_checked(target, b"\x7fELF kernel")
    assert files.intact(target)
    target.write_bytes(b"\x7fELF other")
    assert not files.intact(target)  # the caller makes it anew


def _cached_kernel(cache: Path) -> Path:
    """A cache entry as a download leaves it: the unpacked tree and kernel.json with the tree's digests."""
    kdir = files.private_dir(cache, "kernels", "debian-12")
    (kdir / "tree" / "boot").mkdir(parents=True)
    (kdir / "tree" / "boot" / f"vmlinuz-{RELEASE}").write_bytes(b"bzImage")
    modules = kdir / "tree" / "usr" / "lib" / "modules" / RELEASE
    modules.mkdir(parents=True)
    (modules / "modules.dep").write_text("kernel/fs/9p/9p.ko:\n")
    (kdir / "tree" / "lib").mkdir()
    (kdir / "tree" / "lib" / "modules").symlink_to("../usr/lib/modules")
    record = {"package": f"linux-image-{RELEASE}", "release": RELEASE, "suite": "bookworm"}
    record["files"] = files.tree_digests(kdir / "tree")
    (kdir / "kernel.json").write_text(json.dumps(record))
    return kdir


@pytest.fixture
def offline(monkeypatch):
    def no_download(suite, kdir):
        raise AssertionError("a cached kernel must not be downloaded again")

    monkeypatch.setattr(kernels, "_fetch_and_unpack", no_download)


def test_a_cached_kernel_whose_files_match_their_digests_is_used(tmp_path, offline):
    kdir = _cached_kernel(tmp_path)
    kernel = kernels.resolve(kernels.parse_spec("debian-12"), tmp_path)
    assert kernel.vmlinuz == kdir / "tree" / "boot" / f"vmlinuz-{RELEASE}" and kernel.release == RELEASE


@pytest.mark.parametrize(
    "tamper",
    [
        lambda tree: (tree / "boot" / f"vmlinuz-{RELEASE}").write_bytes(b"bzImage, changed"),
        lambda tree: (tree / "usr" / "lib" / "modules" / RELEASE / "evil.ko").write_bytes(b"added"),
        lambda tree: (tree / "usr" / "lib" / "modules" / RELEASE / "modules.dep").unlink(),
        lambda tree: ((tree / "lib" / "modules").unlink(), (tree / "lib" / "modules").symlink_to("/lib/modules")),
    ],
    ids=["changed", "added", "removed", "relinked"],
)
def test_a_cached_kernel_that_changed_is_refused_before_it_boots(tmp_path, offline, tamper):
    kdir = _cached_kernel(tmp_path)
    tamper(kdir / "tree")
    with pytest.raises(VmError, match=f"not what was downloaded: 1 file.*remove {kdir} and lab vm downloads it again"):
        kernels.resolve(kernels.parse_spec("debian-12"), tmp_path)


def test_a_7x_kernel_is_found_beside_its_modules(tmp_path, offline):
    # Debian's 7.x packages (linux-binary-*, linux-base-*) put vmlinuz and config in /usr/lib/modules/<release>.
    kdir = _cached_kernel(tmp_path)
    modules = kdir / "tree" / "usr" / "lib" / "modules" / RELEASE
    (kdir / "tree" / "boot" / f"vmlinuz-{RELEASE}").rename(modules / "vmlinuz")
    (modules / "config").write_text("CONFIG_IP_VS=m\n")
    record = json.loads((kdir / "kernel.json").read_text()) | {"files": files.tree_digests(kdir / "tree")}
    (kdir / "kernel.json").write_text(json.dumps(record))
    kernel = kernels.resolve(kernels.parse_spec("debian-12"), tmp_path)
    assert kernel.vmlinuz == kdir / "tree" / "lib" / "modules" / RELEASE / "vmlinuz"
    assert kernel.config == kdir / "tree" / "lib" / "modules" / RELEASE / "config"


def test_a_kernel_cached_without_digests_is_downloaded_again(tmp_path, monkeypatch):
    kdir = _cached_kernel(tmp_path)
    old = json.loads((kdir / "kernel.json").read_text())
    del old["files"]  # as an older lab wrote it
    (kdir / "kernel.json").write_text(json.dumps(old))
    fetched = []

    def fetch(suite, where, progress):
        fetched.append(suite)
        return {"package": old["package"], "version": "6.1.176-1", "release": RELEASE, "deb_sha256": "ab" * 32}

    monkeypatch.setattr(kernels, "_fetch_and_unpack", fetch)
    kernels.resolve(kernels.parse_spec("debian-12"), tmp_path)
    record = json.loads((kdir / "kernel.json").read_text())
    assert fetched == ["bookworm"] and record["files"] == files.tree_digests(kdir / "tree")
    assert record["deb_sha256"] == "ab" * 32
