"""Who answered the client's ARP for a layer 2 VIP, as the captures of the real exchange show it: the announcer's
speaker alone in iptables mode, every probe its own exchange; in ipvs mode without strictARP (lab vm) the kernels
of the nodes beside it, and the result says another run may enter elsewhere."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.host import REPO

from lab.api import run_variant
from lab.describe.load import load_scenario
from lab.probe.arp import answering_nodes
from lab.report.records import observed_text

# Seconds a probe waits: a userspace speaker's ARP answer under emulation (lab vm, a busy machine) can take longer
# than the default half second.
EMULATED = 3.0


def test_each_probe_shows_the_announcers_answer_from_its_own_exchange():
    (topo,) = load_scenario(
        REPO / "topologies" / "metallb-l2-announcer.yaml", {"proxyMode": ["iptables"], "announcer": ["node3"]}
    ).variants
    probe = topo.probes[0]
    # The same VIP twice: the second probe asks ARP afresh, its answer is its own (not the first's, left cached).
    run = run_variant(replace(topo, probes=(probe, replace(probe, name="again"))), timeout=EMULATED)
    for result in run.results:
        observed = result.observed
        assert result.verdict.ok, result.verdict
        assert observed.entry == "node3"
        assert [a.node for a in observed.arp] == ["node3"], observed.arp
        assert observed.arp[0].address == "192.168.56.240"
        assert "answered ARP" not in observed_text(result)


@pytest.mark.ipvs
def test_without_strict_arp_every_nodes_kernel_answers_and_the_result_says_so():
    """ipvs mode binds the VIP on kube-ipvs0 of every node; with arp_ignore=0 each kernel answers the client's ARP
    beside the announcer's speaker. Needs ip_vs and dummy (lab vm run)."""
    topo = load_scenario(
        REPO / "topologies" / "metallb-l2-arp-flux.yaml",
        {"proxyMode": ["ipvs"], "externalTrafficPolicy": ["Cluster"]},
    ).variants[0]
    run = run_variant(topo, timeout=EMULATED)
    if run.skipped:  # no ip_vs here: `lab vm run -- .venv/bin/pytest -m ipvs THIS_FILE`
        pytest.skip(run.skipped)
    (result,) = run.results
    observed = result.observed
    assert set(answering_nodes(observed.arp)) == {"node1", "node2", "node3"}, observed.arp
    entered = observed.entry or ""
    others = " and ".join(n for n in answering_nodes(observed.arp) if n not in entered.split("|"))
    assert f"entered {entered}; {others} also answered ARP for 192.168.56.240" in observed_text(result)
