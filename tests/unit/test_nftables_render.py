"""kube-proxy's nftables renderer against kube-proxy's own unit tests (pkg/proxy/nftables).

Golden texts (tests/golden/nftables/<version>/*.txt, each with a "# source:" header) are the
expected texts of kube-proxy's tests, compared the way assertNFTablesTransactionEqual compares
them: kube-proxy runs its transaction against knftables' Fake and dumps it; here the rendered
`nft -f` script is applied to an equivalent fake (FakeTable: add is idempotent, flush empties,
delete removes, an element with the same key replaces the old one) and dumped in knftables' Dump
format; then both texts go through sort_nftables_transaction (sortNFTablesTransaction: blank
lines and comments dropped, lines sorted by object type and name, rules of a chain kept in order)
and must be equal.
- 1.35 goldens: kubernetes/kubernetes 81810de635aa13aa0a32992f6def3aa9d6025ebc (checked for 1.34, 1.35)
- 1.33 golden: aroradaman/kubernetes 4177b600d4b97a67b765a18ddeeb295ef757b212 (1.31, 1.32, 1.33)
- 1.30 golden: ashierj/superdemo 86435b28282edfa56ab3990aec6f7829df5c6243 (1.30)
Each TestOverallNFTablesRules golden is also checked one Service at a time (its "# svcN" blocks
plus the base rules): eTP=Local LoadBalancer (svc2), NodePort (svc3), externalIPs with two
endpoints (svc4), eTP=Cluster LoadBalancer with source ranges and ClientIP affinity (svc5), no
endpoints (svc6).
kube-proxy's packet-flow tests (its nftablesTracer) are not ported here: the same flows run on the
real kernel in tests/integration/test_nftables_agreement.py.
Inputs mirror NewFakeProxier: node "test-node", node IP 192.168.0.2 (NodePorts on it only), pod
CIDR 10.0.0.0/8 (the local-traffic detector), ServiceCIDR 172.30.0.0/16, masquerade mark "0x4000".
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from support.builders import ep, svc
from support.nft import (
    FAKE,
    GOLDEN,
    GOLDEN_CASES,
    GOLDEN_DIR,
    TEST_EXTERNAL_IP,
    TEST_NODE_IP,
    TEST_NODE_IP_ALT,
    FakeTable,
    assert_nftables_transaction_equal,
    diff_nftables_transaction,
    dump_of,
    expected_for,
    golden,
    overall_services,
    render,
    service_blocks,
    sort_nftables_transaction,
)

from lab.describe.load import load_scenario
from lab.render.dataplane import node_dataplane
from lab.render.kubeproxy.nftables import NFTABLES_VERSIONS
from lab.render.kubeproxy.service import Endpoint, ProxyConfig
from lab.render.kubeproxy.versions import Release


def golden_params() -> list:
    return [
        pytest.param(version, name, id=f"{version}-{name.removesuffix('.txt')}")
        for version in NFTABLES_VERSIONS
        for name in GOLDEN_CASES
        if (GOLDEN / GOLDEN_DIR[version] / name).exists()
    ]


@pytest.mark.parametrize(("version", "name"), golden_params())
def test_golden(version, name):
    rules = render(GOLDEN_CASES[name](), version)
    assert_nftables_transaction_equal(expected_for(version, name), dump_of(rules))


@pytest.mark.parametrize("version", NFTABLES_VERSIONS)
@pytest.mark.parametrize("service", ["svc1", "svc2", "svc3", "svc4", "svc5", "svc6"])
def test_overall_one_service_at_a_time(version, service):
    """svc2: eTP=Local LB without local endpoints; svc3: NodePort; svc4: externalIPs;
    svc5: eTP=Cluster LB with loadBalancerSourceRanges and ClientIP affinity; svc6: no endpoints."""
    directory = GOLDEN_DIR[version]
    block = service_blocks(golden(directory, "overall_nftables_rules.txt"))[service]
    rules = render([overall_services()[service]], version)
    assert_nftables_transaction_equal(golden(directory, "base_rules.txt") + block, dump_of(rules))


def test_goldens_cover_every_version():
    assert {version for version, _ in (p.values for p in golden_params())} == set(NFTABLES_VERSIONS)


# --- the comparison itself must be able to fail --------------------------------------------------------


def test_normaliser_sorts_like_sort_nftables_transaction():
    """Test_sortNFTablesTransaction, with kube-proxy's own input and expected output."""
    given = golden("normaliser", "sort_input.txt")
    expected = golden("normaliser", "sort_expected.txt").splitlines()
    want = "\n".join(line for line in expected if not line.startswith("#"))
    assert sort_nftables_transaction(given) == want


