"""kernels: what a kernel SPEC names, and a cached copy of that kernel and its modules on this machine.

SPEC is `debian-11` / `debian-12` / `debian-13` (the stock amd64 kernel of that Debian release, fetched with a
private apt configuration and cached), `debian-13-backports` (the newer kernel trixie-backports ships for Debian 13),
`debian-14` (forky, the testing release), or a path to a vmlinuz together with its modules directory
(/lib/modules/<release>). The Debian specs follow the suite, so a cached kernel is that suite's kernel of the day it
was fetched; `lab vm` fetches again only after its cache directory is removed.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from lab.describe.readfile import ReadError, read_text
from lab.paths import cache_root
from lab.vm.apt import KernelPackages, PrivateApt, kernel_packages, machine_mirror, stanza_field
from lab.vm.errors import VmError, missing_tool
from lab.vm.files import changed_entries, private_dir, sha256_file, tree_digests, write_atomically
from lab.vm.progress import Progress, watch_download

DEFAULT = "debian-12"
RELEASES = {
    "debian-11": "bullseye",
    "debian-12": "bookworm",
    "debian-13": "trixie",
    "debian-13-backports": "trixie-backports",
    "debian-14": "forky",
}
META_PACKAGE = "linux-image-amd64"

# Root's tools live in sbin, which a non-root PATH may lack.
_SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"])


@dataclass(frozen=True)
class KernelSpec:
    """A parsed SPEC: a Debian release (suite set) or a vmlinuz path with its modules dir."""

    name: str
    suite: str | None = None
    vmlinuz: Path | None = None
    modules: Path | None = None


@dataclass(frozen=True)
class Kernel:
    """A kernel ready to boot: its image, its modules dir (named for its release) and its build config."""

    name: str
    release: str
    vmlinuz: Path
    modules: Path
    config: Path | None
    cache: Path  # where the initramfs built for this kernel is kept


def parse_spec(spec: str, modules: str | Path | None = None) -> KernelSpec:
    spec = spec.strip()
    by_codename = {suite: name for name, suite in RELEASES.items()}
    if spec in RELEASES or spec in by_codename:
        if modules is not None:
            raise VmError(f"--modules goes with a vmlinuz path, not with {spec} (its package brings its modules)")
        name = by_codename.get(spec, spec)
        return KernelSpec(name=name, suite=RELEASES[name])
    if "/" not in spec and not spec.startswith("vmlinuz"):
        known = ", ".join(RELEASES)
        raise VmError(f"unknown kernel {spec!r}: use one of {known}, or a path to a vmlinuz with --modules DIR")
    if modules is None:
        raise VmError(f"kernel {spec} is a path: name its modules with --modules DIR (its /lib/modules/<release>)")
    return KernelSpec(name=spec, vmlinuz=Path(spec), modules=Path(modules))


def resolve(spec: KernelSpec, cache: Path | None = None) -> Kernel:
    """The kernel SPEC names, downloading and unpacking a Debian kernel the first time only."""
    cache = cache or cache_root()
    if spec.suite is not None:
        return _debian_kernel(spec, private_dir(cache, "kernels", spec.name))
    return _local_kernel(spec, cache)


def _local_kernel(spec: KernelSpec, cache: Path) -> Kernel:
    assert spec.vmlinuz is not None and spec.modules is not None
    vmlinuz, moddir = spec.vmlinuz.resolve(), spec.modules.resolve()
    if not vmlinuz.is_file():
        raise VmError(f"no kernel image at {spec.vmlinuz}")
    if not (moddir / "modules.dep").is_file():
        raise VmError(f"{spec.modules} has no modules.dep: give its /lib/modules/<release> (depmod -b run on it)")
    release = moddir.name
    config = next(
        (c for c in (vmlinuz.parent / f"config-{release}", moddir / "build" / ".config") if c.is_file()), None
    )
    return Kernel(spec.name, release, vmlinuz, moddir, config, private_dir(cache, "kernels", "local", release))


# ---------------------------------------------------------------- Debian's stock kernel, cached


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """One process at a time fetches a given kernel; the others wait and then find it cached."""
    try:  # never through a symlink (opening one with "w" truncated whatever it pointed to)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise VmError(f"cannot open the lock file {path}: {exc.strerror} (a symlink is never followed)") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read_record(kdir: Path) -> dict | None:
    """kernel.json of a complete download; None when there is none, or it is of a lab that took no digests."""
    try:
        record = json.loads(read_text(kdir / "kernel.json", caller=False))
    except (ReadError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("files"), dict) else None


def _verify(kdir: Path, files: dict[str, str]) -> None:
    """The tree is still what was unpacked from the downloaded package, every file of it: the guest boots its
    kernel and loads its modules with this machine's root shared."""
    if differ := changed_entries(kdir / "tree", files):
        raise VmError(
            f"the cached kernel in {kdir} is not what was downloaded: {len(differ)} file(s) differ from the digests "
            f"taken then, e.g. tree/{differ[0]}; remove {kdir} and lab vm downloads it again"
        )


