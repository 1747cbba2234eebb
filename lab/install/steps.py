"""A probe's `before:` steps, done to the running cluster: commands on nodes, workload changes (Services and pods
deleted, Deployments scaled, pod conditions set) that kube-proxy's next sync carries to every node, and kube-proxy
restarts. A scale-up's pods were built at the start when the scenario's own steps create them; one the build could
not foresee (lab.api) is plugged in here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from lab.describe.topology import ProbeSpec, StepSpec, Topology
from lab.install.bounded import run_bounded
from lab.install.tools import InstallError
from lab.realize.build import Realized, plug_pods, unplug_pod
from lab.realize.enter import NamespaceError


@dataclass(frozen=True)
class StepDone:
    step: StepSpec
    said: tuple[str, ...] = ()  # what kube-proxy did about it: its conntrack cleanup, per node


# The pipeline's kube-proxy sync: (before, after, restart) -> what it did.
Sync = Callable[[Topology, Topology, bool], tuple[str, ...]]


def run_steps(realized: Realized, topo: Topology, probe: ProbeSpec, sync: Sync) -> tuple[Topology, list[StepDone]]:
    """Do the probe's steps, in order, to the cluster running `topo`; the topology they leave and what each did.
    A deleted pod's network goes first, then `sync` loads what kube-proxy's next sync writes and runs that
    release's conntrack cleanup, before the next step runs."""
    done = []
    for step in probe.before:
        try:
            if step.argv:
                for node in step.nodes:
                    run_bounded(realized.namespaces[node], node, step.argv, step.timeout)
                done.append(StepDone(step))
                continue
            after = topo
            if step.pods is not None and step.services is not None:
                after = replace(topo, pods=step.pods, services=step.services)
                kept = {p.name for p in after.pods}
                for pod in topo.pods:
                    if pod.name not in kept and pod.name in realized.pod_ports:
                        unplug_pod(realized, pod.name)
                # A pod the build did not foresee (a scale-up asked through lab.api) gets its network before
                # kube-proxy hears of it, as a pod's sandbox is up before the pod is ready and in its Service.
                if new := [pod for pod in after.pods if not realized.has_pod(pod.name)]:
                    plug_pods(realized, new)
            done.append(StepDone(step, sync(topo, after, step.restart)))
            topo = after
        except (InstallError, NamespaceError) as exc:
            raise InstallError(f"{step.origin or topo.file}: probe {probe.name}, before: {step}: {exc}") from None
    return topo, done
