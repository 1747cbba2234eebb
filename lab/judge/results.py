"""What a variant's run gives: each probe's observation and verdict, and the time each stage took. The output
of judge, and all that report renders."""

from __future__ import annotations

from dataclasses import dataclass

from lab.describe.topology import ProbeSpec, Topology
from lab.install.steps import StepDone
from lab.judge.verdict import Verdict
from lab.probe.session import Observation


@dataclass(frozen=True)
class ProbeResult:
    topology: Topology
    probe: ProbeSpec
    observed: Observation
    verdict: Verdict
    steps: tuple[StepDone, ...] = ()  # the probe's `before:` steps as they were done


@dataclass(frozen=True)
class Timing:
    build: float  # kube-proxy's first sync on every node ran alongside (first_sync)
    install: float  # what install did after the build: held ports, the actors around the cluster
    probes: float  # the probe session's start (backends, captures, first rule snapshots) included
    teardown: float
    session: float = 0.0  # of `probes`: starting and closing the probe session, once per variant
    render: float = 0.0  # kube-proxy's rules for every node, before the build
    first_sync: float = 0.0  # kube-proxy's first sync on every node, from the first to the last: inside `build`

    @property
    def total(self) -> float:
        return self.render + self.build + self.install + self.probes + self.teardown


@dataclass
class VariantRun:
    topology: Topology
    results: list[ProbeResult]
    timing: Timing
    skipped: str = ""  # why this variant could not run here, naming the missing feature

    @property
    def skipped_probes(self) -> int:
        return len(self.topology.probes) if self.skipped else 0
