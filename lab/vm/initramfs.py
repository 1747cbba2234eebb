"""initramfs: a small busybox initramfs whose /init mounts the host's root over 9p and runs the job in it.

The guest sees the host's whole filesystem read-only (9p tag `root`), made writable in RAM by an overlay so
tools and tests may write where they like (nothing reaches the host). /run is a fresh tmpfs; /tmp shows
the host's through the overlay.
The kernel's own modules (cached on the host) appear at /lib/modules/<release> and its build config at
/boot/config-<release>, so modprobe and `lab doctor` inside see the guest kernel, not the host's.
A second, writable 9p share (tag `job`, at /run/lab-vm) brings the command in (cmd.sh, token) and takes its
exit status out (status); the command's output goes to the serial console between marker lines.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

from lab.vm.console import EXIT, FAIL, START
from lab.vm.errors import VmError, missing_tool
from lab.vm.files import intact, write_checked
from lab.vm.kernels import Kernel
from lab.vm.modules import copy_uncompressed, modules_to_load
from lab.vm.progress import Progress

GUEST_JOB_DIR = "/run/lab-vm"
GUEST_INIT_DIR = "/run/lab-vm-init"  # busybox and stage 2, in the guest's tmpfs
# Larger 9p messages mean fewer round trips, each of which costs an emulated interrupt; 512000 is the most
# the virtio transport takes.
MSIZE = 512000


def init_script(release: str, modules: list[str], moddir: str, config: str | None) -> str:
    """The guest's /init (busybox sh): PID 1 until the command ends, then it powers the VM off."""
    q = shlex.quote
    boot_config = f"mkdir -p /newroot/boot && cp /lower{q(config)} /newroot/boot/config-{q(release)}" if config else ":"
    return f"""#!/bin/busybox sh
# lab vm /init: set the guest up, run {GUEST_JOB_DIR}/cmd.sh in the host's root, report its status, power off.
/bin/busybox --install -s /bin
export PATH=/bin
fail() {{ echo "{FAIL} $*"; sync; poweroff -f; sleep 10; }}

mount -t proc proc /proc && mount -t sysfs sysfs /sys && mount -t devtmpfs devtmpfs /dev || fail "mount proc/sys/dev"
exec </dev/console >/dev/console 2>&1
for m in {" ".join(q(m) for m in modules)}; do insmod /modules/$m.ko || fail "insmod $m"; done

# The virtio devices may register a moment after their driver loads: try a few times.
mount9p() {{
    for i in 1 2 3 4 5 6 7 8 9; do
        mount -t 9p -o "trans=virtio,version=9p2000.L,msize={MSIZE},$3" "$1" "$2" 2>/dev/null && return 0
        usleep 200000
    done
    mount -t 9p -o "trans=virtio,version=9p2000.L,msize={MSIZE},$3" "$1" "$2"
}}
mkdir -p /lower /job /scratch /newroot
mount9p root /lower ro,cache=loose || fail "mount the host root (9p tag root)"
mount9p job /job rw || fail "mount the job share (9p tag job)"
token=$(cat /job/token)

mount -t tmpfs -o mode=0755 scratch /scratch && mkdir /scratch/upper /scratch/work || fail "tmpfs for the overlay"
mount -t overlay -o lowerdir=/lower,upperdir=/scratch/upper,workdir=/scratch/work overlay /newroot \\
    || fail "overlay over the host root"
# /tmp stays the host's, seen through the RAM overlay (a checkout there must stay visible); /run is fresh:
# the host's namespaces and lab pid files there mean nothing to the guest.
mount -t tmpfs -o mode=0755 tmpfs /newroot/run || fail "tmpfs on /run"
mount -t proc proc /newroot/proc && mount -t sysfs sysfs /newroot/sys && mount -t devtmpfs devtmpfs /newroot/dev \\
    || fail "proc/sys/dev in the new root"
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts; mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm

# The guest kernel's modules and config where modprobe and lab doctor look for them.
mkdir -p /newroot/lib/modules/{q(release)} && mount --bind /lower{q(moddir)} /newroot/lib/modules/{q(release)} \\
    || fail "bind the modules of {release}"
{boot_config} || fail "copy the kernel config"
mkdir -p /newroot{GUEST_JOB_DIR} && mount --move /job /newroot{GUEST_JOB_DIR} || fail "move the job share"
mkdir -p /newroot{GUEST_INIT_DIR} && cp /bin/busybox /stage2 /newroot{GUEST_INIT_DIR}/ || fail "copy stage 2"
hostname lab-vm

# The new root becomes the real one, so the kernel's own helpers (modprobe on demand) run the host's tools.
exec switch_root /newroot {GUEST_INIT_DIR}/busybox sh {GUEST_INIT_DIR}/stage2 "$token"
fail "switch_root"
"""


