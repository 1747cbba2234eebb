"""`lab import` of a Calico cluster with its IPPools (crd.projectcalico.org/v1): the pool holding the pod network
sets the scenario's natOutgoing, and each pool's note says how the lab built it; what the lab does not build is said,
pools it cannot build as one are refused in words."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_kubectl_import import NODEPORT, SHOP, imported, loaded, notes_about

from lab.describe.errors import ScenarioError

POOL = """\
apiVersion: crd.projectcalico.org/v1
kind: IPPool
metadata: {{name: {name}}}
spec: {{{spec}}}
"""


def pools(tmp_path: Path, *specs: tuple[str, str]) -> str:
    path = tmp_path / "ippools.yaml"
    path.write_text("---\n".join(POOL.format(name=name, spec=spec) for name, spec in specs))
    return str(path)


def test_a_pool_without_nat_outgoing_reaches_the_scenario(tmp_path):
    given = pools(tmp_path, ("default-ipv4-ippool", "cidr: 100.64.0.0/16, ipipMode: Always"))
    result = imported([*SHOP, given])
    assert result.scenario["cluster"]["natOutgoing"] is False  # the CRD's default: unset is false
    assert loaded(tmp_path, result).cluster.nat_outgoing is False
    (said,) = notes_about(result, "IPPool default-ipv4-ippool")
    assert "natOutgoing false" in said and "ipipMode Always: the lab's tunnel" in said


def test_nat_outgoing_true_and_a_pool_routed_without_encapsulation_are_said(tmp_path):
    given = pools(tmp_path, ("pods", "cidr: 100.64.0.0/16, natOutgoing: true, vxlanMode: CrossSubnet"))
    result = imported([*SHOP, given])
    assert result.scenario["cluster"]["natOutgoing"] is True
    (said,) = notes_about(result, "IPPool pods")
    assert "cali-nat-outgoing masquerades" in said
    assert "vxlanMode CrossSubnet" in said and "the node's tunnel address in the lab, the node's own" in said


def test_without_pools_calico_nodes_default_is_said():
    result = imported(SHOP)
    assert "natOutgoing" not in result.scenario["cluster"]
    assert notes_about(result, "no Calico IPPool", "natOutgoing true for 100.64.0.0/16")


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("cidr: 192.168.0.0/16, natOutgoing: true", "outside the pod network 100.64.0.0/16"),
        ("cidr: 100.64.0.0/16, allowedUses: [LoadBalancer]", "LoadBalancer: holds no pod: not modelled"),
        ("cidr: 'fd00:64::/48'", "the lab builds Calico for IPv4 only: not modelled"),
    ],
)
def test_pools_the_lab_does_not_build_are_said(tmp_path, spec, said):
    result = imported([*SHOP, pools(tmp_path, ("other", spec))])
    assert notes_about(result, "IPPool other", said)
    assert notes_about(result, "no Calico IPPool of the pod network")


def test_a_pools_fields_the_lab_does_not_build_from_are_said(tmp_path):
    given = pools(tmp_path, ("pods", "cidr: 100.64.0.0/16, disabled: true, nodeSelector: all(), blockSize: 26"))
    result = imported([*SHOP, given])
    for field in ("disabled", "nodeSelector", "blockSize"):
        assert notes_about(result, f"IPPool pods: spec.{field}: not modelled"), field
    assert not notes_about(result, "spec.cidr: not modelled")


def test_another_groups_ippool_is_not_read(tmp_path):
    path = tmp_path / "antrea.yaml"
    path.write_text("apiVersion: crd.antrea.io/v1beta1\nkind: IPPool\nmetadata: {name: other}\nspec: {}\n")
    assert notes_about(imported([*SHOP, str(path)]), "IPPool other", "not read: not Calico's IPPool")


@pytest.mark.parametrize(
    ("specs", "said"),
    [
        (
            (("a", "cidr: 100.64.0.0/17, natOutgoing: true"), ("b", "cidr: 100.64.128.0/17")),
            "IPPool b: spec.natOutgoing: false, but IPPool a (",
        ),
        ((("a", "cidr: 100.64.0.0/16, ipipMode: Sometimes"),), "IPPool a: spec.ipipMode: expected one of Always"),
        ((("a", "cidr: 100.64.0.0/33"),), "IPPool a: spec.cidr"),
        ((("a", "natOutgoing: true"),), "IPPool a: spec.cidr: expected a network"),
        ((("a", "cidr: 100.64.0.0/16, natOutgoing: 'yes'"),), "IPPool a: spec.natOutgoing: expected true or false"),
    ],
)
def test_pools_the_lab_cannot_build_are_refused_in_words(tmp_path, specs, said):
    with pytest.raises(ScenarioError) as info:
        imported([*SHOP, pools(tmp_path, *specs)])
    assert said in str(info.value)
    assert "ippools.yaml" in str(info.value)


def test_pools_of_a_cluster_without_calico_are_not_read(tmp_path):
    result = imported([*NODEPORT, pools(tmp_path, ("p", "cidr: 10.244.0.0/16"))])
    assert "natOutgoing" not in result.scenario["cluster"]
    assert notes_about(result, "IPPool p", "not read: the lab recognised no Calico")


def test_a_pod_of_calicos_own_blocks_is_said_to_be_of_them(tmp_path):
    text = Path(SHOP[0]).read_text()
    assert text.count("    podIP: 100.64.1.10\n    podIPs:\n    - ip: 100.64.1.10\n") == 1
    dump = tmp_path / "dump.yaml"
    dump.write_text(
        text.replace(
            "    podIP: 100.64.1.10\n    podIPs:\n    - ip: 100.64.1.10\n",
            "    podIP: 100.64.200.10\n    podIPs:\n    - ip: 100.64.200.10\n",
        )
    )
    (said,) = notes_about(
        imported([str(dump), *SHOP[1:]]), "status.podIP", "100.64.200.10 is outside its node's podCIDR"
    )
    assert "Calico's IPAM gives it from its pool's blocks" in said


def test_calico_installed_by_the_tigera_operator_is_recognised(tmp_path):
    text = Path(SHOP[0]).read_text()
    old = "    name: calico-node-5qwzt\n    namespace: kube-system\n"
    assert text.count(old) == 1
    dump = tmp_path / "dump.yaml"
    dump.write_text(text.replace(old, "    name: calico-node-5qwzt\n    namespace: calico-system\n"))
    result = imported([str(dump), *SHOP[1:]])
    assert result.scenario["cluster"]["cni"] == "routed-tunnel"
    assert notes_about(result, "Pod calico-system/calico-node-5qwzt", "the cluster runs Calico")
