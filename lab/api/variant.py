"""`lab run`'s work on one scenario variant, through the API's own cluster: built with the pipeline's stages, each
probe's steps done and the probe run and judged by the Cluster's methods (the ones `lab.up`'s cluster and the live
keeper use), then torn down; the stages timed."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from lab.api.arguments import ON_RESULT, ONLY, PCAP_DIR, PROBE_WAIT, TOPOLOGY, checked
from lab.api.cluster import PROBE_TIMEOUT, Cluster
from lab.api.tools import with_release_tools
from lab.describe.topology import Topology
from lab.install.steps import StepDone
from lab.judge.results import ProbeResult, Timing, VariantRun
from lab.pipeline import cannot_run, on_this_kernel, probing, standing


def run_variant(
    topo: Topology,
    timeout: float = PROBE_TIMEOUT,
    pcap_dir: Path | None = None,
    on_result: Callable[[ProbeResult], None] | None = None,
    only: set[str] | None = None,
) -> VariantRun:
    """Every probe of the variant in order (only those named in `only`, the steps of the others still done),
    each result handed to `on_result` as it comes; skipped, with the reason, where this machine cannot run it."""
    checked("topo", topo, TOPOLOGY)
    checked("timeout", timeout, PROBE_WAIT)
    checked("pcap_dir", pcap_dir, PCAP_DIR)
    checked("on_result", on_result, ON_RESULT)
    checked("only", only, ONLY)
    topo = on_this_kernel(topo)
    if reason := cannot_run(topo):
        return VariantRun(topo, [], Timing(0, 0, 0, 0), skipped=reason)
    topo, reason = with_release_tools(topo)
    if reason:
        return VariantRun(topo, [], Timing(0, 0, 0, 0), skipped=reason)
    results = []
    start = time.perf_counter()
    with standing(topo) as stood:
        rendered, built, installed = stood.rendered, stood.built, stood.installed
        with probing(stood, timeout, pcap_dir) as session:
            session_started = time.perf_counter()
            cluster = Cluster(None, topo, stood, session, forget_between=False)
            for probe in topo.probes:
                # Steps even before a probe left out: later ones expect what they changed.
                steps: list[StepDone] = cluster.steps_of(probe) if probe.before else []
                if only is not None and probe.name not in only:
                    if probe.keep_every:  # the flow it keeps goes on for later probes to check
                        cluster.keep_going(probe)
                    continue
                result = cluster.run(probe, steps)
                results.append(result)
                if on_result:
                    on_result(result)
            cluster.close()
            probes_done = time.perf_counter()
        probed = time.perf_counter()
    done = time.perf_counter()
    session_time = (session_started - installed) + (probed - probes_done)
    build, install, probe, teardown = built - rendered, installed - built, probed - installed, done - probed
    timing = Timing(build, install, probe, teardown, session_time, rendered - start, stood.first_sync)
    return VariantRun(topo, results, timing)