def test_normaliser_diff_like_diff_nftables_transaction():
    """Test_diffNFTablesTransaction: equal inputs give no diff; dropping two lines gives one."""
    given = golden("normaliser", "sort_input.txt")
    want = golden("normaliser", "sort_expected.txt")
    assert diff_nftables_transaction(given, want) == ""
    not_expected = "\n".join(want.split("\n")[2:])
    assert diff_nftables_transaction(given, not_expected) != ""


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda text: text.replace("priority -110", "priority -100", 1),
        lambda text: text.replace("0 : goto endpoint-5OJB2KTY", "0 : goto endpoint-XXXXXXXX", 1),
        lambda text: text.replace('comment "ns6/svc6:p80" : goto reject-chain', 'comment "ns6/svc6:p80" : drop', 1),
        # swapping two rules of one chain: rule order matters
        lambda text: text.replace(
            "add rule ip kube-proxy masquerading mark and 0x4000 == 0 return\n"
            "add rule ip kube-proxy masquerading mark set mark xor 0x4000\n",
            "add rule ip kube-proxy masquerading mark set mark xor 0x4000\n"
            "add rule ip kube-proxy masquerading mark and 0x4000 == 0 return\n",
        ),
    ],
    ids=["priority", "endpoint-chain", "verdict", "rule-order"],
)
def test_corrupted_line_is_caught(corrupt):
    result = dump_of(render(list(overall_services().values()), "1.35"))
    expected = expected_for("1.35", "overall_nftables_rules.txt")
    assert diff_nftables_transaction(expected, result) == ""
    corrupted = corrupt(result)
    assert corrupted != result
    with pytest.raises(AssertionError, match="tables do not match"):
        assert_nftables_transaction_equal(expected, corrupted)


# --- the transaction itself (what kube-proxy pipes into nft -f) ------------------------------------


@pytest.mark.parametrize("version", NFTABLES_VERSIONS)
def test_script_is_a_fresh_node_transaction_in_kube_proxy_order(version):
    lines = render(list(overall_services().values()), version).script().splitlines()
    assert lines[0] == 'add table ip kube-proxy { comment "rules for kube-proxy" ; }'
    # flushed once per process: add+delete of every base chain before creating them
    pairs = lines[1:17]
    assert [line.split()[0] for line in pairs] == ["add", "delete"] * 8
    assert lines[17].startswith("add chain ip kube-proxy ") and "{ type " in lines[17]
    assert lines[18] == "flush chain ip kube-proxy " + lines[17].split()[4]
    # per-service chains are added then flushed, once
    per_service = [line for line in lines if re.match(r"add chain ip kube-proxy \S+/", line)]
    assert len(per_service) == len(set(per_service))
    for line in per_service:
        assert lines[lines.index(line) + 1] == "flush" + line.removeprefix("add")
    # sets and maps are emptied after setup, before the first Service's elements
    first_element = next(i for i, line in enumerate(lines) if line.startswith("add element ip kube-proxy cluster-ips"))
    flushes = [i for i, line in enumerate(lines) if re.match(r"flush (set|map) ip kube-proxy (?!nodeport-ips)", line)]
    # (1.36 adds hairpin-connections)
    assert len(flushes) == 6 + Release.of(version).nft_masquerade_rework and max(flushes) < first_element
    # the whole script applies cleanly (every reference exists when used)
    FakeTable().run("\n".join(lines))


