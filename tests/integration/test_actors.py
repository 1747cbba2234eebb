"""The actors around the cluster on a real kernel: routers, load balancers, egress gateway, ip-masq-agent, and
cni routed-tunnel leave the host's own network namespace as it was, and no namespaces or sockets behind."""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING

import pytest
from support.host import REPO

from lab.api import run_variant
from lab.describe.load import load_scenario

if TYPE_CHECKING:
    from lab.describe.topology import Topology
    from lab.install.actors import Decision
    from lab.realize.build import Realized

SCENARIOS = ["lb-loopback-internal-lb.yaml", "metallb-bgp-ipip.yaml"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_actor_scenarios_leave_host_untouched(host_unchanged, own_namespaces, name):
    for topo in load_scenario(REPO / "topologies" / name, {"proxyMode": ["iptables"]}).variants:
        run = run_variant(topo)
        assert run.results and all(r.verdict.ok for r in run.results), [r.verdict for r in run.results]
    # Other runs may come and go meanwhile; none of ours may stay.
    assert own_namespaces() == []


def _with_actors(topo: Topology, stack: ExitStack) -> tuple[Realized, list[Decision]]:
    """The scenario built, its actors installed (undone when `stack` closes), and the load balancers' decisions."""
    from lab.install.actors import install_actors
    from lab.install.dataplane import FirstSync
    from lab.realize.build import realize
    from lab.render.dataplane import render, setups

    planes = render(topo)
    first = FirstSync(planes, topo)
    realized = stack.enter_context(realize(topo, setups(planes), tunnel="", alongside=first.alongside))
    return realized, install_actors(realized, stack)


def test_load_balancer_health_checks_decide_the_backends():
    topo = load_scenario(REPO / "topologies" / "lb-loopback-internal-lb.yaml", {"proxyMode": ["iptables"]}).variants[0]
    with ExitStack() as stack:
        _, installed = _with_actors(topo, stack)
        decisions = {(d.lb.name, d.frontend.service): d for d in installed}
        local = decisions[("clb-internal", "default/ingress-local")]
        assert [(c.node, c.status) for c in local.checks] == [("node1", 200), ("node2", 503), ("node3", 503)]
        assert '"localEndpoints": 1' in local.checks[0].body and local.backends == ("node1",)
        cluster = decisions[("clb-internal", "default/ingress-cluster")]
        assert [c.status for c in cluster.checks] == [200, 200, 200] and cluster.backends == ("node1", "node2", "node3")
        assert '"lastUpdated"' in cluster.checks[0].body


DUAL_STACK_LB = """\
name: health-both-families
cluster:
  kubeVersion: "1.31"
  proxyMode: nftables
  clusterCIDR: 10.244.0.0/16,fd00:10:244::/56
  serviceCIDR: 10.96.0.0/16,fd00:10:96::/112
  underlay: 192.168.56.0/24,fd00:56::/64
nodes:
  - {name: node1, ip: "192.168.56.11,fd00:56::11", podCIDR: "10.244.1.0/24,fd00:10:244:1::/64"}
externalHosts:
  - {name: client, ip: "192.168.56.100,fd00:56::100"}
loadBalancers:
  - {name: clb}
workload:
  - kind: Pod
    metadata: {name: web, labels: {app: web}}
    spec: {nodeName: node1, containers: [{name: web, ports: [{containerPort: 8080}]}]}
  - kind: Service
    metadata: {name: web}
    spec:
      type: LoadBalancer
      externalTrafficPolicy: Local
      healthCheckNodePort: 32000
      selector: {app: web}
      ports: [{port: 80, targetPort: 8080}]
probes:
  - {name: node, from: client, to: {node: node1, port: 32000}, expect: observe}
"""


@pytest.mark.parametrize(("family", "port"), [(f, p) for f in ("IPv4", "IPv6") for p in (10256, 32000)])
def test_kube_proxys_health_servers_answer_over_both_families(tmp_path, family, port):
    """kube-proxy listens on 0.0.0.0:PORT, which Go takes for both families (lab/install/health.py): a node answers
    its /healthz and a healthCheckNodePort over IPv6 as over IPv4."""
    from lab.install.health import http_check

    path = tmp_path / "health.yaml"
    path.write_text(DUAL_STACK_LB)
    topo = load_scenario(path).variants[0]
    with ExitStack() as stack:
        realized, _ = _with_actors(topo, stack)
        source, node = topo.address_of("client", family), topo.address_of("node1", family)
        assert source and node
        check = http_check(realized.namespaces["client"], source, "node1", node, port, "/healthz", 2.0)
        assert check.status == 200, check
