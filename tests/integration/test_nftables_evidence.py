"""nftables-mode probes name the rules their packet met, from the kernel's own trace.

lb-local-from-pods without the cluster CIDR (report 1): a pod on node2 (no local ingress endpoint)
reaching the Local LB IP is dropped by kube-proxy's no-endpoint-services map; the node's own
connection is dropped the same way in 1.31 (filter-output runs before DNAT: kubernetes#131765) and
served, masqueraded, in 1.34.
"""

from __future__ import annotations

import pytest
from support.host import REPO

from lab.api import run_variant
from lab.describe.load import load_scenario
from lab.judge.results import VariantRun

SCENARIO = REPO / "topologies" / "lb-local-from-pods.yaml"
NO_ENDPOINT_DROP = (
    "dropped on node2 by kube-proxy service-endpoints-check: "
    "ip daddr . meta l4proto . th dport vmap @no-endpoint-services (verdict drop)"
)


def run(version: str) -> VariantRun:
    matrix = {"proxyMode": ["nftables"], "kubeVersion": [version], "kubeProxyClusterCIDR": [False]}
    (topo,) = load_scenario(SCENARIO, matrix).variants
    return run_variant(topo)


@pytest.fixture(scope="module", params=["1.31", "1.34"])
def observed(request) -> tuple[str, dict]:
    variant = run(request.param)
    return request.param, {r.probe.name: r.observed for r in variant.results}


def test_drop_names_the_no_endpoint_map(observed):
    _, by_probe = observed
    pod = by_probe["pod-on-node-without-ingress"]
    assert (pod.outcome, pod.explanation) == ("dropped", NO_ENDPOINT_DROP)
    assert [(node, hit.chain) for node, hit in pod.rules][-2:] == [
        ("node2", "filter-forward"),
        ("node2", "service-endpoints-check"),
    ]


def test_node_itself_before_and_after_the_output_hook_fix(observed):
    version, by_probe = observed
    node = by_probe["node-without-ingress-itself"]
    chains = [hit.chain for _, hit in node.rules]
    if version == "1.31":
        assert (node.outcome, node.explanation) == ("dropped", NO_ENDPOINT_DROP)
        assert "filter-output" in chains and "nat-output" not in chains  # dropped before DNAT
    else:
        assert node.outcome == "delivered" and node.source_ip == "192.168.56.12"
        assert chains.index("nat-output") < chains.index("filter-output")  # DNAT first since 1.34
        assert any(hit.rule.startswith("masquerade fully-random") for _, hit in node.rules)


def test_only_the_first_packet_of_each_connection_is_counted(observed):
    """A delivered connection's SYN-ACK, ACKs, data and FINs cross the same nodes: only the SYN is the
    probe's path, and it meets each rule once per node, the endpoint's DNAT rule included."""
    _, by_probe = observed
    for name in ("external-client-via-lb", "pod-on-ingress-node"):
        probe = by_probe[name]
        assert probe.outcome == "delivered"
        assert {hit.packets for _, hit in probe.rules} == {1}, probe.rules
        assert any(hit.rule.startswith("meta l4proto tcp dnat to 10.244.1.2:80") for _, hit in probe.rules)