@pytest.mark.parametrize(
    ("version", "order"),
    [
        ("1.30", ["cluster-ips", "firewall-ips", "no-endpoint-services", "no-endpoint-nodeports", "service-ips"]),
        ("1.31", ["cluster-ips", "service-ips", "firewall-ips", "no-endpoint-services", "no-endpoint-nodeports"]),
        ("1.36", ["cluster-ips", "service-ips", "firewall-ips", "no-endpoint-services", "no-endpoint-nodeports"]),
    ],
)
def test_set_and_map_flush_order(version, order):
    """1.30 flushes in syncProxyRules; 1.31's nftElementStorage resets at the end of setupNFTables; 1.36
    resets hairpin-connections last."""
    flushed = [line.split()[4] for line in render([], version).commands if re.match(r"flush (set|map) ", line)]
    hairpin = ["hairpin-connections"] if version == "1.36" else []
    assert flushed == ["nodeport-ips", *order, "service-nodeports", *hairpin]


def test_masquerade_rework_in_1_36():
    """#135800/#136499: no mark-for-masquerade chain; only a local endpoint goes into hairpin-connections, and a
    Service without affinity DNATs from its service chain (no endpoint chain); 1.35 marks in endpoint chains."""
    service = svc("ns1", "svc1", "172.30.0.41", endpoints=(ep("10.180.0.1", local=True), ep("10.180.0.2")))
    old, new = render([service], "1.35").script(), render([service], "1.36").script()
    assert "mark-for-masquerade" in old and "mark-for-masquerade" not in new
    assert "add element ip kube-proxy hairpin-connections { 10.180.0.1 . 10.180.0.1 . tcp . 80 }" in new
    assert "hairpin-connections { 10.180.0.2" not in new
    assert "chain ip kube-proxy endpoint-" in old and "chain ip kube-proxy endpoint-" not in new
    dnat = (
        "meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.180.0.1 . 80 , 1 : 10.180.0.2 . 80 }"
    )
    assert f"add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 {dnat}" in new
    everything = replace(FAKE, masquerade_all=True)
    rules = render([service], "1.36", everything).commands
    mark_all = 'ip daddr @cluster-ips mark set mark or 0x4000 comment "masquerade all clusterIP traffic"'
    assert f"add rule ip kube-proxy services {mark_all}" in rules


def test_single_endpoint_dnat_in_1_37():
    """#140723: a one-endpoint Service DNATs without a map from 1.37."""
    service = svc("ns1", "svc1", "172.30.0.41", endpoints=(ep("10.180.0.1"),))
    chain = "add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 meta l4proto tcp"
    assert (
        f"{chain} dnat ip addr . port to numgen random mod 1 map {{ 0 : 10.180.0.1 . 80 }}"
        in render([service], "1.36").commands
    )
    assert f"{chain} dnat to 10.180.0.1:80" in render([service], "1.37").commands


@pytest.mark.parametrize(("version", "length"), [("1.36", 137), ("1.37", 128)])
def test_comment_cut_to_128_bytes_from_1_37(version, length):
    """#139516: a 63-character namespace and Service name make a no-endpoints comment of 137 bytes, which 1.36
    writes whole (and nft refuses) and 1.37 cuts to the kernel's 128."""
    service = svc("n" * 63, "s" * 63, "172.30.0.41", port_name="http-alt1")
    comments = re.findall(r'comment "([^"]*)"', "\n".join(render([service], version).commands))
    name = f"{'n' * 63}/{'s' * 63}:http-alt1"
    assert name[:length] in comments and max(map(len, comments)) == length


def test_firewall_rule_position_moved_in_1_31():
    """1.30 writes the firewall chain's rule right after creating it; 1.31+ after the external chain."""
    service = overall_services()["svc5"]
    for version, before in (("1.30", True), ("1.31", False)):
        lines = render([service], version).commands
        fw_rule = next(i for i, line in enumerate(lines) if line.startswith("add rule ip kube-proxy firewall-HVFWP5L3"))
        first_ext_rule = next(i for i, line in enumerate(lines) if line.startswith("add rule ip kube-proxy external-"))
        assert (fw_rule < first_ext_rule) is before, version