def _kernel_from_record(name: str, kdir: Path, record: dict) -> Kernel | None:
    release = record["release"]
    tree = kdir / "tree"
    modules = tree / "lib" / "modules" / release
    # Debian's 7.x packages keep the image and config beside the modules; before 7.x they are in /boot.
    beside = (modules / "vmlinuz").is_file()
    kernel = Kernel(
        name=name,
        release=release,
        vmlinuz=modules / "vmlinuz" if beside else tree / "boot" / f"vmlinuz-{release}",
        modules=modules,
        config=modules / "config" if beside else tree / "boot" / f"config-{release}",
        cache=kdir,
    )
    if not (kernel.vmlinuz.is_file() and (kernel.modules / "modules.dep").is_file()):
        return None
    return kernel


def _debian_kernel(spec: KernelSpec, kdir: Path) -> Kernel:
    assert spec.suite is not None
    with locked(kdir.parent / f"{spec.name}.lock"):
        record = _read_record(kdir)
        if record is not None:
            _verify(kdir, record["files"])  # cached: no network, but checked
        else:
            progress = Progress()
            progress.stage(f"{spec.name}: not cached in {kdir}: fetching Debian's stock kernel of {spec.suite}")
            record = _fetch_and_unpack(spec.suite, kdir, progress) | {"suite": spec.suite}
            progress.stage(f"{spec.name}: recording the sha256 of every unpacked file")
            record["files"] = tree_digests(kdir / "tree")
            write_atomically(kdir / "kernel.json", (json.dumps(record, indent=2) + "\n").encode())
        kernel = _kernel_from_record(spec.name, kdir, record)
    if kernel is None:
        raise VmError(
            f"{record['package']} in {kdir / 'tree'} has no vmlinuz (in boot/ or lib/modules/{record['release']}/) "
            "or no modules"
        )
    return kernel


def tool_path(name: str) -> str:
    """A tool of this machine's that lab vm runs (apt-get, dpkg-deb, depmod), found in the sbin directories too."""
    path = shutil.which(name, path=_SEARCH_PATH)
    if path is None:
        raise missing_tool(name)
    return path


