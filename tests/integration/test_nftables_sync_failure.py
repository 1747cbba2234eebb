"""kube-proxy's nftables sync refused by the kernel (kubernetes#139515), on the real kernel.

A Service without endpoints whose namespace and name are 63 characters each gets a no-endpoint-services element
commented "namespace/name:http", 132 bytes. nft (1.0.6 here) refuses a comment over 128 bytes ("comment too
long, 128 characters maximum allowed") and with it the whole transaction: kube-proxy 1.30-1.36 leaves the node
without any Service rule, so another Service's ClusterIP goes un-NATed to the underlay, whose gateway answers
net unreachable. 1.37 cuts the comment (#139516) and the node is served.

The catalogue's nftables-long-comment.yaml shows the same across releases and modes; here, the sync that
follows a refused one (the long Service deleted) succeeds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.api import run_variant
from lab.describe.load import load_scenario
from lab.describe.topology import Topology
from lab.render.kubeproxy.nftables import render_nftables
from lab.render.kubeproxy.service import ProxyConfig, ServicePort

pytestmark = pytest.mark.nftables

SCENARIO = """\
name: nftables-sync-failure
cluster: {clusterCIDR: 10.244.0.0/16, serviceCIDR: 10.96.0.0/16, proxyMode: nftables}
nodes:
  - {name: node1, ip: 192.168.56.11, podCIDR: 10.244.1.0/24}
workload:
  - {kind: Pod, metadata: {name: web, labels: {app: web}},
     spec: {nodeName: node1, containers: [{name: web, ports: [{containerPort: 8080}]}]}}
  - {kind: Pod, metadata: {name: client}, spec: {nodeName: node1, containers: [{name: client}]}}
  - {kind: Service, metadata: {name: web}, spec: {selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}}
  - {kind: Service, metadata: {name: LONG, namespace: LONG}, spec: {ports: [{name: http, port: 80}]}}
probes:
  - name: other-service
    from: client
    to: {service: web, port: 80}
    expect: {outcome: delivered, backend: web, source: client}
  - name: after-the-long-one-is-deleted
    before: [{delete: Service/LONG/LONG}]
    from: client
    to: {service: web, port: 80}
    expect: {outcome: delivered, backend: web, source: client}
"""
LONG = "a-name-of-sixty-three-characters-as-kubernetes-allows-xxxxxxxxx"


def variant(tmp_path: Path, version: str) -> Topology:
    path = tmp_path / "nftables-sync-failure.yaml"
    path.write_text(SCENARIO.replace("LONG", LONG))
    (topo,) = load_scenario(path, {"kubeVersion": [version]}).variants
    return topo


def test_the_comment_is_over_the_kernels_limit():
    assert len(LONG) == 63
    rules = render_nftables(
        [ServicePort(LONG, LONG, "http", "TCP", 80, "10.96.0.10")], ProxyConfig(), ("10.0.0.1",), "1.36"
    )
    assert f'comment "{LONG}/{LONG}:http"' in rules.script() and len(f"{LONG}/{LONG}:http") == 132


def test_a_refused_first_sync_leaves_the_node_without_service_rules(host_unchanged, tmp_path, own_namespaces):
    """1.36: the first sync is refused; once the long Service is deleted the next sync succeeds and serves."""
    refused, served = run_variant(variant(tmp_path, "1.36")).results
    assert refused.observed.outcome == "unreachable", refused.observed
    why = refused.observed.explanation
    assert "kube-proxy's nftables sync failed on node1: comment too long, 128 characters maximum allowed" in why
    assert "the node has no Service rules" in why and "no-endpoint-services" in why, why
    assert served.observed.outcome == "delivered", served.observed
    assert "sync failed" not in served.observed.explanation
    assert own_namespaces() == []


def test_1_37_cuts_the_comment_and_its_sync_succeeds(host_unchanged, tmp_path, own_namespaces):
    for result in run_variant(variant(tmp_path, "1.37")).results:
        assert result.observed.outcome == "delivered", result.observed
        assert "sync failed" not in result.observed.explanation
    assert own_namespaces() == []
