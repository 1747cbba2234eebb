"""vmlinux: the uncompressed kernel inside a bzImage, so QEMU can boot it directly (PVH) under emulation.

A bzImage decompresses itself before it starts; under TCG that takes 2-3 s of every boot. The ELF vmlinux
inside, when its Xen notes carry a PVH entry point (CONFIG_PVH, as Debian builds it), boots at once.
Extracted once per kernel and kept beside the cached initramfs; any doubt and the bzImage is used as it is
(LAB_VM_NO_PVH=1 forces that).
"""

from __future__ import annotations

import lzma
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

from lab.vm.files import intact, write_checked

# Debian 12 packs its kernels with xz, Debian 13 with zstd (unpacked by the zstd tool: Python 3.11 has no zstd).
_MAGICS = ((b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"\x1f\x8b\x08", "gzip"))
_PT_NOTE = 4
_XEN_ELFNOTE_PHYS32_ENTRY = 18


def _decompress(data: bytes, kind: str) -> bytes:
    if kind == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data)
    if kind == "zstd":
        zstd = shutil.which("zstd")
        # zstd complains about the bytes after the frame (exit 1) but has written the frame by then.
        return subprocess.run([zstd, "-dcq"], input=data, capture_output=True).stdout if zstd else b""
    return zlib.decompressobj(wbits=31).decompress(data)  # gzip; trailing bytes after the stream are ignored


def extract(bzimage: bytes) -> bytes | None:
    """The ELF kernel a bzImage carries, or None when its payload is not found in a format we can unpack."""
    for magic, kind in _MAGICS:
        start = bzimage.find(magic)
        while start != -1:
            try:
                elf = _decompress(bzimage[start:], kind)
            except (lzma.LZMAError, zlib.error, EOFError):
                elf = b""
            if elf[:4] == b"\x7fELF":
                return elf
            start = bzimage.find(magic, start + 1)
    return None


def notes(elf: bytes) -> list[tuple[str, int]]:
    """(name, type) of every note in the PT_NOTE segments of a 64-bit little-endian ELF."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        return []
    (phoff,) = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    found = []
    for i in range(phnum):
        ptype, _flags, offset, _vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
        if ptype == _PT_NOTE:
            found += _segment_notes(elf[offset : offset + filesz])
    return found


def _segment_notes(segment: bytes) -> list[tuple[str, int]]:
    found, pos = [], 0
    while pos + 12 <= len(segment):
        namesz, descsz, ntype = struct.unpack_from("<III", segment, pos)
        name = segment[pos + 12 : pos + 12 + namesz].rstrip(b"\0").decode(errors="replace")
        found.append((name, ntype))
        pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return found


def has_pvh_entry(elf: bytes) -> bool:
    return ("Xen", _XEN_ELFNOTE_PHYS32_ENTRY) in notes(elf)


def bootable_image(vmlinuz: Path, cache: Path) -> Path:
    """A PVH-bootable vmlinux extracted from `vmlinuz` (cached in `cache`), else `vmlinuz` itself."""
    if os.environ.get("LAB_VM_NO_PVH"):
        return vmlinuz
    key = f"{vmlinuz.stat().st_size}-{int(vmlinuz.stat().st_mtime)}"
    target, refused = cache / f"vmlinux-{key}", cache / f"vmlinux-{key}.none"
    if intact(target):  # else missing, or not what was extracted: extract it again
        return target
    if refused.is_file():
        return vmlinuz
    cache.mkdir(parents=True, exist_ok=True)
    for stale in cache.glob("vmlinux-*"):  # of an earlier image at the same path
        stale.unlink(missing_ok=True)
    elf = extract(vmlinuz.read_bytes())
    if elf is None or not has_pvh_entry(elf):
        refused.write_text(f"{vmlinuz}: no PVH-bootable ELF inside; QEMU boots the bzImage\n")
        return vmlinuz
    write_checked(target, elf)
    return target
