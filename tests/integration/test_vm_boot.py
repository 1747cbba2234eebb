"""lab vm boots Debian's stock kernel under QEMU and runs commands in it (seconds per boot: keep these few).

The first run downloads the kernel package into the cache (~/.cache/lab or $LAB_CACHE); later runs reuse it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.pytest_output import failure_summary
from support.vm import GUEST_MARKS

from lab.vm import run_in_vm

REPO = Path(__file__).resolve().parents[2]

pytestmark = GUEST_MARKS


def test_dummy_link_works_under_the_stock_kernel_and_the_host_is_untouched(host_unchanged):
    result = run_in_vm(["sh", "-c", "ip link add d0 type dummy && echo ok"], cwd=REPO, timeout=300)
    assert result.exit_status == 0, result.output
    assert result.output == "ok\n"
    assert result.kernel_release.endswith("-amd64")
    assert 0 < result.boot_seconds < 120 and result.command_seconds >= 0


def test_lab_vm_run_exits_with_the_commands_status():
    proc = subprocess.run(
        [sys.executable, "-m", "lab", "vm", "run", "--timeout", "300", "--", "sh", "-c", "echo bye; exit 3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "bye\n"
    assert "exit 3" in proc.stderr


def _qemu_children(pid: int) -> list[int]:
    """The QEMU processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue  # not a process, or gone
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"qemu-system" in cmdline:
            found.append(int(entry.name))
    return found


def test_a_terminated_lab_vm_takes_its_qemu_with_it():
    """SIGTERM to `lab vm run` (a CI job cancelled, `kill` of a long matrix) kills the guest, where it used to run on
    as an orphan until its own time limit."""
    lab = subprocess.Popen(
        [sys.executable, "-m", "lab", "vm", "run", "--timeout", "300", "--", "sh", "-c", "echo up; sleep 200"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert lab.stdout is not None
    assert lab.stdout.readline() == "up\n"  # the guest runs the command
    (qemu,) = _qemu_children(lab.pid)
    lab.terminate()
    _, err = lab.communicate(timeout=60)
    assert lab.returncode == 143, err
    assert "terminated" in err and "Traceback" not in err, err
    assert not Path(f"/proc/{qemu}").exists() or "Z" in Path(f"/proc/{qemu}/stat").read_text().split()[2]


# What a kube-proxy release says of a feature gate it does not know (lab/describe/releases.py).
GATE_REFUSAL = "refuses to start with a gate it does not know"
IPVS_SUITE_LIMIT = 2700  # seconds: the whole `-m ipvs` run under emulation, not a speed target


@pytest.mark.skipif(os.environ.get("LAB_VM") == "1", reason="already inside a lab vm guest")
def test_every_ipvs_test_passes_under_the_stock_kernel(capsys):
    """What this kernel skips for lack of ip_vs (`-m ipvs`: ipvs scenario variants and load tests) runs here.
    The guest's pytest reports every item as it ends, streamed to this session's output (`[guest] ... PASSED`), so
    a run of many minutes shows where it is."""
    from lab.doctor import kernel_has

    if kernel_has("ip_vs") and kernel_has("dummy"):
        pytest.skip("this kernel has ip_vs and dummy: the ipvs tests run natively")
    # One pytest process in the guest (no xdist workers), whatever the outer session uses.
    # --tb=short: a failure streamed as its assertion and the frames that matter, not pages of pytest's internals.
    # -rs: each skipped item's reason in the summary, to tell the kernel's skips from kube-proxy's own refusals.
    argv = [str(REPO / ".venv" / "bin" / "pytest"), "-v", "-rs", "--tb=short", "-p", "no:cacheprovider", "-n", "0"]
    argv += ["-m", "ipvs"]
    # 111 items take 330 s on a 2-core VM with TCG; CI's machine was seen 3x slower and cut a 900 s limit short.
    with capsys.disabled():
        print("\n  [guest] pytest -m ipvs under Debian's stock kernel, each item as it ends:", flush=True)
        result = run_in_vm(
            argv, cwd=REPO, timeout=IPVS_SUITE_LIMIT, on_output=lambda line: print(f"  [guest] {line}", flush=True)
        )
    summary = result.output.strip().splitlines()[-1] if result.output.strip() else ""
    # The guest's output was streamed above: the failure says only which items failed, and why.
    assert result.exit_status == 0, failure_summary(result.output)
    assert " passed" in summary and "failed" not in summary, summary
    # Nothing may be skipped for this kernel: the only skips allowed are variants a kube-proxy release itself refuses
    # to start (a feature gate named for a release without it), which no kernel runs.
    skipped = [line for line in result.output.splitlines() if line.startswith("SKIPPED")]
    not_the_release = [line for line in skipped if GATE_REFUSAL not in line]
    assert not not_the_release, not_the_release
    assert ("skipped" in summary) == bool(skipped), summary