GUEST_MODULES = ("br_netfilter", "ip_vs", "ip_vs_rr", "ip_vs_sh", "ip_vs_wrr", "xt_ipvs", "dummy", "ipip", "vxlan")


def stage2_script() -> str:
    """PID 1 after switch_root: run the command, hand its status out, power off."""
    bb = f"{GUEST_INIT_DIR}/busybox"
    return f"""# lab vm stage 2 (busybox sh, PID 1 in the host's root): $1 is this run's token.
echo 1 >/proc/sys/kernel/printk  # from here on only emergencies reach the console: it carries the output
# A lab host, as a node would be: the modules kube-proxy and the CNI use are loaded before the command, so
# nothing the command does (doctor's checks included) changes the guest's own namespace half-way through.
modprobe -a {" ".join(GUEST_MODULES)} 2>/dev/null
echo "{START} $1"
/bin/sh {GUEST_JOB_DIR}/cmd.sh </dev/null
status=$?
echo "$status" >{GUEST_JOB_DIR}/status
{bb} sync
echo "{EXIT} $1 $status"
{bb} poweroff -f
"""


def is_static_elf(path: Path) -> bool:
    """True for an ELF executable without a program interpreter (PT_INTERP): it runs in an empty initramfs."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:  # 64-bit only: the guest is amd64
        return False
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    types = [struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)]
    return 3 not in types  # PT_INTERP


def _busybox() -> Path:
    found = shutil.which("busybox")
    if found is None:
        raise missing_tool("busybox")
    path = Path(found).resolve()
    if not is_static_elf(path):
        raise VmError(f"{path} is linked dynamically and cannot run in the initramfs: apt-get install busybox-static")
    return path


def build(kernel: Kernel) -> Path:
    """The initramfs for `kernel`, built once per content and kept in the kernel's cache directory."""
    busybox = _busybox()
    cpio = shutil.which("cpio")
    if cpio is None:
        raise missing_tool("cpio")
    modules = modules_to_load(kernel.modules)
    config = str(kernel.config) if kernel.config and kernel.config.is_file() else None
    script = init_script(kernel.release, [name for name, _ in modules], str(kernel.modules), config)
    stage2 = stage2_script()
    stats = "".join(f"{path}:{path.stat().st_size}:{path.stat().st_mtime_ns}\n" for _, path in modules)
    key = hashlib.sha256(script.encode() + stage2.encode() + stats.encode() + busybox.read_bytes()).hexdigest()[:16]
    target = kernel.cache / f"initramfs-{key}.cpio"
    if intact(target):  # else missing, or not what was built: build it again
        return target
    kernel.cache.mkdir(parents=True, exist_ok=True)
    Progress().stage(f"building the initramfs for {kernel.release} ({len(modules)} modules)")
    with tempfile.TemporaryDirectory(prefix="lab-initramfs-") as tmp:
        root = Path(tmp)
        for sub in ("bin", "modules", "proc", "sys", "dev"):
            (root / sub).mkdir()
        shutil.copy2(busybox, root / "bin" / "busybox")
        for name, path in modules:
            copy_uncompressed(path, root / "modules" / f"{name}.ko")
        (root / "init").write_text(script)
        (root / "init").chmod(0o755)
        (root / "stage2").write_text(stage2)
        archive = _cpio(cpio, root)
    # Uncompressed: a few MB more for QEMU to load, but no gunzip under emulation at every boot.
    write_checked(target, archive)
    for stale in kernel.cache.glob("initramfs-*"):  # built by an older init script
        if not stale.name.startswith(target.name):  # the archive and its digest
            stale.unlink(missing_ok=True)
    return target


def _cpio(cpio: str, root: Path) -> bytes:
    """A newc archive of root's files, all owned by root."""
    names = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    proc = subprocess.run(
        [cpio, "--quiet", "-o", "-H", "newc", "-R", "0:0"],
        input="\n".join(names).encode(),
        cwd=root,
        capture_output=True,
    )
    if proc.returncode != 0:
        raise VmError(f"cpio failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout
