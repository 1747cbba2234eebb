"""pytest plugin: every probe of every scenario variant in topologies/ is its own test item.

A variant is built once, on its first item, and all its probes run then; each item reports
its own probe's verdict with the evidence (path, rules hit) when it fails.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from lab.api import Cluster, LabError, run_variant, up
from lab.api.cluster import PROBE_TIMEOUT, up_arguments
from lab.describe.errors import ScenarioError
from lab.describe.load import load_scenario
from lab.describe.topology import ProbeSpec, Topology
from lab.doctor import machine_arch, running_kernel
from lab.judge.results import ProbeResult, VariantRun
from lab.probe.capture import pcap_dir
from lab.realize.terminate import handle_sigterm
from lab.report.html import write_report
from lab.report.literal import visible
from lab.report.records import evidence_lines, headline

# The session's own state, in its config (pytest's stash), not in this module: each variant's run, built by the
# first of its items and read by the others; --lab-html's directory, checked at configure time.
RUNS = pytest.StashKey[dict[tuple[str, tuple], VariantRun]]()
HTML_DIR = pytest.StashKey[Path | None]()
LAB_CODE = Path(__file__).resolve().parent  # the lab package


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    # Every file in a topologies/ folder, and any scenario file named on the command line wherever it lives.
    named = parent.session.isinitpath(file_path)
    if file_path.suffix in (".yaml", ".yml") and (file_path.parent.name == "topologies" or named):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--lab-html",
        metavar="DIR",
        help="write DIR/index.html: the scenario variants this session ran, each probe's path drawn (lab run --html)",
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    directory, runs = session.config.stash.get(HTML_DIR, None), session.config.stash.get(RUNS, {})
    if directory is None or not runs:
        return
    by_scenario: dict[str, list[VariantRun]] = {}
    for run in runs.values():
        by_scenario.setdefault(run.topology.scenario, []).append(run)
    written = write_report(directory, list(by_scenario.items()))
    session.config.get_terminal_writer().line(f"lab report: {written}")


def pytest_configure(config: pytest.Config) -> None:
    # A SIGTERM stops the session like Ctrl-C, so the variant being built tears its namespaces down.
    handle_sigterm()
    config.stash[RUNS] = {}
    config.stash[HTML_DIR] = None
    if directory := config.getoption("--lab-html"):
        try:
            config.stash[HTML_DIR] = pcap_dir(directory)
        except argparse.ArgumentTypeError as exc:
            raise pytest.UsageError(f"--lab-html: {exc}") from None
    config.addinivalue_line("markers", "scenario: a probe of a scenario file")
    # Also declared here, for a scenario file collected outside this repository (its markers are in pyproject).
    config.addinivalue_line("markers", "root: needs root (network namespaces)")
    config.addinivalue_line("markers", "ipvs: needs the ip_vs kernel module")


@pytest.fixture
def lab_up() -> Iterator[Callable[..., Cluster]]:
    """For users' own tests (docs/api.md): `lab_up(FILE, variant={...})` builds that variant of the scenario and
    returns it up (lab.api.Cluster); every cluster the test built is torn down when it ends, passed or not. Skips
    the test when not root; bad input (an argument of the wrong type or range, a missing file, an unknown axis or
    value, a variant this machine cannot run) fails it with the message alone, its arguments checked even when
    not root (a test skipped here fails where it runs as root otherwise)."""
    with ExitStack() as built:

        def build(file: str | os.PathLike[str], variant: dict | None = None, timeout: float = PROBE_TIMEOUT) -> Cluster:
            try:
                up_arguments(file, variant, timeout)
                if os.geteuid() != 0:
                    pytest.skip("needs root: lab_up builds network namespaces (run with sudo)")
                return built.enter_context(up(file, variant, timeout))
            except LabError as exc:
                refused = str(exc)
            pytest.fail(f"lab_up: {refused}", pytrace=False)  # outside `except`: no "during handling of" chain

        yield build


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        try:
            scenario = load_scenario(self.path, kernel=running_kernel(), arch=machine_arch())
        except ScenarioError as exc:
            raise self.CollectError(f"error: {exc}") from exc  # shown as the message alone, no traceback
        for topo in scenario.variants:
            for probe in topo.probes:
                # pytest prints item names as they are: a name's control characters are escaped here.
                name = visible(f"{probe.name}[{topo.variant_label}]" if topo.variant else probe.name)
                yield ProbeItem.from_parent(self, name=name, topology=topo, probe=probe)


class ProbeItem(pytest.Item):
    def __init__(self, *, topology: Topology, probe: ProbeSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topology = topology
        self.probe = probe
        self.add_marker(pytest.mark.scenario)
        self.add_marker(pytest.mark.root)
        # Under pytest-xdist (--dist loadgroup) a scenario file's items stay in one worker, which builds each of
        # its variants once.
        self.add_marker(pytest.mark.xdist_group(f"scenario:{self.path}"))
        if topology.cluster.proxy_mode == "ipvs":
            self.add_marker(pytest.mark.ipvs)

    def runtest(self) -> None:
        if os.geteuid() != 0:
            pytest.skip("needs root: scenario probes build network namespaces (run with sudo)")
        runs = self.config.stash[RUNS]
        key = (self.topology.file, self.topology.variant)
        if key not in runs:
            runs[key] = run_variant(self.topology)
        if runs[key].skipped:
            pytest.skip(runs[key].skipped)
        result = next(r for r in runs[key].results if r.probe.name == self.probe.name)
        if result.verdict.skipped:
            pytest.skip(result.verdict.skipped)
        if not result.verdict.ok:
            raise ProbeFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ProbeFailed):
            return excinfo.value.describe()
        # Anything else (an evidence timeout, a bug) as its message under the frames of lab's own code: pytest's
        # and pluggy's, hundreds of lines under an item of a plugin, say nothing about it.
        own = excinfo.traceback.filter(lambda entry: Path(str(entry.path)).is_relative_to(LAB_CODE))
        excinfo.traceback = own or excinfo.traceback[-1:]
        return str(excinfo.getrepr(style="short"))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.topology.scenario}: {self.name}"


class ProbeFailed(Exception):
    def __init__(self, result: ProbeResult) -> None:
        super().__init__(result.probe.name)
        self.result = result

    def describe(self) -> str:
        lines = [headline(self.result), *(f"  {line}" for line in evidence_lines(self.result))]
        return visible("\n".join(lines))
