"""The actors around the cluster on a real kernel: routers, load balancers, egress gateway, ip-masq-agent, and
cni routed-tunnel leave the host's own network namespace as it was, and no namespaces or sockets behind."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
from support.host import REPO

from lab.api import run_variant
from lab.describe.load import load_scenario

SCENARIOS = ["lb-loopback-internal-lb.yaml", "metallb-bgp-ipip.yaml"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_actor_scenarios_leave_host_untouched(host_unchanged, own_namespaces, name):
    for topo in load_scenario(REPO / "topologies" / name, {"proxyMode": ["iptables"]}).variants:
        run = run_variant(topo)
        assert run.results and all(r.verdict.ok for r in run.results), [r.verdict for r in run.results]
    # Other runs may come and go meanwhile; none of ours may stay.
    assert own_namespaces() == []


def test_load_balancer_health_checks_decide_the_backends():
    from lab.install.actors import install_actors
    from lab.install.dataplane import FirstSync
    from lab.realize.build import realize
    from lab.render.dataplane import render, setups

    topo = load_scenario(REPO / "topologies" / "lb-loopback-internal-lb.yaml", {"proxyMode": ["iptables"]}).variants[0]
    planes = render(topo)
    with ExitStack() as stack:
        first = FirstSync(planes, topo.cluster.iptables_backend)
        realized = stack.enter_context(realize(topo, setups(planes), tunnel="", alongside=first.alongside))
        decisions = {(d.lb.name, d.frontend.service): d for d in install_actors(realized, stack)}
        local = decisions[("clb-internal", "default/ingress-local")]
        assert [(c.node, c.status) for c in local.checks] == [("node1", 200), ("node2", 503), ("node3", 503)]
        assert '"localEndpoints": 1' in local.checks[0].body and local.backends == ("node1",)
        cluster = decisions[("clb-internal", "default/ingress-cluster")]
        assert [c.status for c in cluster.checks] == [200, 200, 200] and cluster.backends == ("node1", "node2", "node3")
        assert '"lastUpdated"' in cluster.checks[0].body
