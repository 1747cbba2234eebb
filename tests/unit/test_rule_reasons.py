"""render keeps, beside the rules it writes, why it wrote each rule that marks for masquerade or chooses an endpoint:
the Service field or kube-proxy setting behind it, and how the kernel's listing or trace shows that rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.describe.load import load_scenario
from lab.render.dataplane import rule_reasons
from lab.render.kubeproxy.because import CHOICE, MARK

REPO = Path(__file__).resolve().parents[2]
NODEPORT = REPO / "topologies" / "nodeport-source-ip.yaml"
HAIRPIN = REPO / "topologies" / "hairpin.yaml"


def _reasons(path: Path, node: str, **axes: str):
    (topo,) = load_scenario(path, {key: [value] for key, value in axes.items()}).variants
    return rule_reasons(topo, node)


def _marks(reasons, name: str):
    return [b for b in reasons if b.kind == MARK and b.setting is not None and b.setting.name == name]


# How each mode's evidence shows the external chain's mark rule (iptables-save -c, the nft trace, ipvs' ipset rule).
SHOWN = {
    "iptables": (
        "nat",
        "KUBE-EXT-NXVI7ZHQBTBXMZW4",
        '-m comment --comment "masquerade traffic for default/openresty:http external destinations" -j KUBE-MARK-MASQ',
    ),
    "nftables": (
        "kube-proxy",
        "external-TQEK22XR-default/openresty/tcp/http",
        "jump mark-for-masquerade (verdict jump mark-for-masquerade)",
    ),
    "ipvs": (
        "nat",
        "KUBE-NODE-PORT",
        '-p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set '
        "KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ",
    ),
}


@pytest.mark.parametrize("mode", ["iptables", "nftables", "ipvs"])
def test_the_nodeport_masquerade_is_written_because_of_external_traffic_policy_cluster(mode):
    reasons = _reasons(NODEPORT, "node2", proxyMode=mode, externalTrafficPolicy="Cluster")
    (marked,) = [b for b in _marks(reasons, "externalTrafficPolicy") if b.matches(*SHOWN[mode])]
    assert str(marked.setting) == "externalTrafficPolicy Cluster"


# ipvs writes its NodePort mark rule for a set, not a Service: a Local one is in KUBE-NODE-PORT-LOCAL-TCP too,
# whose RETURN comes first (the kernel run shows it never marks).
@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_external_traffic_policy_local_writes_no_masquerade_of_outside_traffic(mode):
    reasons = _reasons(NODEPORT, "node2", proxyMode=mode, externalTrafficPolicy="Local")
    assert not [b for b in _marks(reasons, "externalTrafficPolicy") if b.setting.value == "Cluster"]
    assert not [b for b in reasons if b.matches(*SHOWN[mode])]


def test_a_mark_rule_is_told_from_its_chain_neighbours():
    """The external chain's jump to the service chain is not its mark rule, nor a rule of another chain."""
    reasons = _reasons(NODEPORT, "node2", proxyMode="iptables", externalTrafficPolicy="Cluster")
    table, chain, _ = SHOWN["iptables"]
    assert not [b for b in reasons if b.matches(table, chain, "-j KUBE-SVC-NXVI7ZHQBTBXMZW4")]
    assert not [b for b in reasons if b.matches(table, "KUBE-NODEPORTS", SHOWN["iptables"][2])]


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_the_endpoint_chain_masquerades_a_pod_reaching_itself(mode):
    reasons = _reasons(HAIRPIN, "node1", proxyMode=mode, hairpinMode="hairpin-veth")
    (hairpin,) = _marks(reasons, "kube-proxy's hairpin masquerade")
    assert hairpin.chain.startswith(("KUBE-SEP-", "endpoint-"))
    assert hairpin.setting.owner == "Service default/web"


def test_ipvs_masquerades_a_pod_reaching_itself_by_its_loopback_set():
    reasons = _reasons(HAIRPIN, "node1", proxyMode="ipvs", hairpinMode="hairpin-veth")
    (hairpin,) = _marks(reasons, "kube-proxy's hairpin masquerade")
    assert (hairpin.chain, hairpin.says) == ("KUBE-POSTROUTING", ("--match-set KUBE-LOOP-BACK ", "-j MASQUERADE"))


@pytest.mark.parametrize("mode", ["iptables", "nftables", "ipvs"])
def test_each_endpoint_choice_says_among_how_many(mode):
    reasons = _reasons(NODEPORT, "node2", proxyMode=mode, externalTrafficPolicy="Local")
    choices = [b for b in reasons if b.kind == CHOICE]
    assert choices
    assert all("1" in b.choice or "only" in b.choice for b in choices), [b.choice for b in choices]


def test_a_local_policy_chain_names_the_policy_that_limits_the_choice():
    reasons = _reasons(NODEPORT, "node1", proxyMode="iptables", externalTrafficPolicy="Local")
    local = [b for b in reasons if b.kind == CHOICE and b.chain.startswith("KUBE-SVL-")]
    assert [str(b.setting) for b in local] == ["externalTrafficPolicy Local"]


def test_kube_proxy_1_23_writes_the_nodeport_masquerade_in_the_service_chain_for_etp_cluster():
    """The KUBE-XLB era: the NodePort's mark rule is the Service chain's own, as iptables-save lists it."""
    reasons = _reasons(NODEPORT, "node2", proxyMode="iptables", externalTrafficPolicy="Cluster", kubeVersion="1.23")
    shown = '-p tcp -m comment --comment "default/openresty:http" -m tcp --dport 30080 -j KUBE-MARK-MASQ'
    (marked,) = [b for b in reasons if b.matches("nat", "KUBE-SVC-NXVI7ZHQBTBXMZW4", shown)]
    assert str(marked.setting) == "externalTrafficPolicy Cluster"


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_topology_hints_are_named_as_what_narrowed_the_choice(mode):
    """trafficDistribution PreferClose and (1.34) PreferSameNode: node3 (zone-b) balances over the endpoints hinted
    for zone-b, or for itself."""
    path = REPO / "tests" / "integration" / "topologies" / "topology-hints.yaml"
    (topo,) = load_scenario(path, {"proxyMode": [mode], "kubeVersion": ["1.34"]}).variants
    choices = [b for b in rule_reasons(topo, "node3") if b.kind == CHOICE and b.setting is not None]
    assert {(b.setting.name, b.setting.value, b.setting.owner) for b in choices} == {
        ("topology hints (zone)", "zone-b", "Service default/close"),
        ("topology hints (node)", "node3", "Service default/same-node"),
    }
    assert {b.choice for b in choices} == {"at random among 2 endpoints", "the only endpoint"}
