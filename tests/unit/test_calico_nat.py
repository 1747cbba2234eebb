"""Calico's Felix rules (lab/render/cni/calico.py): the natOutgoing chain and pool sets, the hash comments Felix
writes, and the scenario field that sets the pool's natOutgoing."""

from __future__ import annotations

import pytest
from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario
from lab.install.calico import calico_rules
from lab.render.cni.calico import Pool, felix_rules, rule_hashes

TUNNEL = BASE.replace("cluster: {", "cluster: {cni: routed-tunnel, tunnel: vxlan, ")


def test_the_hashes_are_felixs_own():
    # Felix's comments on a node's nat table, as iptables-save printed them in projectcalico/calico's
    # felix/fv/cali-iptables-dump.txt at 7e83f7eabd04b7c0c1f4c2e8b071a84b16169116.
    assert rule_hashes(
        "cali-POSTROUTING",
        [
            "--jump cali-fip-snat",
            "--jump cali-nat-outgoing",
            "--out-interface vxlan.calico -m addrtype ! --src-type LOCAL --limit-iface-out -m addrtype --src-type "
            "LOCAL --jump MASQUERADE --random-fully",
        ],
    ) == ["Z-c7XtVd2Bq7s_hA", "nYKhEzDlr11Jccal", "e9dnSgSVNmIcpVhP"]
    assert rule_hashes("POSTROUTING*appends*", ["--jump cali-POSTROUTING"]) == ["0i8pjzKKPyA34aQD"]


def test_nat_outgoing_masquerades_what_leaves_the_pools():
    rules = felix_rules([Pool("10.244.0.0/16", True), Pool("10.250.0.0/16", False)], "tunl0")
    assert (
        '-A cali-nat-outgoing -m comment --comment "cali:flqWnvo8yq4ULQLa" -m set --match-set cali40masq-ipam-pools '
        "src -m set ! --match-set cali40all-ipam-pools dst --jump MASQUERADE --random-fully\n"
    ) in rules.iptables
    assert "--out-interface tunl0 " in rules.iptables
    assert rules.ipsets.splitlines() == [
        "create cali40masq-ipam-pools hash:net family inet maxelem 1048576",
        "add cali40masq-ipam-pools 10.244.0.0/16",
        "create cali40all-ipam-pools hash:net family inet maxelem 1048576",
        "add cali40all-ipam-pools 10.244.0.0/16",
        "add cali40all-ipam-pools 10.250.0.0/16",
    ]


def test_without_nat_outgoing_the_chain_is_empty_and_the_sets_stay():
    rules = felix_rules([Pool("10.244.0.0/16", False)], "vxlan.calico")
    assert ":cali-nat-outgoing - [0:0]" in rules.iptables
    assert "-A cali-nat-outgoing" not in rules.iptables
    assert "-A cali-POSTROUTING" in rules.iptables and "-A POSTROUTING" in rules.iptables
    assert "add cali40masq-ipam-pools" not in rules.ipsets
    assert "add cali40all-ipam-pools 10.244.0.0/16" in rules.ipsets


@pytest.mark.parametrize(("given", "nat"), [("", True), ("natOutgoing: true, ", True), ("natOutgoing: false, ", False)])
def test_the_pool_of_a_calico_cluster_is_its_pod_network(tmp_path, given, nat):
    (topo,) = load_scenario(write(tmp_path, TUNNEL.replace("cluster: {", "cluster: {" + given))).variants
    assert topo.cluster.nat_outgoing is nat
    rules = calico_rules(topo, "vxlan.calico")
    assert rules is not None
    assert ("add cali40masq-ipam-pools 10.244.0.0/16" in rules.ipsets) is nat


def test_a_bridge_cluster_has_no_felix(tmp_path):
    (topo,) = load_scenario(write(tmp_path, BASE)).variants
    assert calico_rules(topo, "") is None


def test_nat_outgoing_goes_with_calico(tmp_path):
    error = error_for(tmp_path, BASE.replace("cluster: {", "cluster: {natOutgoing: false, "))
    assert error.field == "cluster.natOutgoing", str(error)
    assert "goes with cni: routed-tunnel, not bridge" in error.message


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (
            TUNNEL.replace("cluster: {", 'cluster: {natOutgoing: "yes", '),
            "cluster.natOutgoing",
            "expected true or false",
        ),
        (TUNNEL + "matrix: {natOutgoing: [true, 1]}\n", "matrix.natOutgoing", "1"),
    ],
)
def test_nat_outgoing_is_true_or_false(tmp_path, text, field, message):
    error = error_for(tmp_path, text)
    assert error.field.startswith(field), str(error)
    assert message in error.message, str(error)
