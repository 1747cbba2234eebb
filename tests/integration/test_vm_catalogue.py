"""The catalogue's kernel-dependent expectations, proven on a kernel they name. Every scenario of topologies/ with
a `when: {kernel: ...}` runs under lab vm's debian-11 (Linux 5.10: hairpin's promiscuous-bridge hairpin is delivered
there, dropped from 6.1), and its JSON must show a kernel condition choosing an expectation: a scenario whose
condition no longer selects that kernel fails here rather than pass on the default. The other side of each
condition runs on this machine's kernel, as the scenario test items. Only those scenarios: the whole catalogue
under emulation takes most of an hour."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from support.vm import GUEST_MARKS

from lab.vm import run_in_vm

REPO = Path(__file__).resolve().parents[2]
KERNELS = ["debian-11"]  # the releases below 6.1 that the catalogue's conditions pin
CATALOGUE_LIMIT = 1800  # seconds under emulation, not a speed target: 6.5 min measured beside other guests

pytestmark = [
    *GUEST_MARKS,
    pytest.mark.skipif(os.environ.get("LAB_VM") == "1", reason="already inside a lab vm guest"),
]


def _conditional(items: object) -> list[dict]:
    listed = items if isinstance(items, list) else [items]
    return [item for item in listed if isinstance(item, dict)]


def pins_a_kernel(path: Path) -> bool:
    """Whether an expectation or a step of the scenario names the kernel in its `when`."""
    data = yaml.safe_load(path.read_text())
    for probe in data.get("probes", []):
        for item in _conditional(probe.get("expect")) + _conditional(probe.get("before", [])):
            if "kernel" in (item.get("when") or {}):
                return True
    return False


PINNED = [p for p in sorted((REPO / "topologies").glob("*.yaml")) if pins_a_kernel(p)]


def _progress(line: str) -> None:
    """The guest's `running [i/n] …` lines as they come (the JSON comes at the end): minutes show where it is."""
    if line.startswith("running ["):
        print(f"  [guest] {line}", flush=True)


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_scenarios_that_pin_a_kernel_pass_under_it(kernel, capsys):
    assert PINNED, "no catalogue scenario has a when: {kernel: ...}"
    files = [str(p.relative_to(REPO)) for p in PINNED]
    argv = [str(REPO / ".venv" / "bin" / "lab"), "run", "--timeout", "1", "--json", *files]
    with capsys.disabled():
        print(f"\n  [guest] lab run {' '.join(files)} under {kernel}", flush=True)
        result = run_in_vm(argv, cwd=REPO, kernel=kernel, timeout=CATALOGUE_LIMIT, on_output=_progress)
        print(f"  [guest] {result.kernel_release}: {result.command_seconds:.0f} s", flush=True)
    # The JSON document, whatever the guest printed around it (progress on stderr).
    document, _ = json.JSONDecoder().raw_decode(result.output[result.output.index('{\n  "results"') :])
    failed = [
        f"{r['scenario']} {r['variant']} {r['probe']}: {r['reasons']}" for r in document["results"] if r["ok"] is False
    ]
    assert result.exit_status == 0 and not failed, "\n".join(failed) or result.output[-5000:]
    chosen = [r for r in document["results"] if ", which is " in ((r.get("expected") or {}).get("kernel") or "")]
    assert chosen, f"no kernel condition of {files} selects {result.kernel_release}"
    assert all(r["kernel"] == result.kernel_release for r in chosen)