def test_masquerade_mark_defaults_to_what_new_proxier_formats():
    """NewProxier: fmt.Sprintf("%#08x", 1<<masqueradeBit); the fake proxier sets "0x4000"."""
    lines = render([], "1.33", ProxyConfig()).commands
    assert "add rule ip kube-proxy mark-for-masquerade mark set mark or 0x00004000" in lines
    assert "add rule ip kube-proxy masquerading mark and 0x00004000 == 0 return" in lines


def test_no_service_cidrs_no_drop_rule():
    lines = render([], "1.35", replace(FAKE, service_cidrs=())).commands
    assert not [line for line in lines if "Drop traffic to unallocated ClusterIPs" in line]
    lines = render([], "1.35", replace(FAKE, service_cidrs=("172.30.0.0/16", "fd00::/108", "172.50.0.0/16"))).commands
    drop = 'ip daddr { 172.30.0.0/16,172.50.0.0/16 } drop comment "Drop traffic to unallocated ClusterIPs"'
    assert f"add rule ip kube-proxy cluster-ips-check {drop}" in lines


@pytest.mark.parametrize(
    ("addresses", "expected"),
    [
        ((), [TEST_NODE_IP]),  # nftables' default: the primary node IP
        (("primary",), [TEST_NODE_IP]),
        (("192.168.0.0/24", "192.168.1.0/24", "2001:db8::/64"), [TEST_NODE_IP, TEST_NODE_IP_ALT]),
        (("127.0.0.0/8", "192.168.99.0/24"), [TEST_EXTERNAL_IP]),  # localhost NodePorts never served
        (("0.0.0.0/0",), None),
        (("2001:db8::/64",), None),  # no IPv4 CIDR: all IPv4 addresses
    ],
)
def test_node_port_addresses(addresses, expected):
    """setupNFTables: nodeport-ips holds the NodePort addresses, or is removed (add+delete) and
    the dispatch rules use "fib daddr type local" minus 127/8 when every address qualifies."""
    table = FakeTable().run(render([], "1.33", replace(FAKE, node_port_addresses=addresses)).script())
    services = table.rule_texts("services")
    checks = table.rule_texts("nodeport-endpoints-check")
    if expected is None:
        assert "nodeport-ips" not in table.sets
        all_local = "fib daddr type local ip daddr != 127.0.0.0/8"
        assert services[1] == f"{all_local} meta l4proto . th dport vmap @service-nodeports"
        assert checks == ["ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports"]
    else:
        assert [key[0] for key, _ in table.element_values("nodeport-ips")] == expected
        assert services[1] == "ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports"
        assert checks == ["ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports"]


@pytest.mark.parametrize(("version", "port_match"), [("1.33", " tcp dport 80"), ("1.34", "")])
def test_cluster_ip_masquerade_without_detector_and_with_masquerade_all(version, port_match):
    """No detector: no masquerade rule for ClusterIP traffic and no pod short-circuit; with
    --masquerade-all every ClusterIP packet is marked (#131492 dropped the port match in 1.34)."""
    service = overall_services()["svc2"]
    chain = "service-42NFTM6N-ns2/svc2/tcp/p80"
    table = FakeTable().run(render([service], version, replace(FAKE, cluster_cidr=None)).script())
    assert table.rule_texts(chain)[0].startswith("numgen random mod 1 vmap")
    assert not [rule for rule in table.rule_texts("external-42NFTM6N-ns2/svc2/tcp/p80") if "pod traffic" in rule]
    table = FakeTable().run(render([service], version, replace(FAKE, masquerade_all=True)).script())
    assert table.rule_texts(chain)[0] == f"ip daddr 172.30.0.42{port_match} jump mark-for-masquerade"


def test_terminating_endpoints_are_a_fallback():
    """Serving+terminating endpoints are used only when no endpoint is ready (CategorizeEndpoints)."""
    terminating = ep("10.0.1.9", ready=False, serving=True, terminating=True)

    def endpoint_chains(*endpoints: Endpoint) -> list[str]:
        rules = render([svc("ns1", "svc1", "172.30.1.1", endpoints=endpoints)], "1.35")
        return [name for name in FakeTable().run(rules.script()).chains if name.startswith("endpoint-")]

    assert [name.split("__")[1] for name in endpoint_chains(ep("10.0.1.1"), terminating)] == ["10.0.1.1/80"]
    assert [name.split("__")[1] for name in endpoint_chains(terminating)] == ["10.0.1.9/80"]
    gone = ep("10.0.1.8", ready=False, serving=False, terminating=True)
    assert endpoint_chains(gone) == []


