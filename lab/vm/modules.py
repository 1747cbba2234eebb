"""modules: which kernel modules the initramfs must insmod before it can mount the host's root, and in what order.

A stock Debian kernel builds 9p, virtio-pci and overlayfs as modules. busybox's insmod loads one file and knows
nothing of dependencies, so the order comes from the kernel's own modules.dep, and compressed modules are
unpacked on the host (busybox may lack the decompressor the kernel's packagers chose).
"""

from __future__ import annotations

import gzip
import lzma
import shutil
import subprocess
from pathlib import Path

from lab.vm.errors import VmError

# What the guest's /init needs: the PCI transport, 9p over virtio, and overlayfs for a writable root.
NEEDED = ("virtio_pci", "9pnet_virtio", "9p", "overlay")


def module_name(path: str) -> str:
    """`kernel/fs/9p/9p.ko.xz` -> `9p`; - and _ are the same to the kernel."""
    return path.rsplit("/", 1)[-1].split(".ko", 1)[0].replace("-", "_")


def parse_modules_dep(text: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (path relative to the modules dir, names of the modules it needs)."""
    table = {}
    for line in text.splitlines():
        if ":" not in line:
            continue
        path, deps = line.split(":", 1)
        table[module_name(path)] = (path.strip(), [module_name(d) for d in deps.split()])
    return table


def parse_builtin(text: str) -> set[str]:
    return {module_name(line) for line in text.split() if line}


def load_order(wanted: tuple[str, ...], deps: dict[str, tuple[str, list[str]]], builtin: set[str]) -> list[str]:
    """Every module `wanted` needs, each after its dependencies; built-in ones are skipped."""
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in order or name in builtin:
            return
        if name not in deps:
            raise VmError(f"the guest kernel has neither a module nor a built-in {name} (needed to mount the host)")
        if name in visiting:
            raise VmError(f"modules.dep has a dependency cycle through {name}")
        visiting.add(name)
        for dep in deps[name][1]:
            visit(dep)
        order.append(name)

    for name in wanted:
        visit(name)
    return order


def modules_to_load(moddir: Path, wanted: tuple[str, ...] = NEEDED) -> list[tuple[str, Path]]:
    """(name, file) of each module the initramfs loads, in load order."""
    try:
        deps = parse_modules_dep((moddir / "modules.dep").read_text())
    except OSError as exc:
        raise VmError(f"{moddir}/modules.dep is missing ({exc.strerror}): run depmod -b BASE {moddir.name}") from None
    builtin_file = moddir / "modules.builtin"
    builtin = parse_builtin(builtin_file.read_text()) if builtin_file.exists() else set()
    return [(name, moddir / deps[name][0]) for name in load_order(wanted, deps, builtin)]


def copy_uncompressed(source: Path, target: Path) -> None:
    """Copy a module file as a plain .ko, whatever it was compressed with."""
    if source.suffix == ".xz":
        target.write_bytes(lzma.decompress(source.read_bytes()))
    elif source.suffix == ".gz":
        target.write_bytes(gzip.decompress(source.read_bytes()))
    elif source.suffix == ".zst":
        zstd = shutil.which("zstd")
        if zstd is None:
            raise VmError(f"{source.name} is zstd-compressed: apt-get install zstd")
        target.write_bytes(subprocess.run([zstd, "-dc", str(source)], capture_output=True, check=True).stdout)
    else:
        shutil.copyfile(source, target)
