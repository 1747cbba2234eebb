"""The probe session as the API uses it: opened once per cluster, told what kube-proxy did, asked to run one probe.
Every use of lab.probe.session by the API is here, in one place, so that a change of the session's interface
changes this module alone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from lab.describe.topology import ProbeSpec, Topology
from lab.install.steps import StepDone
from lab.judge.attempts import run_probe
from lab.judge.results import ProbeResult
from lab.pipeline import Standing
from lab.probe.session import ProbeSession


@contextmanager
def probe_session(stood: Standing, timeout: float) -> Iterator[ProbeSession]:
    """The session of a standing variant, told what each node's first kube-proxy sync said (a refused one is
    then said by every probe); closed on exit."""
    with ProbeSession(stood.realized, timeout) as session:
        session.kube_proxy_synced(stood.said)
        yield session


def steps_done(session: ProbeSession, running: Topology, done: list[StepDone]) -> None:
    """Tell the session that steps changed the rules (now those of `running`) and what kube-proxy said."""
    session.rules_changed(running)
    for step in done:
        if not step.step.argv:  # a workload change: every node's kube-proxy synced
            session.kube_proxy_synced(step.said)


def probe_once(session: ProbeSession, probe: ProbeSpec, running: Topology, steps: list[StepDone]) -> ProbeResult:
    """Run one probe and judge it. Frames captured since the last probe (between calls, nobody looks) are
    forgotten first, as the live keeper does."""
    forget_frames(session)
    observed, verdict = run_probe(session, probe, running)
    return ProbeResult(running, probe, observed, verdict, tuple(steps))


def has_flow(session: ProbeSession, name: str) -> bool:
    """Whether the probe `name` kept a flow that is still going (a `flow:` check needs it)."""
    return name in session.flows


def forget_frames(session: ProbeSession) -> None:
    """Drop what the captures took since the last probe: nobody looks at frames between probes."""
    session.captures.forget()
