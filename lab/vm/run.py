"""run: `run_in_vm` — run one command as root under another kernel, in the host's filesystem, and report back."""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from lab.vm import initramfs, kernels, qemu, vmlinux
from lab.vm.errors import VmError
from lab.vm.initramfs import GUEST_JOB_DIR

# Environment the command keeps from the caller; everything else starts clean, as under sudo.
PASSED = ("PATH", "HOME", "VIRTUAL_ENV", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH", "PYTEST_ADDOPTS", "CI")
# Host directories the guest covers with its own tmpfs: a cwd under them would not be there.
_HIDDEN = ("/run", "/proc", "/sys", "/dev")


@dataclass(frozen=True)
class VmResult:
    exit_status: int
    output: str
    kernel_release: str
    boot_seconds: float  # QEMU start until the command starts
    command_seconds: float  # the command's own time


def guest_environment(env: Mapping[str, str], release: str, venv_bin: str | None, term: str) -> dict[str, str]:
    """What the command's environment is in the guest: the essentials of `env`, the venv first on PATH."""
    kept = {k: v for k, v in env.items() if k in PASSED or k.startswith("LAB_")}
    path = kept.get("PATH") or "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    parts = path.split(":")
    if venv_bin and venv_bin not in parts:
        parts.insert(0, venv_bin)
    for sbin in ("/usr/local/sbin", "/usr/sbin", "/sbin"):  # root's tools, which a user's PATH may lack
        if sbin not in parts:
            parts.append(sbin)
    kept.update(
        PATH=":".join(parts),
        HOME=kept.get("HOME", "/root"),
        TERM=term,
        PYTHONDONTWRITEBYTECODE="1",  # the guest's writes vanish anyway; don't spend time on them
        LAB_VM="1",
        LAB_VM_KERNEL=release,
    )
    return kept


def command_script(argv: list[str], cwd: Path, env: Mapping[str, str], tty: tuple[int, int] | None = None) -> str:
    """The guest's cmd.sh: enter cwd, set the environment, run the command (127 if it is not found).

    The guest's output travels on its serial console, a terminal. With `tty` (columns, rows) the command
    writes to it directly, sized like the caller's terminal. Without, the caller's output is no terminal,
    so the command's is not either: it goes through a pipe, and the command behaves as it would here
    (no colours, its own idea of width), Python unbuffered so the output still streams.
    """
    command = " ".join(shlex.quote(a) for a in argv)
    lines = ["# written by lab vm run", f"cd {shlex.quote(str(cwd))} || exit 126"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    if tty is not None:
        lines.append(f"stty -F /dev/console cols {tty[0]} rows {tty[1]} 2>/dev/null")
        lines.append(f"exec {command}")
    else:
        status = f"{GUEST_JOB_DIR}/cmd.status"
        lines.append("export PYTHONUNBUFFERED=1")
        lines.append(f"{{ {command}; echo $? >{status}; }} 2>&1 | cat")
        lines.append(f'exit "$(cat {status} 2>/dev/null || echo 125)"')
    return "\n".join(lines) + "\n"


def _venv_bin() -> str | None:
    """The bin directory of the virtualenv this Python runs in, if any: the command likely wants its tools."""
    return str(Path(sys.prefix) / "bin") if sys.prefix != sys.base_prefix else None


def _terminal() -> tuple[str, tuple[int, int] | None]:
    """TERM and terminal size for the guest: the caller's terminal, or none when its output is no terminal."""
    if sys.stdout.isatty():
        size = shutil.get_terminal_size()
        return os.environ.get("TERM", "dumb"), (size.columns, size.lines)
    return "dumb", None


def _check_cwd(cwd: Path) -> Path:
    cwd = cwd.resolve()
    for hidden in _HIDDEN:
        if cwd == Path(hidden) or Path(hidden) in cwd.parents:
            raise VmError(f"the working directory {cwd} is under {hidden}, which the guest replaces: cd elsewhere")
    return cwd


def run_in_vm(
    argv: list[str],
    kernel: str = kernels.DEFAULT,
    mem_mb: int = 2048,
    timeout: float = 900,
    cwd: Path | None = None,
    *,
    modules: str | Path | None = None,
    accel: str = "auto",
    on_output: Callable[[str], None] | None = None,
) -> VmResult:
    """Boot `kernel` under QEMU and run argv in it as root, in the host's files (read-only, overlaid in RAM).

    on_output gets each line of the command's output as it arrives. Raises VmError (VmPanic, VmTimeout) when
    there is no exit status to report.
    """
    if not argv:
        raise VmError("no command given")
    workdir = _check_cwd(cwd or Path.cwd())
    found = kernels.resolve(kernels.parse_spec(kernel, modules))
    initrd = initramfs.build(found)
    image = vmlinux.bootable_image(found.vmlinuz, found.cache)
    term, tty = _terminal()
    env = guest_environment(os.environ, found.release, _venv_bin(), term)
    token = secrets.token_hex(8)
    with tempfile.TemporaryDirectory(prefix="lab-vm-job-") as job:
        Path(job, "token").write_text(token + "\n")
        Path(job, "cmd.sh").write_text(command_script(argv, workdir, env, tty))
        spec = qemu.Boot(image, initrd, Path(job), mem_mb=mem_mb)
        run = _boot_with_fallback(spec, token, timeout, on_output, accel, found.cache / "kvm-failed")
    assert run.console.exit_status is not None and run.command_started is not None
    ended = run.command_ended or run.command_started
    return VmResult(
        exit_status=run.console.exit_status,
        output="\n".join(run.console.output) + ("\n" if run.console.output else ""),
        kernel_release=found.release,
        boot_seconds=round(run.command_started - run.started, 2),
        command_seconds=round(ended - run.command_started, 2),
    )


def _boot_with_fallback(
    spec: qemu.Boot,
    token: str,
    timeout: float,
    on_output: Callable[[str], None] | None,
    accel: str,
    kvm_failed: Path,
) -> qemu.Run:
    """Boot with each accelerator of the plan until one gets the command started; remember a KVM failure."""
    plan = qemu.accel_plan(accel, qemu.kvm_usable(), kvm_failed.is_file())
    deadline = time.monotonic() + timeout
    for name in plan[:-1]:
        try:
            return qemu.boot(replace(spec, accel=name), token, timeout, on_output, boot_timeout=qemu.KVM_BOOT_LIMIT)
        except VmError as exc:
            if exc.command_started:
                raise  # its output went out already: running it again would repeat it
            kvm_failed.write_text(f"{name} could not start this kernel; lab vm uses tcg for it\n{exc}\n")
    remaining = timeout if len(plan) == 1 else max(1.0, deadline - time.monotonic())
    return qemu.boot(replace(spec, accel=plan[-1]), token, remaining, on_output)
