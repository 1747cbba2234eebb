"""The probe session as the API uses it beyond what the pipeline does with it (lab.pipeline.probing opens it,
steps_before tells it about steps): one probe run and judged, the kept flows asked, idle frames dropped. Every
direct use of lab.probe.session by the API is here, so that a change of the session's interface changes this
module alone."""

from __future__ import annotations

from collections.abc import Sequence

from lab.describe.topology import ProbeSpec, Topology
from lab.install.steps import StepDone
from lab.judge.attempts import run_probe
from lab.judge.results import ProbeResult
from lab.probe.session import ProbeSession


def probe_once(
    session: ProbeSession,
    probe: ProbeSpec,
    topo: Topology,
    running: Topology,
    steps: Sequence[StepDone],
    forget: bool,
) -> ProbeResult:
    """Run one probe of the variant `topo` against the cluster running `running` (the workload the steps left)
    and judge it. With `forget`, frames captured since the last probe are dropped first (between a user's calls
    nobody looks, as the live keeper does)."""
    if forget:
        forget_frames(session)
    observed, verdict = run_probe(session, probe, topo, running)
    return ProbeResult(topo, probe, observed, verdict, tuple(steps))


def keep_flow(session: ProbeSession, probe: ProbeSpec, running: Topology) -> None:
    """Send a probe that keeps a flow, unjudged: its flow goes on for later probes to check."""
    session.run(probe, running)


def has_flow(session: ProbeSession, name: str) -> bool:
    """Whether the probe `name` kept a flow that is still going (a `flow:` check needs it)."""
    return name in session.flows


def forget_frames(session: ProbeSession) -> None:
    """Drop what the captures took since the last probe: nobody looks at frames between probes."""
    session.captures.forget()
