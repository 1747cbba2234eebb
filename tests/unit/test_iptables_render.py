"""kube-proxy's iptables renderer against kube-proxy's own unit tests.

The cases are ported from pkg/proxy/iptables/proxier_test.go at kubernetes/kubernetes
531be81208e2274ef42e72525a26610a9622bcdf:
- golden payloads (tests/golden/iptables/*.txt) compared the way assertIPTablesRulesEqual does:
  kube-proxy's output is reordered by sortIPTablesRules and must then equal the expected text;
- single-chain expectations compared as assertIPTablesChainEqual does.
Its packet-flow tests (runPacketFlowTests) are not simulated here: they run on the real kernel in
tests/integration/test_kubeproxy_agreement.py, from the same inputs (tests/support/cases.py,
which describes the fake proxier they mirror).
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from support.builders import ep, svc
from support.cases import FAKE, NODE_PORTS_VARIANTS, node_ports_inputs, render
from support.goldens import (
    assert_chain_equal,
    assert_rules_equal,
    check_rule_jumps,
    golden,
)

from lab.render.kubeproxy import hashing
from lab.render.kubeproxy.iptables import JUMP_RULES
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort

# --- golden payloads --------------------------------------------------------------------------


def overall_services() -> list[ServicePort]:
    """TestOverallIPTablesRules' Services and EndpointSlices."""
    return [
        # ClusterIP service
        svc("ns1", "svc1", "172.30.0.41", endpoints=(ep("10.180.0.1"),)),
        # LoadBalancer, Local traffic policy; its only endpoint has no NodeName, so it is not local
        svc(
            "ns2",
            "svc2",
            "172.30.0.42",
            node_port=3001,
            load_balancer_ips=("1.2.3.4",),
            external_ips=("192.168.99.22",),
            health_check_node_port=30000,
            external_policy="Local",
            endpoints=(ep("10.180.0.2"),),
        ),
        # NodePort
        svc("ns3", "svc3", "172.30.0.43", node_port=3003, endpoints=(ep("10.180.0.3"),)),
        # externalIP (type NodePort, but no nodePort on the port)
        svc(
            "ns4",
            "svc4",
            "172.30.0.44",
            external_ips=("192.168.99.33",),
            endpoints=(ep("10.180.0.4"), ep("10.180.0.5", local=True)),
        ),
        # LoadBalancer, Cluster policy, source ranges (with stray whitespace), ClientIP affinity;
        # its healthCheckNodePort is dropped by kube-proxy because the policy is Cluster.
        svc(
            "ns5",
            "svc5",
            "172.30.0.45",
            node_port=3002,
            load_balancer_ips=("5.6.7.8",),
            health_check_node_port=30000,
            load_balancer_source_ranges=(" 203.0.113.0/25",),
            affinity_timeout=10800,
            endpoints=(ep("10.180.0.3"),),
        ),
        # ClusterIP without endpoints
        svc("ns6", "svc6", "172.30.0.46"),
    ]


def test_overall_iptables_rules():
    payload = render(overall_services()).kube_proxy_payload
    assert_rules_equal(golden("overall_iptables_rules.txt"), payload)
    check_rule_jumps(payload)


def test_bad_ips_are_written_canonically():
    """TestBadIPs: leading zeros in Service and endpoint addresses are parsed the sloppy Go way."""
    bad = svc(
        "ns1",
        "svc1",
        "172.30.0.041",
        node_port=3001,
        load_balancer_ips=("1.2.3.004",),
        external_ips=("192.168.099.022",),
        load_balancer_source_ranges=("203.0.113.000/025",),
        endpoints=(ep("10.180.00.001"),),
    )
    payload = render([bad]).kube_proxy_payload
    assert_rules_equal(golden("bad_ips.txt"), payload)
    check_rule_jumps(payload)


def test_sync_proxy_rules_repeated_first_full_sync():
    services = [
        svc("ns1", "svc1", "172.30.0.41", endpoints=(ep("10.0.1.1"),)),
        svc("ns2", "svc2", "172.30.0.42", port=8080, port_name="p8080", endpoints=(ep("10.0.2.1", 8080),)),
    ]
    payload = render(services).kube_proxy_payload
    assert_rules_equal(golden("sync_proxy_rules_repeated_initial.txt"), payload)
    check_rule_jumps(payload)


