"""`lab.up(FILE, variant=...)`: one variant built (render → realize → install, lab.pipeline.standing) and held
while the `with` block runs; torn down when it is left, whichever way (an exception, Ctrl-C, SIGTERM)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lab.api.arguments import (
    EXEC_WAIT,
    INPUT,
    NAME,
    PROBE_ENTRY,
    PROBE_SPEC,
    PROBE_WAIT,
    STEP_ENTRY,
    STEPS_DONE,
    TOPOLOGY,
    LabError,
    checked,
    scenario_file,
    words,
)
from lab.api.requests import HISTORY, STEP, in_words, load_error, probe_entry, step_carrier, variant_matrix
from lab.api.session import forget_frames, has_flow, keep_flow, probe_once
from lab.api.tools import with_release_tools
from lab.describe.errors import ScenarioError
from lab.describe.load import Scenario, load_scenario
from lab.describe.readfile import ReadError, read_bytes
from lab.describe.topology import Axis, PodSpec, ProbeSpec, Topology
from lab.doctor import machine_arch, running_kernel
from lab.install.steps import StepDone
from lab.install.tools import InstallError
from lab.judge.results import ProbeResult
from lab.pipeline import Standing, cannot_run, probing, standing, steps_before
from lab.probe.session import ProbeSession
from lab.realize.terminate import handle_sigterm
from lab.selection import first_runnable

PROBE_TIMEOUT = 0.5  # seconds a probe waits for an answer, as `lab run`'s default


class Actor:
    """A node, pod, external host, router or load balancer of a cluster that is up: its network namespace and
    its address."""

    def __init__(self, cluster: Cluster, name: str, namespace: str, address: str) -> None:
        self._cluster, self.name, self.namespace, self.address = cluster, name, namespace, address

    def exec(
        self, argv: Sequence[str], timeout: float | None = None, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run argv (no shell) as root in the actor's network namespace, with the host's tools and files; its
        returncode, stdout and stderr (text). `timeout` seconds, then it is killed (subprocess.TimeoutExpired)."""
        command = words(f"{self.name}.exec argv", argv)
        checked(f"{self.name}.exec timeout", timeout, EXEC_WAIT)
        checked(f"{self.name}.exec input", input, INPUT)
        self._cluster.check_up()
        try:
            return subprocess.run(
                ["ip", "netns", "exec", self.namespace, *command],
                capture_output=True,
                text=True,
                timeout=timeout,
                input=input,
                check=False,
            )
        except OSError as exc:  # the kernel refused to start it: an argv longer than it takes (E2BIG)
            raise LabError(f"{self.name}.exec: cannot run {command[0]!r}: {exc.strerror or exc}") from None

    def __repr__(self) -> str:
        return f"<actor {self.name} {self.address}>"


def addresses(topo: Topology) -> dict[str, str]:
    """Every actor's address: a node's, a pod's, an external host's or router's. A load balancer is no actor (its
    rules and address are the fabric's), and its name may be a node's: it names no address here."""
    return (
        {n.name: n.ip for n in topo.nodes}
        | {p.name: p.ip for p in topo.built_pods}
        | {e.name: e.ip for e in topo.externals}
    )


def pod_aliases(pods: Sequence[PodSpec]) -> dict[str, str]:
    """NAMESPACE/NAME of every pod the lab names by its name alone ("default/web-0" for "web-0")."""
    return {f"{p.namespace}/{p.name}": p.name for p in pods if "/" not in p.name}


