"""cli: `lab vm run` and `lab vm matrix`, added to lab's argument parser by `add_commands`."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

from lab.argtypes import count, seconds
from lab.realize.terminate import handle_sigterm
from lab.report.literal import literal
from lab.vm.errors import VmError, VmPanic, VmTimeout
from lab.vm.kernels import DEFAULT, RELEASES
from lab.vm.qemu import ACCELS
from lab.vm.run import VmResult, run_in_vm

# Exit statuses of `lab vm run` when the command gave none (as timeout(1) and env(1) use them).
EXIT_TIMEOUT, EXIT_PANIC, EXIT_ERROR = 124, 125, 2

err = Console(stderr=True, highlight=False, soft_wrap=True)  # messages are not tables: never wrap them


def add_commands(sub: argparse._SubParsersAction) -> None:
    vm = sub.add_parser("vm", help="run a command under another kernel in QEMU (stock Debian kernels)")
    vm_sub = vm.add_subparsers(dest="vm_command", required=True)

    run = vm_sub.add_parser(
        "run",
        help="run CMD as root under a kernel, in this machine's files; exit with its status",
        description="Boot KERNEL under QEMU and run CMD in it as root, in the host's files (read-only, made "
        f"writable in RAM), in the current directory. Kernels: {', '.join(RELEASES)} (downloaded once, cached "
        "under $LAB_CACHE or ~/.cache/lab), or a vmlinuz path with --modules. Exits with CMD's status; "
        f"{EXIT_TIMEOUT} on timeout, {EXIT_PANIC} on a kernel panic, {EXIT_ERROR} when the VM could not run it.",
    )
    run.add_argument("--kernel", default=DEFAULT, metavar="SPEC", help=f"kernel to boot (default {DEFAULT})")
    run.add_argument("--modules", metavar="DIR", help="with a vmlinuz path: its /lib/modules/<release>")
    _common(run)
    run.set_defaults(func=cmd_run)

    matrix = vm_sub.add_parser(
        "matrix",
        help="run the same CMD under several kernels and tabulate the results",
        description="Run CMD under each kernel in turn, streaming its output, then print a table.",
        epilog=f"exit status: 0 CMD exited 0 under every kernel; 1 it did not under one or more (or a VM failed); "
        f"{EXIT_ERROR} nothing was run (not root, no CMD).",
    )
    matrix.add_argument(
        "--kernels", default=",".join(RELEASES), metavar="A,B", help="comma-separated kernel SPECs (Debian releases)"
    )
    matrix.add_argument("-q", "--quiet", action="store_true", help="print only the table, not each run's output")
    _common(matrix)
    matrix.set_defaults(func=cmd_matrix)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mem", type=count(65536), default=2048, metavar="MB", help="guest memory (2048)")
    parser.add_argument(
        "--timeout", type=seconds(86400), default=900, metavar="S", help="kill the VM after S seconds (900)"
    )
    parser.add_argument("--accel", choices=ACCELS, default="auto", help="auto: KVM if it can boot the kernel, else tcg")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...", help="the command to run")


def _command(args: argparse.Namespace) -> list[str]:
    """CMD from the command line, once it is known that the VM can be run at all."""
    if os.geteuid() != 0:
        # The guest mounts the host's / and runs CMD as root in it; only root may hand that out.
        err.print(f"lab vm {args.vm_command} needs root: it runs CMD as root on this machine's files. Use sudo.")
        sys.exit(EXIT_ERROR)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        usage = f"lab vm {args.vm_command} [options] -- CMD..."
        err.print(literal(f"lab vm {args.vm_command}: no command given: {usage}"))
        sys.exit(EXIT_ERROR)
    return cmd


def _print_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _report_error(exc: VmError) -> int:
    if exc.console and not exc.command_started:
        err.print(literal(exc.console, "dim"))
    err.print(Text("lab vm: ", style="red") + literal(exc))
    if isinstance(exc, VmTimeout):
        return EXIT_TIMEOUT
    return EXIT_PANIC if isinstance(exc, VmPanic) else EXIT_ERROR


def cmd_run(args: argparse.Namespace) -> int:
    cmd = _command(args)
    handle_sigterm()  # a killed `lab vm` kills its QEMU (run_qemu's finally), not leave it running for minutes
    try:
        result = run_in_vm(
            cmd,
            kernel=args.kernel,
            mem_mb=args.mem,
            timeout=args.timeout,
            modules=args.modules,
            accel=args.accel,
            on_output=_print_line,
        )
    except VmError as exc:
        return _report_error(exc)
    err.print(
        f"[dim]lab vm: {result.kernel_release}: boot {result.boot_seconds:.1f} s, "
        f"command {result.command_seconds:.1f} s, exit {result.exit_status}[/dim]"
    )
    return result.exit_status


@dataclass(frozen=True)
class Row:
    kernel: str
    result: VmResult | None
    error: VmError | None = None


def cmd_matrix(args: argparse.Namespace) -> int:
    cmd = _command(args)
    handle_sigterm()
    kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
    rows = []
    out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)  # as lab's other reports
    for kernel in kernels:
        if not args.quiet:
            out.rule(literal(f"{kernel}: {' '.join(cmd)}"))
        try:
            result = run_in_vm(
                cmd,
                kernel=kernel,
                mem_mb=args.mem,
                timeout=args.timeout,
                accel=args.accel,
                on_output=None if args.quiet else _print_line,
            )
            rows.append(Row(kernel, result))
        except VmError as exc:
            if not args.quiet:
                _report_error(exc)
            rows.append(Row(kernel, None, exc))
    out.print(matrix_table(rows))
    return 0 if all(r.result is not None and r.result.exit_status == 0 for r in rows) else 1


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _error_kind(error: VmError | None) -> str:
    if isinstance(error, VmTimeout):
        return "timeout"
    return "panic" if isinstance(error, VmPanic) else "error"


def _first_line(error: VmError | None) -> str:
    return str(error).splitlines()[0] if error is not None and str(error) else ""


def matrix_table(rows: list[Row]) -> Table:
    table = Table(title="lab vm matrix", title_justify="left")
    table.add_column("kernel", no_wrap=True)
    table.add_column("release", no_wrap=True)
    for name in ("exit", "boot s", "command s"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("last line of output")
    for row in rows:
        if row.result is None:
            kind = (
                "timeout"
                if isinstance(row.error, VmTimeout)
                else "panic"
                if isinstance(row.error, VmPanic)
                else "error"
            )
            table.add_row(literal(row.kernel), "", f"[red]{kind}[/red]", "", "", literal(_first_line(row.error)))
            continue
        r = row.result
        status = f"[green]{r.exit_status}[/green]" if r.exit_status == 0 else f"[red]{r.exit_status}[/red]"
        table.add_row(
            literal(row.kernel),
            literal(r.kernel_release),
            status,
            f"{r.boot_seconds:.1f}",
            f"{r.command_seconds:.1f}",
            literal(_last_line(r.output)),
        )
    return table
