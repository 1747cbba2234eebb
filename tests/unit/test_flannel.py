"""cni: flannel: flanneld's iptables rules (lab/render/cni/flannel.py) as flannel writes them, its resync's restore
text, and the scenario fields that describe a flannel node (flannel.1's and cni0's addresses, what is refused)."""

from __future__ import annotations

from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario
from lab.render.cni.flannel import ensure_text, node_rules

FLANNEL = BASE.replace("cluster: {", "cluster: {cni: flannel, ")


def test_the_rules_are_flannels_in_its_order():
    # masqRules() and forwardRules() of flannel-io/flannel pkg/trafficmngr/iptables/iptables.go at
    # cdf760595c23292fd03ff4daf03638ac1ceef417 (v0.28.9), with --random-fully, for Network 10.244.0.0/16 and
    # the node's lease 10.244.1.0/24.
    masq, forward = '-m comment --comment "flanneld masq"', '-m comment --comment "flanneld forward"'
    assert [rule.line() for rule in node_rules("10.244.0.0/16", "10.244.1.0/24")] == [
        f"-A POSTROUTING {masq} -j FLANNEL-POSTRTG",
        f"-A FLANNEL-POSTRTG -m mark --mark 0x4000/0x4000 {masq} -j RETURN",
        f"-A FLANNEL-POSTRTG -s 10.244.1.0/24 -d 10.244.0.0/16 {masq} -j RETURN",
        f"-A FLANNEL-POSTRTG -s 10.244.0.0/16 -d 10.244.1.0/24 {masq} -j RETURN",
        f"-A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.1.0/24 {masq} -j RETURN",
        f"-A FLANNEL-POSTRTG -s 10.244.0.0/16 ! -d 224.0.0.0/4 {masq} -j MASQUERADE --random-fully",
        f"-A FLANNEL-POSTRTG ! -s 10.244.0.0/16 -d 10.244.0.0/16 {masq} -j MASQUERADE --random-fully",
        f"-A FORWARD {forward} -j FLANNEL-FWD",
        f"-A FLANNEL-FWD -s 10.244.0.0/16 {forward} -j ACCEPT",
        f"-A FLANNEL-FWD -d 10.244.0.0/16 {forward} -j ACCEPT",
    ]


def test_the_resync_adds_everything_where_kube_proxys_restore_left_nothing():
    rules = node_rules("10.244.0.0/16", "10.244.2.0/24")
    text = ensure_text(rules, frozenset())
    nat, filter_ = text.split("COMMIT\n")[:2]
    assert nat.startswith("*nat\n:FLANNEL-POSTRTG - [0:0]\n-A POSTROUTING ")
    assert filter_.startswith("*filter\n:FLANNEL-FWD - [0:0]\n-A FORWARD ")
    assert "-D " not in text
    assert text.count("\n-A ") == len(rules)


def test_the_resync_leaves_rules_that_all_stand():
    rules = node_rules("10.244.0.0/16", "10.244.2.0/24")
    assert ensure_text(rules, frozenset(rules)) == ""


def test_the_resync_deletes_the_jumps_that_stand_before_adding_all_again():
    # ensureIPTables: one rule missing, the present ones are deleted and every rule added again, in order.
    rules = node_rules("10.244.0.0/16", "10.244.2.0/24")
    jump = rules[0]
    text = ensure_text(rules, frozenset({jump}))
    assert f"{jump.line('-D')}\n{jump.line()}\n" in text
    assert text.count("-D ") == 1


def test_a_flannel_node_has_cni0_and_flannel_1(tmp_path):
    (topo,) = load_scenario(write(tmp_path, FLANNEL)).variants
    node = topo.node("node1")
    assert (node.bridge_ip, node.tunnel_ip) == ("10.244.1.1", "10.244.1.0")
    names = topo.address_names()
    assert names["10.244.1.0"] == "node1/flannel.1" and names["10.244.1.1"] == "node1/cni0"
    assert all(pod.ip not in ("10.244.1.0", "10.244.1.1") for pod in topo.built_pods)


def test_a_source_may_name_flannel_1(tmp_path):
    text = FLANNEL.replace("source: node2}", "source: entry/flannel.1}")
    (topo,) = load_scenario(write(tmp_path, text)).variants
    assert topo.probes[0].expected.source == "entry/flannel.1"
    error = error_for(tmp_path, FLANNEL.replace("source: node2}", "source: entry/tunl0}"))
    assert "entry/flannel.1" in error.message, str(error)


def test_flannel_is_modelled_for_ipv4_only(tmp_path):
    text = FLANNEL
    for ipv4, ipv6 in (
        ("10.244.0.0/16", "'fd00:10:244::/56'"),
        ("10.96.0.0/16", "'fd00:10:96::/112'"),
        ("192.168.56.0/24", "'fd00:56::/64'"),
        ("10.244.1.0/24", "'fd00:10:244:1::/64'"),
        ("10.244.2.0/24", "'fd00:10:244:2::/64'"),
        ("192.168.56.1", "'fd00:56::1"),
    ):
        text = text.replace(ipv4, ipv6)
    text = text.replace("'fd00:56::11,", "'fd00:56::11',").replace("'fd00:56::12,", "'fd00:56::12',")
    text = text.replace("'fd00:56::100}", "'fd00:56::100'}")
    error = error_for(tmp_path, text)
    assert "cni: flannel is modelled for IPv4 pod blocks only" in error.message, str(error)


def test_flannel_refuses_kubenets_promiscuous_bridge(tmp_path):
    error = error_for(tmp_path, FLANNEL.replace("cluster: {", "cluster: {hairpinMode: promiscuous-bridge, "))
    assert error.field == "cluster.hairpinMode", str(error)
    assert "flannel's CNI config" in error.message


def test_flannel_refuses_routed_tunnels_device(tmp_path):
    error = error_for(tmp_path, FLANNEL.replace("cluster: {", "cluster: {tunnel: ipip, "))
    assert error.field == "cluster.tunnel", str(error)
    assert "flannel's is its vxlan backend's flannel.1" in error.message