class Cluster:
    """A variant that is up: `cluster["client"]` an actor, `cluster.probe(...)`, `cluster.step(...)`."""

    def __init__(
        self,
        source: ScenarioSource | None,
        topo: Topology,
        stood: Standing,
        session: ProbeSession,
        forget_between: bool = True,
    ) -> None:
        # `source` None: a cluster driven by resolved probes only (`lab run`'s, lab.api.variant), never by requests.
        # `forget_between`: frames captured between probes are dropped (a cluster held while a user thinks); `lab
        # run` keeps them, its probes running back to back (what nodes sent between two probes counts for ICMP).
        self._source, self._stood, self._session = source, stood, session
        self._forget_between = forget_between
        self.topology = topo  # as built; `running` is what kube-proxy was last told (steps change it)
        self.running = topo
        self._history: list[dict[str, Any]] = []  # every step done so far, as written
        self._probes = 0
        self._up = True
        self._broken = ""  # why the cluster's state is no longer known (a step that failed halfway)
        realized = stood.realized
        known = addresses(topo)
        names = [*realized.namespaces, *(p.name for p in topo.built_pods)]
        self.actors = {name: Actor(self, name, realized.ns_of(name), known.get(name, "")) for name in names}
        self._aliases = pod_aliases(topo.built_pods)

    @property
    def prefix(self) -> str:
        """The run's name: its namespaces are PREFIX-ACTOR (`ip netns list`)."""
        return self._stood.realized.prefix

    def check_up(self) -> None:
        if not self._up:
            raise LabError(f"{self.prefix} was taken down when its `with lab.up(...)` block ended")
        if self._broken:
            raise LabError(f"{self.prefix}: a step failed ({self._broken}); what it left is unknown: build it again")

    def __getitem__(self, name: str) -> Actor:
        checked("cluster[...]", name, NAME)
        actor = self.actors.get(self._aliases.get(name, name))
        if actor is None:
            raise LabError(f"{self.topology.scenario} has no actor {name!r}; its actors are: {', '.join(self.actors)}")
        return actor

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._aliases.get(name, name) in self.actors

    def probe(self, probe: Mapping[str, Any] | str | None = None, /, **fields: Any) -> ProbeResult:
        """Run a probe written as an entry of the scenario's `probes:` (a mapping, keyword fields, or both:
        `from_` for `from`), checked by describe as one of the file's; its `before:` steps first. Without
        `expect` it expects delivery. A name alone runs that probe of the file, without the steps before it (as
        `lab probe NAME`). The result is the one `lab run --json` prints (lab.api.to_json)."""
        checked("probe", probe, PROBE_ENTRY)
        if isinstance(probe, str) and fields:  # they would change the file's probe, which runs as the file has it
            raise LabError(f"probe {probe!r}: a probe of the file takes no fields ({', '.join(fields)} given)")
        self.check_up()
        if isinstance(probe, str):
            return self.run(self.own_probe(probe))
        self._probes += 1
        entry = probe_entry(probe, fields, f"probe-{self._probes}")
        spec = self._resolve(entry, "probe")
        self._flow_kept(spec)
        return self.run(spec, self._apply(entry, spec))

    def run(self, probe: ProbeSpec, steps: Sequence[StepDone] = ()) -> ProbeResult:
        """Run a probe describe resolved against this variant, without the steps before it (`lab probe NAME`);
        `steps`, those just done for it (`steps_of`), go into its result."""
        checked("run probe", probe, PROBE_SPEC)
        checked("run steps", steps, STEPS_DONE)
        self.check_up()
        return probe_once(self._session, probe, self.topology, self.running, steps, self._forget_between)

    def keep_going(self, probe: ProbeSpec) -> None:
        """Send a probe that keeps a flow, unjudged: `lab run --probe` leaves it out, and the later probes it keeps
        its flow for still find it."""
        checked("keep_going probe", probe, PROBE_SPEC)
        self.check_up()
        keep_flow(self._session, probe, self.running)

    def steps_of(self, probe: ProbeSpec) -> list[StepDone]:
        """Do a resolved probe's `before:` steps (lab.pipeline.steps_before: each workload change followed by
        kube-proxy's sync); what each did. A step that fails is raised as lab.install's InstallError, naming it,
        and leaves the cluster refusing further calls."""
        checked("steps_of probe", probe, PROBE_SPEC)
        self.check_up()
        try:
            self.running, done = steps_before(self._stood, self._session, self.running, probe)
        except InstallError as exc:  # a command that failed or timed out, named with its step
            self._broken = str(exc)  # the steps before it were done, and kube-proxy was told: no state to go on from
            raise
        return done

    def own_probe(self, name: str) -> ProbeSpec:
        """The scenario file's probe `name`, as resolved for this variant; refused when it checks a flow that no
        probe run here keeps."""
        checked("probe name", name, NAME)
        found = next((p for p in self.topology.probes if p.name == name), None)
        if found is None:
            known = ", ".join(p.name for p in self.topology.probes)
            raise LabError(f"{self.topology.scenario} has no probe {name!r}; its probes are: {known}")
        self._flow_kept(found)
        return found

    def _flow_kept(self, probe: ProbeSpec) -> None:
        """A probe's `flow:` check needs the flow that probe keeps going here."""
        if probe.flow and not has_flow(self._session, probe.flow):
            raise LabError(f"{probe.name} checks the flow probe {probe.flow} keeps: run probe {probe.flow} first")

    def forget_frames(self) -> None:
        """Drop the frames captured while no probe runs (a cluster held for long, as the live keeper's)."""
        forget_frames(self._session)

    def step(self, step: Mapping[str, Any]) -> tuple[StepDone, ...]:
        """Do one step to the running cluster, as a probe's `before:` does (docs/scenarios.md): a command on
        nodes, a Service or pod deleted, a Deployment scaled, a pod's conditions set, kube-proxy restarted; then
        kube-proxy's sync on every node. What it did (and what kube-proxy's conntrack cleanup said)."""
        checked("step", step, STEP_ENTRY)
        self.check_up()
        entry = step_carrier(STEP, [step], self.topology.nodes[0].name)
        return tuple(self._apply(entry, self._resolve(entry, "step")))

    def _resolve(self, entry: dict[str, Any], what: str) -> ProbeSpec:
        """`entry` resolved by describe as a probe of the file is, after the steps done so far (the file's own
        probes, which the API does not run, left out); a step whose pods cannot run here is refused
        (_cannot_create)."""
        if self._source is None:
            raise LabError(f"{self.prefix} runs {self.topology.scenario}'s own probes only: build one with lab.up")
        extra = [step_carrier(HISTORY, self._history, self.topology.nodes[0].name)] if self._history else []
        try:
            variants = self._source.load((*extra, entry), own_probes=False).variants
        except ScenarioError as exc:
            raise in_words(exc, len(extra), what) from None
        spec = next(t for t in variants if t.variant == self.topology.variant).probes[-1]
        for step in spec.before:
            if problem := self._cannot_create(step.pods or ()):
                raise LabError(f"{what}: {step}: {problem}")
        return spec

    def _cannot_create(self, pods: Sequence[PodSpec]) -> str:
        """Why the workload `pods` cannot run here ("" when it can): each pod the lab has (built at the start or
        plugged in since) keeps the address it has, and a new one is plugged in on the pod network (lab.realize's
        plug_pods) at an address no pod holds."""
        realized = self._stood.realized
        have = {p.name: p for p in (*self.topology.built_pods, *realized.plugged.values())}
        held = {p.ip: p.name for p in have.values() if not p.host_network}
        for pod in pods:
            known = have.get(pod.name)
            if known is not None and known.ip != pod.ip:
                return (
                    f"describe now gives {pod.name} the address {pod.ip}, and it runs at {known.ip}: the new replicas "
                    "of several Deployments scaled in turn are addressed in the workload's order, not the order they "
                    "were created in; build it again with the scenario's own steps scaling them"
                )
            if known is not None:
                continue
            if pod.host_network:
                return (
                    f"{pod.name} would be created with hostNetwork: a pod created after the build is on the pod network"
                )
            if pod.ip in held:
                return f"{pod.name} would be created at {pod.ip}, which {held[pod.ip]} holds"
            if self.topology.cluster.hairpin_mode == "promiscuous-bridge":
                return (
                    f"{pod.name} would be created on a promiscuous-bridge node: a port added to cni0 may change the "
                    "bridge's MAC, which kubelet's KUBE-DEDUP rule names: the lab builds such pods at the start only "
                    "(a step of the scenario file creates them)"
                )
        return ""

    def _apply(self, entry: dict[str, Any], spec: ProbeSpec) -> list[StepDone]:
        """Do the probe's steps as `lab run` does them (lab.pipeline.steps_before: each workload change followed by
        kube-proxy's sync); remembered as written, for describe to resolve what comes next against the workload
        they leave."""
        if not spec.before:
            return []
        try:
            done = self.steps_of(spec)
        except InstallError as exc:
            raise LabError(str(exc)) from None
        self._add_plugged()
        self._history += entry.get("before", [])
        return done

    def _add_plugged(self) -> None:
        """Pods a step plugged in since are actors too."""
        realized = self._stood.realized
        for pod in realized.plugged.values():
            if pod.name not in self.actors:
                self.actors[pod.name] = Actor(self, pod.name, realized.ns_of(pod.name), pod.ip)
                self._aliases |= pod_aliases([pod])

    def close(self) -> None:
        self._up = False


