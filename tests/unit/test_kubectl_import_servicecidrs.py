"""`lab import` with the cluster's ServiceCIDRs (`kubectl get servicecidrs -o yaml`): the scenario's serviceCIDR is
the cluster's own Service range, which kube-proxy's ServiceCIDR watch gives the nftables proxier (its drop of
unallocated ClusterIPs from 1.33), not the smallest network holding the ClusterIPs; a ServiceCIDR the API server
would refuse is refused naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.describe.errors import ScenarioError
from lab.describe.kubectl.objects import read_inputs
from lab.describe.kubectl.scenario import Imported, Options, import_cluster
from lab.describe.kubectl.write import scenario_text
from lab.describe.load import load_scenario
from lab.render.dataplane import node_dataplane

DUAL = Path(__file__).resolve().parents[1] / "fixtures" / "kubectl" / "dual-stack"
FILES = [str(DUAL / f) for f in ("dump.yaml", "kube-proxy.yaml", "version.yaml")]

LIST = """apiVersion: v1
kind: List
items:
{items}
"""
RANGE = """- apiVersion: networking.k8s.io/v1
  kind: ServiceCIDR
  metadata: {{name: {name}}}
  spec:
    cidrs: {cidrs}
"""


def imported(tmp_path: Path, *ranges: tuple[str, str]) -> Imported:
    items = "".join(RANGE.format(name=name, cidrs=cidrs) for name, cidrs in ranges)
    path = tmp_path / "servicecidrs.yaml"
    path.write_text(LIST.format(items=items))
    return import_cluster(read_inputs([*FILES, str(path)]), Options())


def test_the_clusters_service_range_is_the_scenarios_and_reaches_nftables_kube_proxy(tmp_path):
    result = imported(tmp_path, ("kubernetes", '["10.96.0.0/12", "fd00:10:96::/108"]'))
    assert result.scenario["cluster"]["serviceCIDR"] == "10.96.0.0/12,fd00:10:96::/108"
    assert not [n for n in result.notes if "ServiceCIDR" in n]
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text(result.scenario))
    (topo,) = load_scenario(path, {"kubeVersion": ["1.33"]}).variants
    plane = node_dataplane(topo, topo.nodes[0].name)
    assert plane.other_family is not None
    assert "ip daddr { 10.96.0.0/12 } drop" in plane.nft
    assert "ip6 daddr { fd00:10:96::/108 } drop" in plane.other_family.nft


def test_without_servicecidrs_the_range_is_said_to_be_inferred(tmp_path):
    result = import_cluster(read_inputs(FILES), Options())
    assert result.scenario["cluster"]["serviceCIDR"] == "10.96.0.0/16,fd00:10:96::/112"
    said = [n for n in result.notes if "no IPv4 ServiceCIDR in the input" in n]
    assert len(said) == 1 and "kubectl get servicecidrs" in said[0]


def test_of_several_ranges_the_one_holding_every_cluster_ip_is_taken_and_the_others_said(tmp_path):
    result = imported(tmp_path, ("extra", '["10.100.0.0/16"]'), ("kubernetes", '["10.96.0.0/12", "fd00:10:96::/108"]'))
    assert result.scenario["cluster"]["serviceCIDR"] == "10.96.0.0/12,fd00:10:96::/108"
    (said,) = [n for n in result.notes if "ServiceCIDR(s) extra 10.100.0.0/16 left out" in n]
    assert "kubernetes's 10.96.0.0/12" in said


def test_ranges_that_each_hold_only_some_cluster_ips_are_covered_and_said(tmp_path):
    result = imported(tmp_path, ("a", '["10.96.0.0/30", "fd00:10:96::/108"]'), ("b", '["10.96.0.12/30"]'))
    assert result.scenario["cluster"]["serviceCIDR"] == "10.96.0.0/28,fd00:10:96::/108"
    assert [n for n in result.notes if "no IPv4 ServiceCIDR holds every IPv4 ClusterIP" in n]


@pytest.mark.parametrize(
    ("cidrs", "said"),
    [
        ("[]", "spec.cidrs: expected one or two CIDRs (one of each family), got none"),
        ('["10.96.0.0/16", "fd00::/108", "10.97.0.0/16"]', "expected one or two CIDRs (one of each family), got 3"),
        ('["10.96.0.0/16", "10.97.0.0/16"]', "spec.cidrs[1]: a second IPv4 CIDR"),
        ('["10.96.0.0/33"]', "spec.cidrs[0]"),
        ("[16]", "spec.cidrs[0]: expected a network"),
    ],
)
def test_a_servicecidr_the_api_server_refuses_is_refused_with_its_field(tmp_path, cidrs, said):
    with pytest.raises(ScenarioError) as caught:
        imported(tmp_path, ("kubernetes", cidrs))
    text = str(caught.value)
    assert said in text and "servicecidrs.yaml" in text and "ServiceCIDR kubernetes" in text
