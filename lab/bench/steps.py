"""`lab bench --steps`: what one change to a running cluster costs, per proxy mode and kube-proxy era.

The step is the bench scenario's (lab/bench/steps.yaml: three nodes, a UDP Service with a replica on each, a
client flow to it): a Deployment scaled down by one. Timed from the start of the step to the end of kube-proxy's
conntrack cleanup on every node: the deleted pod's network removed, the rules kube-proxy's sync writes rendered
and loaded into every node with the real tool, and that release's cleanup run with the `conntrack` tool (1.31:
the `conntrack -D` of the deleted endpoint; 1.32: the reconciler's listing and deletions). The floor, measured
in the same cluster right after: loading the same rules into every node with the same tool again, which no sync
can avoid (ipvs: its iptables rules, ipsets and kube-ipvs0 addresses; no virtual server changes).
"""

from __future__ import annotations

import statistics
import time
from contextlib import ExitStack
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lab.describe.load import load_scenario
from lab.describe.topology import Axis, Topology
from lab.doctor import machine_arch
from lab.install.dataplane import load
from lab.install.echo import EchoServers
from lab.install.steps import run_steps
from lab.pipeline import cannot_run, kube_proxy_sync, standing
from lab.probe.client import send
from lab.probe.session import listeners
from lab.render.dataplane import render

SCENARIO = Path(__file__).resolve().parent / "steps.yaml"
VERSIONS = ("1.31", "1.32")


def _one(topo: Topology) -> tuple[float, float]:
    """(the step, the floor) in seconds, in a cluster built for this run."""
    with ExitStack() as stack:
        stood = stack.enter_context(standing(topo))  # render, realize and install as `lab run` does
        realized = stood.realized
        echo = EchoServers()
        stack.callback(echo.close)
        for listener in listeners(realized):
            echo.listen(listener)
        echo.start()
        first, step = topo.probes
        # The flow the cleanup has to look at: one conntrack entry per node it crosses.
        send(realized.ns_of(first.source), first.dst_ip, first.dst_port, first.protocol, 0.5, port=first.source_port)
        start = time.perf_counter()
        after, _ = run_steps(realized, topo, step, kube_proxy_sync(realized, stood.ports))
        seconds = time.perf_counter() - start
        # A sync with nothing to change: the same rules and sets again (ipvs: no virtual server to add or delete).
        again = render(after, previous=after)
        start = time.perf_counter()
        for node, plane in again.items():
            load(realized.namespaces[node], plane, topo.cluster.iptables_backend, resync=True)
        return seconds, time.perf_counter() - start


def run_steps_bench(modes: list[str], repeat: int, console: Console) -> int:
    table = Table(
        title=f"a step: scale statsd 3 → 2 on 3 nodes, kube-proxy's sync and conntrack cleanup, median of {repeat}"
    )
    for column in ("mode", "kube-proxy", "step (s)", "floor: reload rules (s)", "step / floor"):
        table.add_column(column, justify="left" if column in ("mode", "kube-proxy") else "right")
    for mode in modes:
        for version in VERSIONS:
            axes: dict[str, list[Axis]] = {"proxyMode": [mode], "kubeVersion": [version]}
            (topo,) = load_scenario(SCENARIO, axes, arch=machine_arch()).variants
            if reason := cannot_run(topo):
                table.add_row(mode, version, "skipped", reason, "")
                continue
            samples = [_one(topo) for _ in range(repeat)]
            step = statistics.median(s for s, _ in samples)
            floor = statistics.median(f for _, f in samples)
            table.add_row(mode, version, f"{step:.3f}", f"{floor:.3f}", f"{step / floor:.2f}×")
    console.print(table)
    return 0
