"""A probe's `before:` steps, done to the running cluster: commands on nodes, and Service deletions that
kube-proxy's next sync carries to every node."""

from __future__ import annotations

from dataclasses import replace

from lab.dataplane import install
from lab.install import InstallError, run_command
from lab.model.topology import ProbeSpec
from lab.netns.build import Realized


def run_steps(realized: Realized, probe: ProbeSpec) -> None:
    for step in probe.before:
        try:
            if step.delete_service:
                topo = realized.topology
                kept = tuple(s for s in topo.services if (s.namespace, s.name) != step.delete_service)
                realized.topology = replace(topo, services=kept)
                install(realized, resync=True)
            else:
                for node in step.nodes:
                    run_command(realized.namespaces[node], step.argv)
        except InstallError as exc:
            raise InstallError(f"{realized.topology.file}: probe {probe.name}, before: {step}: {exc}") from None