def test_normaliser_can_fail():
    """The comparison is real: one changed rule is reported."""
    payload = render(overall_services()).kube_proxy_payload.replace("--probability 0.5000000000", "--probability 0.5")
    with pytest.raises(pytest.fail.Exception, match="rules do not match"):
        assert_rules_equal(golden("overall_iptables_rules.txt"), payload)


# --- single chains ------------------------------------------------------------------------------

FORWARD_ACCEPTS = (
    '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT\n'
    '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule"'
    " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n"
)


@pytest.mark.parametrize(
    ("nfacct", "tcp_liberal", "drop_rule"),
    [
        (False, False, "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP\n"),
        (
            True,
            False,
            "-A KUBE-FORWARD -m conntrack --ctstate INVALID"
            " -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP\n",
        ),
        (False, True, ""),
    ],
)
def test_drop_invalid_rule(nfacct, tcp_liberal, drop_rule):
    """TestDropInvalidRule."""
    config = replace(FAKE, nfacct_counters=nfacct, conntrack_tcp_be_liberal=tcp_liberal)
    payload = render([], config).kube_proxy_payload
    assert_chain_equal("filter", "KUBE-FORWARD", drop_rule + FORWARD_ACCEPTS, payload)


@pytest.mark.parametrize("random_fully", [False, True])
def test_masquerade_rule(random_fully):
    """TestMasqueradeRule."""
    expected = (
        "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN\n"
        "-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000\n"
        '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE'
        + (" --random-fully" if random_fully else "")
        + "\n"
    )
    payload = render([], replace(FAKE, random_fully=random_fully)).kube_proxy_payload
    assert_chain_equal("nat", "KUBE-POSTROUTING", expected, payload)


def test_masquerade_mark_defaults_to_what_new_proxier_formats():
    rules = render([], ProxyConfig())
    assert "-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000" in rules.nat_rules
    assert "-j MASQUERADE --random-fully" in rules.kube_proxy_payload


# --- TestNodePorts: the rules besides its packet flows -------------------------------------------

LOCALNET_RULE = (
    '-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections"'
    " -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP\n"
)


@pytest.mark.parametrize(
    ("variant", "expect_firewall"),
    [
        ("localhost-nodeports enabled", True),
        ("localhost-nodeports disabled", False),
        ("localhost in nodeport-addresses", False),
        ("multiple", False),
    ],
)
def test_node_ports_localnet_firewall_and_route_localnet(variant, expect_firewall):
    """TestNodePorts (its IPv4 cases): --nodeport-addresses and --iptables-localhost-nodeports decide
    KUBE-FIREWALL's localnet rule and route_localnet."""
    services, config = node_ports_inputs(variant)
    rules = render(services, config)
    assert_chain_equal("filter", "KUBE-FIREWALL", LOCALNET_RULE if expect_firewall else "", rules.kube_proxy_payload)
    localhost_nodeports, _ = NODE_PORTS_VARIANTS[variant]
    assert rules.route_localnet == localhost_nodeports


# --- other kube-proxy behaviour ------------------------------------------------------------------


