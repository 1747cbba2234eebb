"""render_iptables(version=...) against kube-proxy's own unit tests, one layout era at a time.

No release tag of pkg/proxy/iptables/proxier_test.go older than the current one is stored, and
openshift/sdn vendors only proxier.go (Go vendoring drops _test.go files). The expectations come
from stored snapshots of upstream kube-proxy taken during each era (forks of kubernetes/kubernetes
whose proxier_test.go is upstream's of that time), each compared the way that file compares:

- Era A (1.19-1.21): tssurya/kubernetes@49a42daa (Oct 2020, before #95252: 1.19 shapes) and
  tnqn/kubernetes@8d903e31 (a 1.21-development branch). Full-output tests compare
  iptablesData.String() with assert.Equal (exact text, kube-proxy's write order); the others use
  hasJump & co. over FakeIPTables.GetRules, ported below.
- Era B (1.22-1.23): cyclinder/kubernetes@b54abd00 (after 1.23, before #109060). Both sides go
  through that era's regexp-based sortIPTablesRules (with its assertIPTablesRuleJumps), ported below.
- Era E (1.27): sanposhiho/kubernetes@059ce4e8 (1.27 cycle). Expected text is already sorted;
  the result goes through sortIPTablesRules as in tests/unit/test_iptables_render.py (the 1.28+
  normaliser, imported from there), whose order that expectation already has.
- Eras C (1.24) and D (1.25-1.26): no snapshot was found. Their goldens are derived from the
  1.27 one by undoing the PRs that separate the eras, and were checked by hand against the
  vendored sources (openshift/sdn S1.24/S1.25/S1.26); the golden headers say so.
1.28 and later are covered by tests/unit/test_iptables_render.py (kubernetes/kubernetes 531be812).
Golden text lives in tests/golden/iptables/<era>/, each with a "# source:" line.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import replace

import pytest
from support.builders import ep, svc
from support.cases import NODE_IPS
from support.goldens import golden, sort_iptables_rules

from lab.describe.releases import IPTABLES_VERSIONS, check_version
from lab.render.kubeproxy.iptables import JUMP_RULES, jump_rules, kubelet_rules, render_iptables
from lab.render.kubeproxy.service import ProxyConfig, ServicePort
from lab.render.kubeproxy.versions import era_of, era_versions

# NewFakeProxier up to 1.23: pod CIDR (local-traffic detector) 10.0.0.0/24, mark "0x4000", no
# --random-fully, hostname "test-hostname" (NodeName of local endpoints), no node IP, no
# nodePortAddresses (every local address).
OLD_FAKE = ProxyConfig(cluster_cidr="10.0.0.0/24", masquerade_mark="0x4000", random_fully=False)
# NewFakeProxier from 1.24: pod CIDR 10.0.0.0/8, node IP 192.168.0.2, nfacct counters available.
FAKE = ProxyConfig(cluster_cidr="10.0.0.0/8", masquerade_mark="0x4000", random_fully=False, nfacct_counters=True)


def payload(services, version: str, config: ProxyConfig = OLD_FAKE, node_ips=()) -> str:
    return render_iptables(services, config, node_ips, version).kube_proxy_payload


def diff(expected: str, got: str) -> str:
    return "".join(difflib.unified_diff(expected.splitlines(True), got.splitlines(True), "expected", "rendered"))


# --- Era A: assert.Equal on iptablesData, and FakeIPTables.GetRules + hasJump -------------------

# pkg/util/iptables/testing/fake.go (2020): a Rule maps these prefixes to the word after them.
DESTINATION, SOURCE, DPORT, PROTOCOL, JUMP = "-d ", "-s ", "--dport ", "-p ", "-j "
TO_DEST, RECENT, MATCH_SET, SRC_TYPE = "--to-destination ", "recent ", "--match-set ", "--src-type "
RULE_KEYS = (DESTINATION, SOURCE, DPORT, PROTOCOL, JUMP, TO_DEST, RECENT, MATCH_SET, SRC_TYPE)


def get_token(line: str, separator: str) -> str:
    """getToken: the word after separator, if it occurs exactly once."""
    tokens = line.split(separator)
    return tokens[1].split(" ")[0] if len(tokens) == 2 else ""


def get_rules(data: str, chain: str) -> list[dict[str, str]]:
    """FakeIPTables.GetRules: every line of the whole restore input (both tables) containing
    "-A <chain>", as a Rule."""
    rules = []
    for line in data.split("\n"):
        if f"-A {chain}" in line:
            rules.append({key: tok for key in RULE_KEYS if (tok := get_token(line, key))})
    return rules


def has_jump(rules, dest_chain: str, dest_ip: str, dest_port: int) -> bool:
    """hasJump, as in proxier_test.go of 1.19-1.21."""
    port = str(dest_port)
    match = False
    for r in rules:
        if r.get(JUMP) == dest_chain:
            match = True
            if dest_ip:
                if dest_ip in r.get(DESTINATION, "") and (port in r.get(DPORT, "") or r.get(DPORT, "") == ""):
                    return True
                match = False
            if dest_port != 0:
                if port in r.get(DPORT, "") and (dest_ip in r.get(DESTINATION, "") or r.get(DESTINATION, "") == ""):
                    return True
                match = False
    return match


def has_src_type(rules, src_type: str) -> bool:
    return any(r.get(SRC_TYPE) == src_type for r in rules)


def has_session_affinity_rule(rules) -> bool:
    return any(RECENT in r for r in rules)


def has_dnat(rules, endpoint: str) -> bool:
    return any(r.get(TO_DEST) == endpoint for r in rules)


A_VERSIONS = era_versions("A")
SLICE_ENDPOINTS = (
    ep("10.0.1.1", local=True),
    ep("10.0.1.2"),
    ep("10.0.1.3"),
    ep("10.0.1.4", ready=False),  # "not ready endpoints should be ignored" (1.21's copy of the test)
)


@pytest.mark.parametrize("version", ["1.19", "1.20"])
def test_a_endpoint_slice_e2e(version):
    """TestEndpointSliceE2E: ClusterIP with an unnamed port and no port number (--dport 0)."""
    got = payload([svc("ns1", "svc1", "172.20.1.1", port=0, port_name="", endpoints=SLICE_ENDPOINTS)], version)
    expected = golden("A/endpoint_slice_e2e.txt")
    assert got == expected, diff(expected, got)


def _without_conntrack_rules(text: str) -> str:
    return "".join(line for line in text.splitlines(True) if "--ctstate RELATED,ESTABLISHED -j ACCEPT" not in line)


def test_a_health_check_node_port_e2e_1_21():
    """TestHealthCheckNodePortE2E: eTP=Local LoadBalancer with a health check port, one local endpoint.

    Exact text, except KUBE-FORWARD's conntrack rules: the stored branch already had the single
    rule that upstream released in 1.23, S1.21 (openshift/sdn c4cad760) still writes two.
    """
    service = svc(
        "ns1", "svc1", "172.20.1.1", port=0, port_name="", node_port=30010, health_check_node_port=30000,
        external_policy="Local", endpoints=SLICE_ENDPOINTS,
    )  # fmt: skip
    got = payload([service], "1.21")
    expected = golden("A/health_check_node_port_e2e.txt")
    assert _without_conntrack_rules(got) == _without_conntrack_rules(expected), diff(expected, got)
    forward = [line for line in got.splitlines() if "--ctstate RELATED,ESTABLISHED -j ACCEPT" in line]
    assert forward == [
        f'-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack pod {which} rule"'
        " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
        for which in ("source", "destination")
    ]


SVC_CHAIN = "KUBE-SVC-XPGD46QRK7WJZT7O"  # ns1/svc1:p80 tcp
XLB_CHAIN = "KUBE-XLB-XPGD46QRK7WJZT7O"
FW_CHAIN = "KUBE-FW-XPGD46QRK7WJZT7O"
SEP_1 = "KUBE-SEP-SXIVWICOYRO3J4NJ"  # 10.180.0.1:80
SEP_2 = "KUBE-SEP-ZX7GRIZKSNUQ3LAJ"  # 10.180.2.1:80
# epIP1 has no NodeName (not local), epIP2 is on testHostname.
TWO_ENDPOINTS = (ep("10.180.0.1"), ep("10.180.2.1", local=True))


@pytest.mark.parametrize("version", A_VERSIONS)
def test_a_cluster_ip_reject(version):
    data = payload([svc("ns1", "svc1", "10.20.30.41")], version)
    assert get_rules(data, SVC_CHAIN) == []
    assert has_jump(get_rules(data, "KUBE-SERVICES"), "REJECT", "10.20.30.41", 80)


@pytest.mark.parametrize("version", A_VERSIONS)
def test_a_cluster_ip_endpoints_jump(version):
    data = payload([svc("ns1", "svc1", "10.20.30.41", endpoints=(ep("10.180.0.1"),))], version)
    assert has_jump(get_rules(data, "KUBE-SERVICES"), SVC_CHAIN, "10.20.30.41", 80)
    assert has_jump(get_rules(data, SVC_CHAIN), SEP_1, "", 0)
    assert has_dnat(get_rules(data, SEP_1), "10.180.0.1:80")


@pytest.mark.parametrize("version", A_VERSIONS)
def test_a_load_balancer(version):
    """TestLoadBalancer: "invalid" source range " 1.2.3.4/28" and the LB IP also an externalIP."""
    service = svc(
        "ns1", "svc1", "10.20.30.41", node_port=3001, load_balancer_ips=("1.2.3.4",), external_ips=("1.2.3.4",),
        load_balancer_source_ranges=(" 1.2.3.4/28",), endpoints=(ep("10.180.0.1"),),
    )  # fmt: skip
    data = payload([service], version)
    assert has_jump(get_rules(data, "KUBE-SERVICES"), FW_CHAIN, "1.2.3.4", 80)
    fw_rules = get_rules(data, FW_CHAIN)
    assert has_jump(fw_rules, SVC_CHAIN, "", 0) and has_jump(fw_rules, "KUBE-MARK-MASQ", "", 0)


@pytest.mark.parametrize("version", A_VERSIONS)
def test_a_node_port(version):
    data = payload([svc("ns1", "svc1", "10.20.30.41", node_port=3001, endpoints=(ep("10.180.0.1"),))], version)
    assert has_jump(get_rules(data, "KUBE-NODEPORTS"), SVC_CHAIN, "", 3001)


@pytest.mark.parametrize("version", ["1.21"])
def test_a_health_check_node_port(version):
    """TestHealthCheckNodePort (1.21): nodePortAddresses 127.0.0.1/16 on lo."""
    service = svc("ns1", "svc1", "10.20.30.42", node_port=3001, health_check_node_port=30000, external_policy="Local")
    config = replace(OLD_FAKE, node_port_addresses=("127.0.0.1/16",))
    data = payload([service], version, config, ("127.0.0.1",))
    assert has_jump(get_rules(data, "KUBE-NODEPORTS"), "ACCEPT", "", 30000)


@pytest.mark.parametrize("version", A_VERSIONS)
def test_a_external_ips_reject(version):
    data = payload([svc("ns1", "svc1", "10.20.30.41", external_ips=("50.60.70.81",))], version)
    assert has_jump(get_rules(data, "KUBE-EXTERNAL-SERVICES"), "REJECT", "50.60.70.81", 80)


@pytest.mark.parametrize("version", A_VERSIONS)
def test_a_only_local_external_ips(version):
    service = svc(
        "ns1", "svc1", "10.20.30.41", external_ips=("50.60.70.81",), external_policy="Local", endpoints=TWO_ENDPOINTS
    )
    data = payload([service], version)
    assert has_jump(get_rules(data, "KUBE-SERVICES"), XLB_CHAIN, "50.60.70.81", 80)
    lb_rules = get_rules(data, XLB_CHAIN)
    assert not has_jump(lb_rules, SEP_1, "", 0)
    assert has_jump(lb_rules, SEP_2, "", 0)


@pytest.mark.parametrize("version", A_VERSIONS)
def test_a_node_port_reject(version):
    data = payload([svc("ns1", "svc1", "10.20.30.41", node_port=3001)], version)
    assert has_jump(get_rules(data, "KUBE-EXTERNAL-SERVICES"), "REJECT", "10.20.30.41", 3001)


@pytest.mark.parametrize("version", ["1.20", "1.21"])
def test_a_load_balancer_reject(version):
    """TestLoadBalancerReject (added with #95252, 1.20): the LB IP is rejected in
    KUBE-EXTERNAL-SERVICES, not in KUBE-SERVICES."""
    service = svc(
        "ns1", "svc1", "10.20.30.41", node_port=3001, load_balancer_ips=("1.2.3.4",), external_policy="Local",
        affinity_timeout=10800,
    )  # fmt: skip
    data = payload([service], version)
    assert has_jump(get_rules(data, "KUBE-EXTERNAL-SERVICES"), "REJECT", "1.2.3.4", 80)
    assert not has_jump(get_rules(data, "KUBE-SERVICES"), "REJECT", "1.2.3.4", 80)


def test_a_load_balancer_reject_1_19_is_in_kube_services():
    """Before #95252 (S1.18 syncProxyRules) the LB IP was rejected in filter KUBE-SERVICES."""
    service = svc("ns1", "svc1", "10.20.30.41", node_port=3001, load_balancer_ips=("1.2.3.4",))
    data = payload([service], "1.19")
    assert has_jump(get_rules(data, "KUBE-SERVICES"), "REJECT", "1.2.3.4", 80)
    assert not has_jump(get_rules(data, "KUBE-EXTERNAL-SERVICES"), "REJECT", "1.2.3.4", 80)


@pytest.mark.parametrize("version", A_VERSIONS)
def test_a_only_local_load_balancing(version):
    service = svc(
        "ns1", "svc1", "10.20.30.41", node_port=3001, load_balancer_ips=("1.2.3.4",), external_policy="Local",
        affinity_timeout=10800, endpoints=TWO_ENDPOINTS,
    )  # fmt: skip
    data = payload([service], version)
    assert has_jump(get_rules(data, "KUBE-SERVICES"), FW_CHAIN, "1.2.3.4", 80)
    fw_rules = get_rules(data, FW_CHAIN)
    assert has_jump(fw_rules, XLB_CHAIN, "", 0)
    assert not has_jump(fw_rules, "KUBE-MARK-MASQ", "", 0)
    lb_rules = get_rules(data, XLB_CHAIN)
    assert not has_jump(lb_rules, SEP_1, "", 0)
    assert has_jump(lb_rules, SEP_2, "", 0)
    assert has_session_affinity_rule(lb_rules)


@pytest.mark.parametrize("version", A_VERSIONS)
def test_a_only_local_node_ports(version):
    """onlyLocalNodePorts (TestOnlyLocalNodePorts and ...NoClusterCIDR, identical in these releases):
    eth0 10.20.30.51/24, nodePortAddresses 10.20.30.0/24."""
    service = svc("ns1", "svc1", "10.20.30.41", node_port=3001, external_policy="Local", endpoints=TWO_ENDPOINTS)
    config = replace(OLD_FAKE, node_port_addresses=("10.20.30.0/24",))
    data = payload([service], version, config, ("10.20.30.51",))
    node_port_rules = get_rules(data, "KUBE-NODEPORTS")
    assert has_jump(node_port_rules, XLB_CHAIN, "", 3001)
    assert has_jump(node_port_rules, "KUBE-MARK-MASQ", "", 3001)
    assert has_jump(get_rules(data, "KUBE-SERVICES"), "KUBE-NODEPORTS", "10.20.30.51", 0)
    lb_rules = get_rules(data, XLB_CHAIN)
    assert not has_jump(lb_rules, SEP_1, "", 0)
    assert has_jump(lb_rules, SVC_CHAIN, "", 0) and has_src_type(lb_rules, "LOCAL")
    assert has_jump(lb_rules, SEP_2, "", 0)


def test_a_external_ips_physdev_until_1_20():
    """S1.20: eTP=Cluster externalIPs are masqueraded unconditionally and caught by the
    physdev/addrtype pair; #96296 (1.21) treats them like ClusterIPs."""
    service = svc("ns1", "svc1", "10.20.30.41", external_ips=("50.60.70.81",), endpoints=(ep("10.180.0.1"),))
    comment = '-m comment --comment "ns1/svc1:p80 external IP"'
    match = f"-A KUBE-SERVICES {comment} -m tcp -p tcp -d 50.60.70.81/32 --dport 80"
    rules_1_20 = payload([service], "1.20").splitlines()
    assert [line for line in rules_1_20 if line.startswith(match)] == [
        f"{match} -j KUBE-MARK-MASQ",
        f"{match} -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j {SVC_CHAIN}",
        f"{match} -m addrtype --dst-type LOCAL -j {SVC_CHAIN}",
    ]
    rules_1_21 = payload([service], "1.21").splitlines()
    assert [line for line in rules_1_21 if line.startswith(match)] == [
        f"{match} ! -s 10.0.0.0/24 -j KUBE-MARK-MASQ",
        f"{match} -j {SVC_CHAIN}",
    ]


# --- Era B: the 1.23 sortIPTablesRules / assertIPTablesRulesEqual ---------------------------------


def _find_all_matches(lines: list[str], pattern: str) -> list[str]:
    """findAllMatches: the sorted unique values of the pattern's one group."""
    found = {m[1] for line in lines if (m := re.search(pattern, line))}
    return sorted(found)


def _move_matching_lines(pattern: str, lines: list[str], output: list[str]) -> list[str]:
    """moveMatchingLines: lines matching pattern go to output (in order); returns the rest."""
    keep = []
    for line in lines:
        (output if re.search(pattern, line) else keep).append(line)
    return keep


def _assert_rule_jumps_1_23(lines: list[str]) -> None:
    """assertIPTablesRuleJumps (1.23): every jump target was created and has rules (but
    KUBE-MARK-DROP, created by kubelet, and KUBE-NODEPORTS)."""
    created = set(_find_all_matches(lines, r"^:([^ ]*)"))
    filled = set(_find_all_matches(lines, r"-A ([^ ]*)"))
    jumped = set(_find_all_matches(lines, r"-j ([^ ]*)"))
    jumped -= {"ACCEPT", "REJECT", "DROP", "MARK", "RETURN", "DNAT", "SNAT", "MASQUERADE", "KUBE-MARK-DROP"}
    jumped -= {"KUBE-NODEPORTS"}
    missing = (jumped | filled) - created
    assert not missing, f"some chains in {lines[0]} are used but were not created: {sorted(missing)}"
    empty = jumped - filled
    assert not empty, f"some chains in {lines[0]} are jumped to but have no rules: {sorted(empty)}"


def sort_iptables_rules_1_23(data: str) -> str:
    """sortIPTablesRules as of 1.23: table by table, chain lines sorted, KUBE-NODEPORTS and then
    KUBE-SERVICES rules grouped by the service name in their comment (in sorted order, keeping
    their relative order), then the other chains' rules grouped by chain name."""
    tables = data.lstrip("\n").split("COMMIT\n")
    assert len(tables) == 3 and tables[2] == "", f"wrong number of tables ({len(tables) - 1})"
    output: list[str] = []
    for table in tables[:2]:
        lines = table.strip("\n").split("\n")
        _assert_rule_jumps_1_23(lines)
        lines = _move_matching_lines(r"^\*", lines, output)
        for chain_line in _find_all_matches(lines, r"^(:[^ ]*) "):
            lines = _move_matching_lines(chain_line, lines, output)
        for name in _find_all_matches(lines, r'-A KUBE-NODEPORTS.*--comment "?([^ ]*)'):
            lines = _move_matching_lines(f"^-A KUBE-NODEPORTS.*{name}", lines, output)
        for name in _find_all_matches(lines, r'-A KUBE-SERVICES.*--comment "?([^ ]*)'):
            lines = _move_matching_lines(f"^-A KUBE-SERVICES.*{name}", lines, output)
        for chain in _find_all_matches(lines, r"(-A KUBE-[^ ]* )"):
            lines = _move_matching_lines(chain, lines, output)
        for chain in _find_all_matches(lines, r"(-X KUBE-.*)"):
            lines = _move_matching_lines(chain, lines, output)
        _move_matching_lines(".", lines, output)
        output.append("COMMIT")
    return "\n".join([*output, ""])


def assert_rules_equal_1_23(expected: str, result: str) -> None:
    expected, result = sort_iptables_rules_1_23(expected), sort_iptables_rules_1_23(result)
    assert result == expected, diff(expected, result)


def overall_services_1_23() -> list[ServicePort]:
    """TestOverallIPTablesRulesWithMultipleServices' Services and EndpointSlices (1.23)."""
    return [
        svc("ns1", "svc1", "10.20.30.41", endpoints=(ep("10.180.0.1"),)),
        # eTP=Local; its endpoint has no NodeName, so it is not local.
        svc(
            "ns2", "svc2", "10.20.30.42", node_port=3001, load_balancer_ips=("1.2.3.4",), external_ips=("1.2.3.4",),
            load_balancer_source_ranges=(" 1.2.3.4/28",), health_check_node_port=30000, external_policy="Local",
            endpoints=(ep("10.180.0.2"),),
        ),
        # eTP=Cluster, no source ranges; the health check port is dropped with Cluster policy.
        svc(
            "ns2b", "svc2b", "10.20.30.43", node_port=3001, load_balancer_ips=("1.2.3.5",),
            health_check_node_port=30000, endpoints=(ep("10.180.0.3"),),
        ),
        svc("ns3", "svc3", "10.20.30.43", node_port=3001, endpoints=(ep("10.180.0.3"),)),
        svc(
            "ns4", "svc4", "10.20.30.44", external_ips=("50.60.70.81",),
            endpoints=(ep("10.180.0.4"), ep("10.180.0.5", local=True)),
        ),
    ]  # fmt: skip


def test_b_overall_iptables_rules_with_multiple_services():
    expected = golden("B/overall_iptables_rules_with_multiple_services.txt")
    assert_rules_equal_1_23(expected, payload(overall_services_1_23(), "1.23"))


def _b_local_lb(**kw) -> ServicePort:
    return svc("ns1", "svc1", "10.20.30.41", external_policy="Local", endpoints=TWO_ENDPOINTS, **kw)


B_CASES = {
    "cluster_ip_reject": ([svc("ns1", "svc1", "10.20.30.41")], OLD_FAKE, ()),
    "cluster_ip_endpoints_jump": ([svc("ns1", "svc1", "10.20.30.41", endpoints=(ep("10.180.0.1"),))], OLD_FAKE, ()),
    "load_balancer": (
        [
            svc(
                "ns1", "svc1", "10.20.30.41", node_port=3001, load_balancer_ips=("1.2.3.4",),
                external_ips=("1.2.3.4",), load_balancer_source_ranges=(" 1.2.3.4/28",),
                endpoints=(ep("10.180.0.1"),),
            )
        ],
        OLD_FAKE,
        (),
    ),
    "node_port": ([svc("ns1", "svc1", "10.20.30.41", node_port=3001, endpoints=(ep("10.180.0.1"),))], OLD_FAKE, ()),
    "external_ips_reject": ([svc("ns1", "svc1", "10.20.30.41", external_ips=("50.60.70.81",))], OLD_FAKE, ()),
    "only_local_external_ips": ([_b_local_lb(external_ips=("50.60.70.81",))], OLD_FAKE, ()),
    "non_local_external_ips": (
        [svc("ns1", "svc1", "10.20.30.41", external_ips=("50.60.70.81",), endpoints=TWO_ENDPOINTS)],
        OLD_FAKE,
        (),
    ),
    "node_port_reject": ([svc("ns1", "svc1", "10.20.30.41", node_port=3001)], OLD_FAKE, ()),
    "only_local_load_balancing": (
        [_b_local_lb(node_port=3001, load_balancer_ips=("1.2.3.4",), affinity_timeout=10800)],
        OLD_FAKE,
        (),
    ),
    "only_local_node_ports_no_cluster_cidr": (
        [_b_local_lb(node_port=3001)],
        replace(OLD_FAKE, cluster_cidr=None, node_port_addresses=("10.20.30.0/24",)),
        ("10.20.30.51",),
    ),
    "only_local_node_ports": (
        [_b_local_lb(node_port=3001)],
        replace(OLD_FAKE, node_port_addresses=("10.20.30.0/24",)),
        ("10.20.30.51",),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", B_CASES.keys())
def test_b_single_service(case):
    services, config, node_ips = B_CASES[case]
    assert_rules_equal_1_23(golden(f"B/{case}.txt"), payload(services, "1.23", config, node_ips))


def test_b_1_22_differs_from_1_23_as_the_sources_say():
    """1.22 (S1.22) vs 1.23 (S1.23): /32 on addresses, two FORWARD conntrack rules, KUBE-XLB
    balancing rules commented "Balancing rule N for SPN", and KUBE-SEP chains also for endpoints
    that are not ready."""
    services = [_b_local_lb(external_ips=("50.60.70.81",))]
    text_1_22 = payload(services, "1.22")
    assert "-d 10.20.30.41/32 --dport 80 ! -s 10.0.0.0/24 -j KUBE-MARK-MASQ" in text_1_22
    assert text_1_22.count("kubernetes forwarding conntrack pod") == 2
    assert f'-A {XLB_CHAIN} -m comment --comment "Balancing rule 0 for ns1/svc1:p80" -j {SEP_2}' in text_1_22
    not_ready = [replace(_b_local_lb(), endpoints=(*TWO_ENDPOINTS, ep("10.180.3.1", ready=False)))]
    assert "--to-destination 10.180.3.1:80" in payload(not_ready, "1.22")
    assert "--to-destination 10.180.3.1:80" not in payload(not_ready, "1.23")


# --- Eras C, D, E: the overall test of the KUBE-EXT layout ----------------------------------------


def overall_services_1_27() -> list[ServicePort]:
    """TestOverallIPTablesRules' Services as of 1.27 (read off its expected output: svc5 has no
    session affinity yet, unlike the current test)."""
    return [
        svc("ns1", "svc1", "172.30.0.41", endpoints=(ep("10.180.0.1"),)),
        svc(
            "ns2", "svc2", "172.30.0.42", node_port=3001, load_balancer_ips=("1.2.3.4",),
            external_ips=("192.168.99.22",), health_check_node_port=30000, external_policy="Local",
            endpoints=(ep("10.180.0.2"),),
        ),
        svc("ns3", "svc3", "172.30.0.43", node_port=3003, endpoints=(ep("10.180.0.3"),)),
        svc(
            "ns4", "svc4", "172.30.0.44", external_ips=("192.168.99.33",),
            endpoints=(ep("10.180.0.4"), ep("10.180.0.5", local=True)),
        ),
        svc(
            "ns5", "svc5", "172.30.0.45", node_port=3002, load_balancer_ips=("5.6.7.8",),
            load_balancer_source_ranges=(" 203.0.113.0/25",), health_check_node_port=30000,
            endpoints=(ep("10.180.0.3"),),
        ),
        svc("ns6", "svc6", "172.30.0.46"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("version", "name"),
    [
        ("1.24", "C/overall_iptables_rules.txt"),
        ("1.25", "D/overall_iptables_rules.txt"),
        ("1.26", "D/overall_iptables_rules.txt"),
        ("1.27", "E/overall_iptables_rules_1.27.txt"),
        ("1.28", "E/overall_iptables_rules_1.27.txt"),
    ],
)
def test_cde_overall_iptables_rules(version, name):
    """assertIPTablesRulesEqual (1.25+): the expected text is already sorted. The derived C and D
    goldens are sorted too, and are checked for that so the comparison stays the upstream one."""
    expected = golden(name)
    assert sort_iptables_rules(expected) == expected
    got = sort_iptables_rules(payload(overall_services_1_27(), version, FAKE, NODE_IPS))
    assert got == expected, diff(expected, got)
    for table in got.split("COMMIT\n")[:2]:
        _assert_rule_jumps_1_23(table.strip("\n").split("\n"))


def test_c_local_policy_without_local_endpoints_marks_for_drop():
    """1.24 (S1.24): iTP=Local without a local endpoint jumps to KUBE-SVL-*, which marks for
    kubelet's KUBE-FIREWALL; 1.25 (#110290) drops it in filter instead."""
    service = svc("ns1", "svc1", "172.30.0.41", internal_policy="Local", endpoints=(ep("10.180.0.1"),))
    svl = "KUBE-SVL-XPGD46QRK7WJZT7O"
    text_1_24 = payload([service], "1.24", FAKE, NODE_IPS)
    assert f'-A {svl} -m comment --comment "ns1/svc1:p80 has no local endpoints" -j KUBE-MARK-DROP' in text_1_24
    assert f"-d 172.30.0.41 --dport 80 -j {svl}" in text_1_24
    text_1_25 = payload([service], "1.25", FAKE, NODE_IPS)
    assert svl not in text_1_25
    assert (
        '-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 has no local endpoints"'
        " -m tcp -p tcp -d 172.30.0.41 --dport 80 -j DROP"
    ) in text_1_25


@pytest.mark.parametrize(
    ("version", "liberal", "invalid_rule"),
    [
        ("1.28", True, "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP"),
        ("1.29", False, "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP"),
        ("1.29", True, None),
        ("1.30", False, "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP"),
        (
            "1.31",
            False,
            "-A KUBE-FORWARD -m conntrack --ctstate INVALID"
            " -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP",
        ),
    ],
)
def test_e_invalid_drop_by_version(version, liberal, invalid_rule):
    """INVALID drop unconditional up to 1.28, skipped with tcp_be_liberal from 1.29 (S1.29), counted
    with nfacct from 1.31 (#122812; S1.30, i.e. 1.30.3, does not count)."""
    config = replace(FAKE, conntrack_tcp_be_liberal=liberal)
    rules = [line for line in payload([], version, config).splitlines() if "INVALID" in line]
    assert rules == ([invalid_rule] if invalid_rule else [])


@pytest.mark.parametrize(("version", "counted"), [("1.30", False), ("1.31", True)])
def test_e_localhost_nodeport_nfacct_from_1_31(version, counted):
    text = payload([svc("ns3", "svc3", "172.30.0.43", node_port=3003, endpoints=(ep("10.180.0.3"),))], version, FAKE)
    assert ("localhost_nps_accepted_pkts" in text) == counted


@pytest.mark.parametrize("version", ["1.36", "1.37", "1.38"])
def test_e_1_36_to_1_38_write_the_1_35_rules(version):
    """No iptables rule change is known after 1.35 (INFERRED, docs/kubeproxy-versions.md), so kube-proxy's own
    expectations checked at 1.31 (tests/unit/test_iptables_render.py, on the kernel in
    tests/integration/test_kubeproxy_agreement.py) stand for 1.36 to 1.38 as they do for 1.35."""
    for services in (overall_services_1_27(), []):
        assert payload(services, version, FAKE, NODE_IPS) == payload(services, "1.35", FAKE, NODE_IPS)
    assert jump_rules(version) == jump_rules("1.35")


# --- built-in chain jumps and kubelet's rules -----------------------------------------------------


def _targets(version: str, table: str, chain: str) -> list[str]:
    rules = render_iptables([], FAKE, (), version).builtin_rules(table, chain)
    return [rule.rsplit(" -j ", 1)[1] for rule in rules]


def test_builtin_jumps_by_version():
    # 1.19: filter INPUT -> KUBE-SERVICES (removed by #95252); no FORWARD -> KUBE-EXTERNAL-SERVICES.
    assert _targets("1.19", "filter", "INPUT") == ["KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-FIREWALL"]
    assert _targets("1.19", "filter", "FORWARD") == ["KUBE-FORWARD", "KUBE-SERVICES"]
    assert _targets("1.20", "filter", "FORWARD") == ["KUBE-FORWARD", "KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES"]
    assert _targets("1.20", "filter", "INPUT") == ["KUBE-EXTERNAL-SERVICES", "KUBE-FIREWALL"]
    # 1.21: KUBE-NODEPORTS from INPUT (#97824).
    assert _targets("1.21", "filter", "INPUT") == ["KUBE-NODEPORTS", "KUBE-EXTERNAL-SERVICES", "KUBE-FIREWALL"]
    # 1.25: KUBE-PROXY-FIREWALL (#110289); kubelet's KUBE-FIREWALL jump still below.
    assert _targets("1.25", "filter", "OUTPUT") == ["KUBE-PROXY-FIREWALL", "KUBE-SERVICES", "KUBE-FIREWALL"]
    # 1.27: kube-proxy's own KUBE-FIREWALL jump (#114470), kubelet's rules gone by default.
    assert _targets("1.27", "filter", "INPUT") == [
        "KUBE-FIREWALL",
        "KUBE-PROXY-FIREWALL",
        "KUBE-NODEPORTS",
        "KUBE-EXTERNAL-SERVICES",
    ]
    assert jump_rules("1.28") == JUMP_RULES == jump_rules("1.35")
    for version in IPTABLES_VERSIONS:
        assert _targets(version, "nat", "POSTROUTING") == ["KUBE-POSTROUTING"]


@pytest.mark.parametrize("version", ["1.19", "1.24", "1.26"])
def test_restore_text_includes_kubelets_rules_where_kube_proxy_relies_on_them(version):
    text = render_iptables([], FAKE, (), version).restore_text()
    assert ":KUBE-MARK-DROP - [0:0]" in text
    assert "-A KUBE-MARK-DROP -j MARK --or-mark 0x00008000" in text
    assert (
        '-A KUBE-FIREWALL -m comment --comment "kubernetes firewall for dropping marked packets"'
        " -m mark --mark 0x00008000/0x00008000 -j DROP"
    ) in text
    assert "-A INPUT -j KUBE-FIREWALL" in text and "-A OUTPUT -j KUBE-FIREWALL" in text
    assert "-A FORWARD -j KUBE-FIREWALL" not in text
    assert text.count("-j KUBE-POSTROUTING") == 1


def test_kubelet_rule_order_and_gate():
    assert "kubernetes firewall for dropping marked packets" in kubelet_rules("1.24").filter_rules[0]
    assert "block incoming localnet connections" in kubelet_rules("1.25").filter_rules[0]
    assert kubelet_rules("1.27") is None and kubelet_rules("1.31") is None
    assert kubelet_rules("1.26", ownership_cleanup=True) is None
    with pytest.raises(ValueError):
        kubelet_rules("1.24", ownership_cleanup=True)


def test_restore_text_1_27_with_kubelet_gate_off_keeps_one_localnet_rule():
    text = render_iptables([], FAKE, (), "1.27", kubelet_iptables_cleanup=False).restore_text()
    firewall = [line for line in text.splitlines() if line.startswith("-A KUBE-FIREWALL ")]
    assert len(firewall) == 2
    assert "-d 127.0.0.0/8 ! -s 127.0.0.0/8" in firewall[0] and "0x00008000/0x00008000" in firewall[1]
    assert text.count("-A INPUT -j KUBE-FIREWALL") == 1


def test_restore_text_1_20_declares_the_kube_mark_drop_chain_kube_proxy_ensures():
    rules = render_iptables([], FAKE, (), "1.20")
    assert rules.ensured_chains == (("nat", "KUBE-MARK-DROP"),)
    assert ":KUBE-MARK-DROP" not in rules.kube_proxy_payload


@pytest.mark.parametrize(
    ("version", "addresses", "localhost", "route_localnet"),
    [
        ("1.23", ("192.168.0.0/16",), True, True),  # always until 1.23
        ("1.24", ("192.168.0.0/16",), True, False),  # #107684: only with loopback NodePort addresses
        ("1.24", (), True, True),
        ("1.25", (), False, True),  # the flag does not exist yet
        ("1.26", (), False, False),  # #108250
    ],
)
def test_route_localnet_by_version(version, addresses, localhost, route_localnet):
    config = replace(FAKE, node_port_addresses=addresses, localhost_nodeports=localhost)
    assert render_iptables([], config, NODE_IPS, version).route_localnet == route_localnet


# --- versions -------------------------------------------------------------------------------------


def test_supported_versions_and_eras():
    assert IPTABLES_VERSIONS[0] == "1.19" and IPTABLES_VERSIONS[-1] == "1.38"
    assert [era_of(v) for v in ("1.19", "1.21", "1.22", "1.23", "1.24", "1.25", "1.26", "1.27", "1.35")] == [
        "A", "A", "B", "B", "C", "D", "D", "E", "E",
    ]  # fmt: skip
    assert check_version("1.18") is not None and check_version("1.19") is None
    newer = check_version("1.39")
    assert newer is not None and "\n" not in newer
    assert newer == "kube-proxy 1.39 is newer than the lab knows: the newest reproduced is 1.38"
    with pytest.raises(ValueError):
        render_iptables([], FAKE, (), "1.18")


@pytest.mark.parametrize("version", IPTABLES_VERSIONS)
def test_every_version_renders_a_consistent_node(version):
    """Every version's restore_text() parses and every jump target is declared."""
    rules = render_iptables(overall_services_1_27(), FAKE, NODE_IPS, version)
    for table in rules.restore_text().split("COMMIT\n")[:2]:
        lines = table.strip("\n").split("\n")
        created = set(_find_all_matches(lines, r"^:([^ ]*)"))
        jumped = set(_find_all_matches(lines, r"-j ([^ ]*)"))
        jumped -= {"ACCEPT", "REJECT", "DROP", "MARK", "RETURN", "DNAT", "SNAT", "MASQUERADE"}
        assert jumped <= created, f"{version}: undeclared {sorted(jumped - created)}"
    assert rules.era == era_of(version)
