"""qemu: boot a kernel with the lab initramfs under QEMU, stream its console, enforce the time limit.

Accelerator "auto" (the default) tries KVM when /dev/kvm opens, with a short limit on the boot, and falls back
to TCG (software emulation) if KVM cannot start that kernel before the command: on a nested host KVM may be
present yet unable to run a stock kernel (QEMU aborts on an MSR, or the guest hangs). The failure is remembered
per kernel, so later runs go straight to TCG.
"""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lab.describe.readfile import ReadError, read_text
from lab.vm.console import Console, Phase, clean_line
from lab.vm.errors import VmError, VmPanic, VmTimeout, missing_tool

QEMU = "qemu-system-x86_64"
# After the exit marker the guest only syncs and powers off; a VM still alive after this long is killed.
_POWEROFF_GRACE = 15.0


@dataclass(frozen=True)
class Boot:
    vmlinuz: Path
    initrd: Path
    job: Path  # host directory shared writable as 9p tag `job`
    mem_mb: int = 2048
    cpus: int = 2
    accel: str = "tcg"


def kvm_usable() -> bool:
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
    except OSError:
        return False
    os.close(fd)
    return True


ACCELS = ("auto", "tcg", "kvm")
# How long a KVM boot may take before "auto" gives up on it: KVM boots in about a second when it works.
KVM_BOOT_LIMIT = 30.0


def accel_plan(requested: str, kvm_available: bool, kvm_failed_before: bool) -> list[str]:
    """The accelerators to try, in order."""
    if requested not in ACCELS:
        raise VmError(f"unknown accelerator {requested!r}: use {', '.join(ACCELS)}")
    if requested == "kvm" and not kvm_available:
        raise VmError("accelerator kvm asked for, but /dev/kvm cannot be opened")
    if requested == "auto":
        return ["kvm", "tcg"] if kvm_available and not kvm_failed_before else ["tcg"]
    return [requested]


def qemu_argv(qemu: str, boot: Boot) -> list[str]:
    append = "console=ttyS0 panic=-1 quiet loglevel=3 8250.nr_uarts=1"
    return [
        qemu,
        "-nographic",
        "-no-reboot",
        "-accel",
        boot.accel,
        "-cpu",
        "max" if boot.accel == "tcg" else "host",
        "-m",
        str(boot.mem_mb),
        "-smp",
        str(boot.cpus),
        "-nic",
        "none",
        "-kernel",
        str(boot.vmlinuz),
        "-initrd",
        str(boot.initrd),
        "-append",
        append,
        "-virtfs",
        "local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap",
        "-virtfs",
        f"local,path={boot.job},mount_tag=job,security_model=none,multidevs=remap",
    ]


@dataclass
class Run:
    """What one boot produced, with host-side times of the markers."""

    console: Console
    returncode: int | None
    started: float  # QEMU start (time.monotonic())
    command_started: float | None = None
    command_ended: float | None = None
    timed_out: bool = False


def boot(
    boot: Boot,
    token: str,
    timeout: float,
    on_output: Callable[[str], None] | None = None,
    boot_timeout: float | None = None,
) -> Run:
    """Run QEMU until the guest powers off or `timeout` seconds pass; the console parsed as it comes.

    boot_timeout, when given, limits the time until the command starts.
    """
    qemu = shutil.which(QEMU)
    if qemu is None:
        raise missing_tool(QEMU)
    run = Run(Console(token), None, time.monotonic())
    stderr_path = boot.job / "qemu.stderr"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(qemu_argv(qemu, boot), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr)
    try:
        _pump(proc, run, timeout, on_output, boot_timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    run.returncode = proc.returncode
    _check(run, stderr_path, timeout if run.command_started or boot_timeout is None else boot_timeout)
    return run


def _pump(
    proc: subprocess.Popen,
    run: Run,
    timeout: float,
    on_output: Callable[[str], None] | None,
    boot_timeout: float | None,
) -> None:
    """Read the console line by line until QEMU exits, the time is up, or the guest is done and lingers."""
    assert proc.stdout is not None
    deadline = run.started + timeout
    boot_deadline = run.started + boot_timeout if boot_timeout is not None else deadline
    fd = proc.stdout.fileno()
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    pending = b""
    while True:
        now = time.monotonic()
        limit = deadline if run.command_ended is None else min(deadline, run.command_ended + _POWEROFF_GRACE)
        if run.command_started is None:
            limit = min(limit, boot_deadline)
        if now >= limit:
            run.timed_out = run.command_ended is None
            return
        if not selector.select(timeout=min(1.0, limit - now)):
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            _take_line(run, clean_line(raw), on_output)
    if pending:
        _take_line(run, clean_line(pending), on_output)


def _take_line(run: Run, line: str, on_output: Callable[[str], None] | None) -> None:
    before = run.console.phase
    text = run.console.feed(line)
    now = time.monotonic()
    if before is Phase.BOOT and run.console.phase is not Phase.BOOT:
        run.command_started = now
    if run.console.phase is Phase.DONE and run.command_ended is None:
        run.command_ended = now
    if text is not None and on_output is not None:
        on_output(text)


def _written_status(path: Path) -> int | None:
    """The exit status /init wrote to the job share (the guest's root may have written anything there)."""
    try:
        return int(read_text(path, limit=16, caller=False).strip())
    except (ReadError, ValueError):
        return None


def _check(run: Run, stderr_path: Path, timeout: float) -> None:
    """Turn a run that ended without an exit marker into the error that says why."""
    console = run.console
    status_file = stderr_path.parent / "status"
    if console.phase is not Phase.DONE and (status := _written_status(status_file)) is not None:
        # The console lost the exit marker, but /init wrote the status to the job share first.
        console.exit_status, console.phase = status, Phase.DONE
        run.command_ended = run.command_ended or time.monotonic()
        run.command_started = run.command_started or run.command_ended  # lost too: no split to tell
    if console.phase is Phase.DONE:
        return
    tail, started = console.last_lines(), console.phase is Phase.COMMAND
    if console.panic:
        raise VmPanic(f"the guest kernel panicked: {console.panic}", tail, started)
    if console.failure:
        raise VmError(f"the guest could not be set up: {console.failure}", tail, started)
    if run.timed_out:
        where = "while the command ran" if started else "before the command started"
        raise VmTimeout(f"time limit of {round(timeout, 1):g} s reached {where}; the VM was killed", tail, started)
    said = stderr_path.read_text(errors="replace").strip()
    what = f"QEMU exited with status {run.returncode}" + (f": {said}" if said else "")
    raise VmError(f"{what}, before the command {'ended' if started else 'started'}", tail, started)
