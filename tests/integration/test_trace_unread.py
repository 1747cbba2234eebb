"""A node's rules that cannot be read cost the probe those rules, not the run: when `nft monitor trace` does not
report its marker in time (a machine too busy to deliver the kernel's events: seen under lab vm on a loaded host),
the probe keeps its verdict from the captures and backends, names the node whose rules it lacks and why, and the
next probe reads them again. The busy monitor is made real here by stopping its process (SIGSTOP)."""

from __future__ import annotations

import os
import signal

from support.host import REPO

from lab.describe.load import load_scenario
from lab.pipeline import standing
from lab.probe.evidence.nftrace import TraceEvidence
from lab.probe.session import ProbeSession


def test_a_trace_that_does_not_answer_leaves_the_probe_its_verdict(host_unchanged):
    axes = {"externalTrafficPolicy": ["Cluster"], "proxyMode": ["nftables"], "kubeVersion": ["1.31"]}
    (topo,) = load_scenario(REPO / "topologies" / "nodeport-source-ip.yaml", axes).variants
    probe = next(p for p in topo.probes if p.name == "via-node-with-pod")
    with standing(topo) as stood, ProbeSession(stood.realized) as session:
        first = session.run(probe, topo)
        assert first.outcome == "delivered" and first.rules and not first.unread, first.explanation
        traced = {actor: e for actor, e in session.evidence.items() if isinstance(e, TraceEvidence)}
        entry = first.entry
        assert entry in traced, (entry, sorted(traced))
        monitor = traced[entry]._proc.pid
        os.kill(monitor, signal.SIGSTOP)
        try:
            second = session.run(probe, topo)
        finally:
            os.kill(monitor, signal.SIGCONT)
        third = session.run(probe, topo)
    assert second.outcome == "delivered" and second.backend, second.explanation
    (unread,) = [u for u in second.unread if u.startswith(f"{entry}: ")]
    assert "timed out after" in unread and "nft monitor trace" in unread, unread
    assert not [actor for actor, _ in second.rules if actor == entry], second.rules
    assert f"the rules that acted cannot be read on {entry}: timed out" in second.explanation
    assert third.outcome == "delivered" and not third.unread and third.rules, third.explanation
