"""A probe's `before:` steps, done to the running cluster: commands on nodes, and Service deletions that
kube-proxy's next sync carries to every node."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from lab.describe.topology import ProbeSpec, Topology
from lab.install.tools import InstallError, run_command
from lab.realize.build import Realized


def run_steps(realized: Realized, topo: Topology, probe: ProbeSpec, resync: Callable[[Topology], None]) -> Topology:
    """Do the probe's steps, in order, to the cluster running `topo`; the topology they leave. A deleted Service
    is gone from it, and `resync` (the pipeline's) loads what kube-proxy's next sync writes for it before the
    next step runs."""
    for step in probe.before:
        try:
            if step.delete_service:
                kept = tuple(s for s in topo.services if (s.namespace, s.name) != step.delete_service)
                topo = replace(topo, services=kept)
                resync(topo)
            else:
                for node in step.nodes:
                    run_command(realized.namespaces[node], step.argv)
        except InstallError as exc:
            raise InstallError(f"{topo.file}: probe {probe.name}, before: {step}: {exc}") from None
    return topo