class ScenarioSource:
    """The scenario file a cluster is built from, with the matrix values asked for, and loaded again (with the
    API's probes and steps) as it was first; refused if it changed since: its variant would no longer be the
    one running."""

    def __init__(self, path: Path, matrix: dict[str, list[Axis]]) -> None:
        self.path, self.matrix = path, matrix
        self.kernel, self.arch = running_kernel(), machine_arch()
        self.digest = self._digest()

    def _digest(self) -> str:
        try:
            return hashlib.sha256(read_bytes(self.path)).hexdigest()
        except ReadError as exc:
            raise LabError(f"{self.path}: {exc}") from None

    def load(self, extra: Sequence[dict[str, Any]] = (), own_probes: bool = True) -> Scenario:
        if self._digest() != self.digest:
            raise LabError(f"{self.path} changed since lab.up built it: leave the `with` block and build it again")
        return load_scenario(
            self.path, self.matrix, tuple(extra), kernel=self.kernel, arch=self.arch, own_probes=own_probes
        )


def up_arguments(
    file: str | os.PathLike[str], variant: Mapping[str, Any] | None, timeout: float
) -> tuple[Path, dict[str, list[Axis]], float]:
    """lab.up's arguments checked, before anything is read or built (the lab_up fixture checks them before it
    asks for root): the scenario file (a catalogue scenario's, for a name alone), the matrix, the seconds."""
    return scenario_file(file), variant_matrix(variant), float(checked("timeout", timeout, PROBE_WAIT))


