"""`lab bench`: wall time of each stage of one scenario, against the raw `ip` commands it replaces.

The baseline runs `ip netns add` once per namespace and `ip link add` once per link the build
creates (veth pairs and bridges), as separate processes, the way a shell script would.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lab.api import run_variant
from lab.describe.load import load_scenario
from lab.describe.topology import Topology
from lab.doctor import machine_arch
from lab.judge.results import Timing, VariantRun
from lab.pipeline import cannot_run
from lab.realize.runs import new_prefix, release, remove_namespaces
from lab.render.dataplane import node_dataplane
from lab.replay.env import Setup
from lab.replay.run import replay
from lab.report.literal import literal

# The catalogue at the repository root (lab/bench/stages.py -> lab/bench -> lab -> root).
CATALOGUE = Path(__file__).resolve().parents[2] / "topologies"
DEFAULT = CATALOGUE / "nodeport-source-ip.yaml"


def counts(topo: Topology) -> tuple[int, int]:
    """(namespaces, links) the build creates: fabric + actors; a veth per actor plus bridges."""
    pods = [p for p in topo.pods if not p.host_network]
    namespaces = 1 + len(topo.nodes) + len(topo.externals) + len(pods)
    links = 1 + len(topo.nodes) * 2 + len(topo.externals) + len(pods)  # br0, eth0 + cni0 per node, veths
    return namespaces, links


def raw_ip_seconds(namespaces: int, links: int) -> float:
    prefix = new_prefix()
    names = [f"{prefix}-raw{i}" for i in range(namespaces)]
    start = time.perf_counter()
    try:
        for name in names:
            subprocess.run(["ip", "netns", "add", name], check=True)
        for i in range(links):
            subprocess.run(
                [
                    "ip",
                    "-n",
                    names[0],
                    "link",
                    "add",
                    f"r{i}",
                    "type",
                    "veth",
                    "peer",
                    "name",
                    f"p{i}",
                    "netns",
                    names[1 + i % (namespaces - 1)],
                ],
                check=True,
            )
        return time.perf_counter() - start
    finally:
        remove_namespaces(names)
        release(prefix)


def untimed(run: VariantRun) -> str:
    """Why the run's timings do not count, or "": a probe that failed, or that this machine could not judge (an
    affinity probe too slow to show it: the same slowness would be in the timings)."""
    bad = next((r for r in run.results if not r.verdict.ok), None)
    if bad is None:
        return ""
    why = bad.verdict.skipped or "; ".join(bad.verdict.reasons)
    judged = "could not be judged" if bad.verdict.skipped else "failed"
    return f"{bad.probe.name} {judged} ({why}): timings would not be representative"


def run_bench(file: Path | None, repeat: int, console: Console) -> int:
    topo = next(t for t in load_scenario(file or DEFAULT, arch=machine_arch()).variants if not cannot_run(t))
    timings: list[Timing] = []
    for _ in range(repeat):
        run = run_variant(topo)
        if said := untimed(run):
            console.print(literal(said, "red"))
            return 1
        timings.append(run.timing)
    namespaces, links = counts(topo)
    raw = statistics.median(raw_ip_seconds(namespaces, links) for _ in range(repeat))

    def med(stage: str) -> float:
        return statistics.median(getattr(t, stage) for t in timings)

    table = Table(
        title=f"{topo.scenario} [{topo.variant_label}] — {len(topo.nodes)} nodes, {len(topo.probes)} probes, "
        f"median of {repeat}"
    )
    table.add_column("stage")
    table.add_column("seconds", justify="right")
    for stage in ("render", "build", "install", "probes", "teardown", "total"):
        table.add_row(stage, f"{med(stage):.3f}")
    table.add_row(f"raw ip: {namespaces} netns add + {links} link add", f"{raw:.3f}")
    table.add_row("build / raw ip", f"{med('build') / raw:.2f}×")
    console.print(table)
    return 0


REPLAY_CASES = (
    # (label, source, destination, port): node2 of report 1 (no ingress pod there), its own rendered rules
    ("pod → LB IP (short-circuit to the endpoint)", "10.244.2.2", "203.0.113.10", 80),
    ("node → LB IP (LOCAL masquerade)", "192.168.56.12", "203.0.113.10", 80),
    ("outside → NodePort (no local endpoint: DROP)", "198.51.100.20", "192.168.56.12", 30000),
    ("pod → cluster IP", "10.244.2.2", "10.96.0.10", 80),
)


def run_replay_bench(repeat: int, console: Console) -> int:
    scenario = CATALOGUE / "lb-local-from-pods.yaml"
    rules = node_dataplane(load_scenario(scenario, arch=machine_arch()).variants[0], "node2").iptables
    table = Table(title=f"lab replay — report 1's node2 rules, median of {repeat}")
    for column in ("case", "output", "attempts", "seconds"):
        table.add_column(column, justify="right" if column in ("attempts", "seconds") else "left")
    for label, source, dst, port in REPLAY_CASES:
        setup = Setup(("192.168.56.12",), "10.244.2.0/24", source, dst, port, "TCP", ())
        seconds, result = [], None
        for _ in range(repeat):
            start = time.perf_counter()
            result = replay(rules, setup)
            seconds.append(time.perf_counter() - start)
        assert result is not None
        table.add_row(label, result.output or "''", str(result.attempts), f"{statistics.median(seconds):.3f}")
    console.print(table)
    return 0
