"""A probe's `before:` steps, done to the running cluster: commands on nodes, workload changes (Services and pods
deleted, Deployments scaled down, pod conditions set) that kube-proxy's next sync carries to every node, and
kube-proxy restarts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from lab.describe.topology import ProbeSpec, StepSpec, Topology
from lab.install.bounded import run_bounded
from lab.install.tools import InstallError
from lab.realize.build import Realized, unplug_pod
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
            done.append(StepDone(step, sync(topo, after, step.restart)))
            topo = after
        except (InstallError, NamespaceError) as exc:
            raise InstallError(f"{step.origin or topo.file}: probe {probe.name}, before: {step}: {exc}") from None
    return topo, done