@contextmanager
def up(
    file: str | os.PathLike[str], variant: Mapping[str, Any] | None = None, timeout: float = PROBE_TIMEOUT
) -> Iterator[Cluster]:
    """Build one variant of the scenario `file` (a path, or a catalogue scenario's name: "hairpin"; `variant`
    picks the matrix's values, as `--variant` does; among several left, the first this machine can run) and
    hold it while the block runs; torn down when it is left. Needs root. Bad input (an argument of the wrong
    type or range, a missing file, an unknown axis or value, a variant this kernel cannot run) is a LabError in
    words."""
    path, matrix, timeout = up_arguments(file, variant, timeout)
    if os.geteuid() != 0:
        raise LabError("lab.up needs root: it builds network namespaces (run with sudo)")
    source = ScenarioSource(path, matrix)
    try:
        variants = source.load().variants
    except ScenarioError as exc:
        raise load_error(exc) from None
    topo, said = first_runnable(str(path), list(variants), cannot_run)
    if topo is None:
        raise LabError("\n".join(said))
    if threading.current_thread() is threading.main_thread():
        handle_sigterm()  # SIGTERM unwinds the block like Ctrl-C, so that the teardown runs
    with hold(source, topo, timeout) as cluster:
        yield cluster


@contextmanager
def hold(source: ScenarioSource, topo: Topology, timeout: float = PROBE_TIMEOUT) -> Iterator[Cluster]:
    """Build `topo` (a variant of `source`) with the pipeline's stages, open its probe session, and hold it while
    the block runs; all torn down on exit. What `lab.up` and the live lab's keeper build on."""
    checked("topo", topo, TOPOLOGY)
    checked("timeout", timeout, PROBE_WAIT)
    topo, reason = with_release_tools(topo)
    if reason:
        raise LabError(reason)
    with standing(topo) as stood, probing(stood, timeout) as session:
        cluster = Cluster(source, topo, stood, session)
        try:
            yield cluster
        finally:
            cluster.close()