def run_checked(argv: list[str], what: str, cwd: Path | None = None) -> str:
    """A command's output; a VmError saying `what` failed, with its last words, when it fails or runs 15 minutes."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=900)
    except subprocess.TimeoutExpired:
        raise VmError(f"{what} took longer than 15 minutes") from None
    if proc.returncode != 0:
        said = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise VmError(f"{what} failed (exit {proc.returncode}):\n{said}")
    return proc.stdout


def _fetch_and_unpack(suite: str, kdir: Path, progress: Progress) -> dict:
    """Download the stock kernel of `suite` into kdir/tree, with modules.dep built; its package, version, release
    and the sha256 of each package file."""
    progress.stage(f"reading the package lists of {suite}")
    apt = updated_apt(kdir / "apt", suite)
    apt_get, apt_cache = tool_path("apt-get"), tool_path("apt-cache")
    stanzas: dict[str, str] = {}

    def show(package: str) -> str:
        argv = [apt_cache, *apt.options(), "show", "--no-all-versions", package]
        stanzas[package] = run_checked(argv, f"apt-cache show {package} ({suite})")
        return stanzas[package]

    found = kernel_packages(show, META_PACKAGE)
    with tempfile.TemporaryDirectory(dir=kdir, prefix="download-") as tmp:
        debs = _download(apt_get, apt, found, stanzas, Path(tmp), progress)
        progress.stage(f"unpacking {', '.join(deb.name for deb in debs.values())} and building modules.dep")
        _unpack(list(debs.values()), kdir, found.release)
    return {
        "package": found.image,
        "version": stanza_field(stanzas[found.image], "Version"),
        "release": found.release,
        "debs_sha256": {package: stanza_field(stanzas[package], "SHA256") for package in found.payload},
    }


def updated_apt(directory: Path, suite: str) -> PrivateApt:
    """A private apt for suite in directory, from this machine's Debian mirror, its package lists fetched."""
    mirror = machine_mirror()
    if mirror is None:
        raise VmError("no Debian mirror found in /etc/apt/sources.list{,.d}; name one with LAB_DEBIAN_MIRROR=URI")
    apt = PrivateApt(directory, mirror, suite)
    apt.prepare()
    _update(tool_path("apt-get"), apt, suite, mirror)
    return apt


def _download(
    apt_get: str, apt: PrivateApt, found: KernelPackages, stanzas: dict[str, str], tmp: Path, progress: Progress
) -> dict[str, Path]:
    """apt-get download the kernel's packages into tmp; each file checked against its stanza's SHA256."""
    argv = [apt_get, *apt.options(), "-q", "download", *found.payload]
    size = sum(int(stanza_field(stanzas[package], "Size") or 0) for package in found.payload)
    done = watch_download(argv, tmp, f"downloading {', '.join(found.payload)}", size, progress)
    if done.returncode != 0:
        said = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise VmError(
            f"apt-get download {' '.join(found.payload)} ({apt.suite}) failed (exit {done.returncode}):\n{said}"
        )
    debs = {}
    for package in found.payload:
        deb = next(iter(sorted(tmp.glob(f"{package}_*.deb"))), None)
        if deb is None:
            raise VmError(f"apt-get download {package} ({apt.suite}) left no .deb")
        # apt checked the file against the signed index already; say so where it can be seen.
        digest, wanted = sha256_file(deb), stanza_field(stanzas[package], "SHA256")
        if digest != wanted:
            raise VmError(f"{deb.name}: sha256 {digest} is not the {wanted} of {apt.suite}'s index")
        debs[package] = deb
    return debs


def _update(apt_get: str, apt: PrivateApt, suite: str, mirror: str) -> None:
    """Fetch the suite's package lists; apt-get update may exit 0 having fetched nothing, so look."""
    what = f"apt-get update for {suite} from {mirror}"
    try:
        proc = subprocess.run([apt_get, *apt.options(), "-q", "update"], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        raise VmError(f"{what} took longer than 15 minutes") from None
    if proc.returncode != 0 or not any((apt.root / "lists").glob("*_Packages*")):
        said = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith(("E:", "W:", "Err"))]
        raise VmError(f"{what} fetched no package list:\n" + "\n".join(said[-5:] or ["(apt said nothing)"]))


def _unpack(debs: list[Path], kdir: Path, release: str) -> None:
    """Extract the packages beside the final tree, run depmod there, then move it into place in one rename."""
    staging = kdir / "tree.new"
    shutil.rmtree(staging, ignore_errors=True)
    for deb in debs:
        run_checked([tool_path("dpkg-deb"), "-x", str(deb), str(staging)], f"dpkg-deb -x {deb.name}")
    if not (staging / "lib" / "modules" / release).is_dir() and (staging / "usr" / "lib" / "modules").is_dir():
        # Newer packages ship /usr/lib/modules; depmod -b and this cache look under lib/modules.
        (staging / "lib").mkdir(exist_ok=True)
        (staging / "lib" / "modules").symlink_to("../usr/lib/modules")
    run_checked([tool_path("depmod"), "-b", str(staging), release], f"depmod -b {staging} {release}")
    shutil.rmtree(kdir / "tree", ignore_errors=True)
    staging.rename(kdir / "tree")