def test_large_cluster_mode_drops_endpoint_comments():
    """TestSyncProxyRulesLargeClusterMode: past 1000 endpoints, no comments on SEP rules."""

    def many(prefix: str, port: int) -> tuple[Endpoint, ...]:
        return tuple(ep(f"{prefix}.{i % 256}.{i // 256}", port) for i in range(LARGE // 2 - 1))

    LARGE = 1000  # noqa: N806 (kube-proxy's largeClusterEndpointsThreshold)
    services = [
        svc("ns1", "svc1", "172.30.0.41", endpoints=many("10.0", 80)),
        svc("ns2", "svc2", "172.30.0.42", 8080, "p8080", endpoints=many("10.1", 8080)),
    ]
    small = render(services, replace(FAKE, masquerade_all=True)).nat_rules
    expected = (
        "-A KUBE-SEP-DKGQUZGBKLTPAR56 -m comment --comment ns1/svc1:p80 -m tcp -p tcp"
        " -j DNAT --to-destination 10.0.0.0:80"
    )
    assert expected in small
    svc3 = svc(
        "ns3", "svc3", "172.30.0.43", 8081, "p8081", endpoints=tuple(ep(f"203.0.113.{n}", 8081) for n in (4, 8, 12))
    )
    large = render([*services, svc3], replace(FAKE, masquerade_all=True)).nat_rules
    assert "-A KUBE-SEP-RUVVH7YV3PHQBDOS -m tcp -p tcp -j DNAT --to-destination 203.0.113.4:8081" in large
    assert "-A KUBE-SEP-DKGQUZGBKLTPAR56 -m tcp -p tcp -j DNAT --to-destination 10.0.0.0:80" in large
    dnat = [rule for rule in large if rule.startswith("-A KUBE-SEP-") and "-j DNAT" in rule]
    assert len(dnat) == 2 * (LARGE // 2 - 1) + 3
    assert not [rule for rule in dnat if "--comment" in rule]


def test_nodeport_addresses_give_one_jump_per_matching_node_ip():
    config = replace(FAKE, node_port_addresses=("192.168.0.0/16", "::/0"))
    rules = render([], config)
    jumps = [rule for rule in rules.nat_rules if rule.endswith("-j KUBE-NODEPORTS")]
    comment = '-m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain"'
    assert jumps == [
        f"-A KUBE-SERVICES {comment} -d 192.168.0.2 -j KUBE-NODEPORTS",
        f"-A KUBE-SERVICES {comment} -d 192.168.1.2 -j KUBE-NODEPORTS",
        f"-A KUBE-SERVICES {comment} -d 192.168.99.11 -j KUBE-NODEPORTS",
    ]
    # 127.0.0.1 is not in those CIDRs, so localhost NodePorts (and route_localnet) are off.
    assert not rules.route_localnet
    assert "KUBE-FIREWALL" not in rules.filter_chains


def test_no_localhost_nodeports_keeps_127_out_of_the_nodeports_jump():
    rules = render([], replace(FAKE, localhost_nodeports=False))
    assert rules.nat_rules[-1] == (
        '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in'
        ' this chain" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS'
    )


def test_probabilities_are_written_with_ten_decimals():
    endpoints = tuple(ep(f"10.180.0.{n}") for n in (1, 2, 3))
    rules = render([svc("ns1", "svc1", "172.30.0.41", endpoints=endpoints)])
    picks = [rule for rule in rules.nat_rules if rule.startswith("-A KUBE-SVC-") and "-> " in rule]
    assert [re.search(r"--probability (\S+)", rule)[1] if "--probability" in rule else None for rule in picks] == [
        "0.3333333333",
        "0.5000000000",
        None,
    ]


def test_endpoints_are_ordered_by_ip_port_string():
    """As strings: "10.0.0.10:80" < "10.0.0.1:80" because "0" < ":"."""
    endpoints = tuple(ep(ip) for ip in ("10.0.0.2", "10.0.0.10", "10.0.0.1"))
    rules = render([svc("ns1", "svc1", "172.30.0.41", endpoints=endpoints)])
    targets = [re.search(r'"ns1/svc1:p80 -> (\S+)"', r)[1] for r in rules.nat_rules if "-> " in r]
    assert targets == ["10.0.0.10:80", "10.0.0.1:80", "10.0.0.2:80"]


def test_headless_and_ipv6_services_are_skipped():
    services = [
        svc("ns1", "headless", None, endpoints=(ep("10.0.0.1"),)),
        svc("ns1", "v6", "fd00::1", endpoints=(ep("fd00:10::1"),)),
    ]
    assert render(services).kube_proxy_payload == render([]).kube_proxy_payload


def test_restore_text_has_builtin_chains_and_jumps_in_insertion_order():
    text = render([svc("ns1", "svc1", "172.30.0.41", endpoints=(ep("10.180.0.1"),))]).restore_text()
    lines = text.splitlines()
    filter_part, nat_part = text.split("*nat\n")
    assert lines[0] == "*filter" and ":INPUT ACCEPT [0:0]" in lines and ":POSTROUTING ACCEPT [0:0]" in lines
    inputs = [line for line in filter_part.splitlines() if line.startswith("-A INPUT ")]
    assert [line.rsplit(" -j ", 1)[1] for line in inputs] == [
        "KUBE-FIREWALL",
        "KUBE-PROXY-FIREWALL",
        "KUBE-NODEPORTS",
        "KUBE-EXTERNAL-SERVICES",
    ]
    forwards = [line for line in filter_part.splitlines() if line.startswith("-A FORWARD ")]
    new = "-A FORWARD -m conntrack --ctstate NEW -m comment --comment"
    assert forwards == [
        f'{new} "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
        '-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD',
        f'{new} "kubernetes service portals" -j KUBE-SERVICES',
        f'{new} "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
    ]
    assert '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING' in nat_part
    assert len(JUMP_RULES) == 14


def test_restore_text_declares_kube_firewall_even_when_kube_proxy_leaves_it_empty():
    text = render([], replace(FAKE, localhost_nodeports=False)).restore_text()
    assert ":KUBE-FIREWALL - [0:0]" in text
    assert "-A INPUT -j KUBE-FIREWALL" in text
    assert "-A KUBE-FIREWALL " not in text


# --- chain names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "proto", "expected"),
    [
        ("ns1/svc1:p80", "tcp", "XPGD46QRK7WJZT7O"),
        ("ns2/svc2:p80", "tcp", "GNZBNJ2PO5MGZ6GT"),
        ("ns3/svc3:p80", "tcp", "X27LE4BHSL4DOUIK"),
        ("ns4/svc4:p80", "tcp", "4SW47YFZTEDKD3PK"),
        ("ns5/svc5:p80", "tcp", "NUKIZ6OKUXPJNT4C"),
        ("ns2/svc2:p8080", "tcp", "2VJB64SDSIJUP5T6"),
        ("ns4/svc4:p8082", "tcp", "EBDQOQU5SJFXRIL3"),
        ("ns1/svc1:p80", "TCP", "XPGD46QRK7WJZT7O"),  # kube-proxy hashes the lower-case protocol
    ],
)
def test_service_chain_hash(name, proto, expected):
    assert hashing.port_proto_hash(name, proto) == expected
    assert hashing.service_chain(name, proto) == f"KUBE-SVC-{expected}"
    assert hashing.local_chain(name, proto) == f"KUBE-SVL-{expected}"
    assert hashing.external_chain(name, proto) == f"KUBE-EXT-{expected}"
    assert hashing.firewall_chain(name, proto) == f"KUBE-FW-{expected}"


@pytest.mark.parametrize(
    ("name", "endpoint", "expected"),
    [
        ("ns1/svc1:p80", "10.180.0.1:80", "KUBE-SEP-SXIVWICOYRO3J4NJ"),
        ("ns2/svc2:p80", "10.180.0.2:80", "KUBE-SEP-RS4RBKLTHTF2IUXJ"),
        ("ns3/svc3:p80", "10.180.0.3:80", "KUBE-SEP-OYPFS5VJICHGATKP"),
        ("ns4/svc4:p80", "10.180.0.4:80", "KUBE-SEP-UKSFD7AGPMPPLUHC"),
        ("ns4/svc4:p80", "10.180.0.5:80", "KUBE-SEP-C6EBXVWJJZMIWKLZ"),
        ("ns5/svc5:p80", "10.180.0.3:80", "KUBE-SEP-I77PXRDZVX7PMWMN"),
        ("ns1/svc1:p80", "10.0.1.1:80", "KUBE-SEP-SNQ3ZNILQDEJNDQO"),
        ("ns2/svc2:p8080", "10.0.2.1:8080", "KUBE-SEP-UHEGFW77JX3KXTOV"),
        ("ns4/svc4:p8082", "10.4.0.1:8082", "KUBE-SEP-SU5STNODRYEWJAUF"),
    ],
)
def test_endpoint_chain_hash(name, endpoint, expected):
    assert hashing.endpoint_chain(name, "tcp", endpoint) == expected


def test_unnamed_port_hashes_without_trailing_colon():
    port = svc("ns1", "svc1", "172.30.1.1", port_name="")
    assert port.port_name_string == "ns1/svc1"
    assert hashing.service_chain(port.port_name_string, "tcp") != hashing.service_chain("ns1/svc1:", "tcp")