def test_headless_and_ipv6_services_are_skipped():
    rules = render([svc("ns1", "headless", None), svc("ns1", "v6", "fd00::1", endpoints=(ep("fd00:10::1"),))], "1.35")
    assert not [line for line in rules.commands if "element ip kube-proxy cluster-ips" in line]


@pytest.mark.parametrize(
    ("namespace", "name", "proto", "port", "expected"),
    [
        ("testing", "service", "tcp", "http", "P4ZYZVCF-testing/service/tcp/http"),
        ("testing", "service", "tcp", "https", "LZBRENCP-testing/service/tcp/https"),
    ],
)
def test_service_chain_name_base(namespace, name, proto, port, expected):
    """Test_servicePortChainNameBase (81810de6)."""
    from lab.render.kubeproxy.nftables import service_chain_base

    assert service_chain_base(namespace, name, proto, port) == expected


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        (Endpoint("10.180.0.1", 80, False), "JO2XBXZR-testing/service/tcp/http__10.180.0.1/80"),
        (Endpoint("10.180.0.2", 80, False), "5S6H3H22-testing/service/tcp/http__10.180.0.2/80"),
        (
            Endpoint("fd80:abcd:12::a1b2:c3d4:e5f6:9999", 80, False),
            "U7E2ET36-testing/service/tcp/http__fd80.abcd.12..a1b2.c3d4.e5f6.9999/80",
        ),
    ],
)
def test_endpoint_chain_name_base(endpoint, expected):
    """Test_servicePortEndpointChainNameBase (81810de6)."""
    from lab.render.kubeproxy.nftables import endpoint_chain_base

    assert endpoint_chain_base("testing", "service", "tcp", "http", endpoint) == expected


def test_long_names_are_truncated_with_the_hash_kept():
    """Test_servicePortEndpointChainNameBase "truncated, 1" (81810de6)."""
    from lab.render.kubeproxy.nftables import endpoint_chain_base

    ns = "very-long-namespace-name-abcdefghijklmnopqrstuvwxyz0123456789xx"
    name = "very-long-service-name-why-would-you-even-do-this-i-mean-really"
    port = "port-443-providing-the-hypertext-transmission-protocol-with-tls"
    got = endpoint_chain_base(ns, name, "sctp", port, Endpoint("1234:5678:9abc:def0::abcd:1234:5678", 443, False))
    assert got == f"CI6C53Q3-{ns}/{name}/sctp/{port}__1234.5678.9abc.def0..abcd.1234..."


def test_unsupported_version_is_refused():
    with pytest.raises(ValueError, match="not reproduced"):
        render([], "1.29")


@pytest.mark.parametrize(("version", "drops"), [("1.32", False), ("1.33", True), ("1.34", True)])
def test_the_scenarios_service_cidrs_reach_each_familys_proxier_once_kube_proxy_watches_them(version, drops):
    """A scenario's serviceCIDR (both families in dual-stack) is what the default ServiceCIDR object holds: from 1.33,
    when kube-proxy watches ServiceCIDRs by default, each family's nftables proxier drops its own family's range."""
    path = "topologies/dual-stack-service-paths.yaml"
    axes = {"proxyMode": ["nftables"], "kubeVersion": [version], "externalTrafficPolicy": ["Cluster"]}
    (topo,) = load_scenario(path, axes).variants
    v4 = node_dataplane(topo, "node2")
    assert v4.other_family is not None
    drop = 'daddr { %s } drop comment "Drop traffic to unallocated ClusterIPs"'
    assert (drop % "10.96.0.0/16" in v4.nft) == drops
    assert (drop % "fd00:10:96::/112" in v4.other_family.nft) == drops
