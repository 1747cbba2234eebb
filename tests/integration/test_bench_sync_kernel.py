"""lab bench --sync on this machine's kernel: kube-proxy's full sync of 100 Services over one Service's rules, the
client's connections to that Service answered all through it, the one-endpoint change reaching the new endpoint
(measure checks both, and raises otherwise); and a bench killed with SIGTERM leaves no namespace behind."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.host import REPO, lab_namespaces, once_built, terminated_leaving_nothing

from lab.bench.scale import services
from lab.bench.sync import Rendered, measure, one_endpoint_changed, render

MODES = ("nftables", "iptables-nft", "iptables-legacy")


@pytest.mark.parametrize("mode", MODES)
def test_the_full_sync_of_100_services_is_timed_with_the_existing_service_answering(mode, own_namespaces):
    svcs = services(100)
    one: Rendered = render(mode, services(1), "1.31")
    every, changed = render(mode, svcs, "1.31"), render(mode, one_endpoint_changed(svcs), "1.31")
    sample = measure(mode, one, every, changed, svcs[0], svcs[50])
    assert sample.full > 0 and sample.change > 0
    assert sample.traffic.during >= 1, "no connection ran during the full sync"
    assert sample.traffic.lost == 0, sample.traffic
    assert sample.traffic.before_ms > 0
    assert own_namespaces() == []


def test_the_change_that_does_not_reach_its_service_ends_the_bench(own_namespaces):
    """The checks are real: a change rendered without the Service the bench connects to leaves it unanswered."""
    svcs = services(100)
    one, every = render("nftables", services(1), "1.31"), render("nftables", svcs, "1.31")
    without = render("nftables", svcs[:50], "1.31")  # the changed Service (svcs[50]) gone
    with pytest.raises(RuntimeError, match="after the change: a connection to 172.30.0.51:80 was not answered by its"):
        measure("nftables", one, every, without, svcs[0], svcs[50])
    assert own_namespaces() == []


def test_sigterm_to_lab_bench_sync_leaves_no_namespace():
    bench = [sys.executable, "-m", "lab", "bench", "--sync", "3000", "--modes", "nftables", "--repeat", "3"]
    proc = subprocess.Popen(bench, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    mine = once_built(proc, 3)
    assert mine & set(lab_namespaces()), "the bench never built its node"
    terminated_leaving_nothing(proc, mine)
