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
The packet-flow tests are ported from the same 81810de6 test file with the same expected
outputs, traced by a port of its nftablesTracer (helpers_test.go @ 803d40a5...), which starts
from filter-prerouting(-pre-dnat), runs nat-prerouting, applies the DNAT, then filter-forward
and filter-input.
Inputs mirror NewFakeProxier: node "test-node", node IP 192.168.0.2 (NodePorts on it only), pod
CIDR 10.0.0.0/8 (the local-traffic detector), ServiceCIDR 172.30.0.0/16, masquerade mark "0x4000".
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from lab.kubeproxy.nftables import NFTABLES_VERSIONS, NftRules, render_nftables
from lab.kubeproxy.service import Endpoint, ProxyConfig, ServicePort

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "nftables"

TEST_NODE_IP = "192.168.0.2"
TEST_NODE_IP_ALT = "192.168.1.2"
TEST_EXTERNAL_IP = "192.168.99.11"
TEST_EXTERNAL_CLIENT = "203.0.113.2"
TEST_EXTERNAL_CLIENT_BLOCKED = "203.0.113.130"
# The fake proxier's interface addresses (lo, eth0), the node IP first.
NODE_IPS = (TEST_NODE_IP, "127.0.0.1", TEST_NODE_IP_ALT, TEST_EXTERNAL_IP)
# testNodeIPs: what the tracer treats as local ("fib ... type local").
TRACER_LOCAL_IPS = {TEST_NODE_IP, TEST_NODE_IP_ALT, TEST_EXTERNAL_IP}

FAKE = ProxyConfig(cluster_cidr="10.0.0.0/8", masquerade_mark="0x4000", service_cidrs=("172.30.0.0/16",))

# Which golden directory holds what kube-proxy of each version writes.
GOLDEN_DIR = {"1.30": "1.30", "1.31": "1.33", "1.32": "1.33", "1.33": "1.33", "1.34": "1.35", "1.35": "1.35"}
assert set(GOLDEN_DIR) == set(NFTABLES_VERSIONS)


def svc(namespace: str, name: str, cluster_ip: str | None, port: int = 80, port_name: str = "p80", **kw) -> ServicePort:
    protocol = kw.pop("protocol", "TCP")
    return ServicePort(namespace, name, port_name, protocol, port, cluster_ip, **kw)


def ep(ip: str, port: int = 80, local: bool = False, ready: bool = True, **conditions) -> Endpoint:
    # EndpointConditions: serving defaults to ready when unset.
    serving = conditions.pop("serving", ready)
    return Endpoint(ip=ip, port=port, is_local=local, ready=ready, serving=serving, **conditions)


def render(services, version: str, config: ProxyConfig = FAKE, node_ips=NODE_IPS) -> NftRules:
    return render_nftables(services, config, node_ips, version)


# --- knftables.Fake: apply a transaction, Dump the table ---------------------------------------------

COMMAND = re.compile(r"^(add|flush|delete) (table|chain|rule|set|map|element) ip kube-proxy(?: (\S+))?(?: (.*))?$")


@dataclass
class FakeTable:
    """The objects of table ip kube-proxy, as knftables' Fake keeps them (fake.go run/dumpTable)."""

    table: str | None = None
    chains: dict[str, str] = field(default_factory=dict)  # name -> its "add chain" line
    rules: dict[str, list[str]] = field(default_factory=dict)
    sets: dict[str, str] = field(default_factory=dict)
    maps: dict[str, str] = field(default_factory=dict)
    elements: dict[str, dict[str, str]] = field(default_factory=dict)  # set/map -> key -> line

    def run(self, script: str) -> FakeTable:
        for line in script.splitlines():
            if line.strip():
                self.apply(line)
        return self

    def apply(self, line: str) -> None:
        match = COMMAND.match(line)
        assert match, f"not a knftables command: {line}"
        verb, kind, name, rest = match.groups()
        if kind == "table":
            self.table = self.table or line
            return
        assert self.table, f"no table yet: {line}"
        getattr(self, f"_{verb}_{kind}")(name, rest or "", line)

    def _add_chain(self, name: str, rest: str, line: str) -> None:
        if name not in self.chains:  # adding an existing chain changes nothing
            self.chains[name] = line
            self.rules[name] = []

    def _flush_chain(self, name: str, rest: str, line: str) -> None:
        assert name in self.chains, f"no such chain: {line}"
        self.rules[name] = []

    def _delete_chain(self, name: str, rest: str, line: str) -> None:
        assert name in self.chains, f"no such chain: {line}"
        del self.chains[name], self.rules[name]

    def _add_rule(self, name: str, rest: str, line: str) -> None:
        assert name in self.chains, f"no such chain: {line}"
        # checkRuleRefs: jumps, gotos and @sets must point at existing objects.
        for target in re.findall(r"(?:jump|goto) (\S+)", rest):
            assert target in self.chains, f"no such chain {target}: {line}"
        for ref in re.findall(r"@(\S+)", rest):
            assert ref in self.sets or ref in self.maps, f"no such set/map {ref}: {line}"
        self.rules[name].append(line)

    def _add_set(self, name: str, rest: str, line: str) -> None:
        self.sets.setdefault(name, line)
        self.elements.setdefault(name, {})

    def _add_map(self, name: str, rest: str, line: str) -> None:
        self.maps.setdefault(name, line)
        self.elements.setdefault(name, {})

    def _flush_set(self, name: str, rest: str, line: str) -> None:
        assert name in self.sets, f"no such set: {line}"
        self.elements[name] = {}

    def _flush_map(self, name: str, rest: str, line: str) -> None:
        assert name in self.maps, f"no such map: {line}"
        self.elements[name] = {}

    def _delete_set(self, name: str, rest: str, line: str) -> None:
        assert name in self.sets, f"no such set: {line}"
        del self.sets[name], self.elements[name]

    def _add_element(self, name: str, rest: str, line: str) -> None:
        assert name in self.sets or name in self.maps, f"no such set/map: {line}"
        body = rest.removeprefix("{ ").removesuffix(" }")
        key = re.split(r' comment "| : ', body)[0]
        for target in re.findall(r": goto (\S+)", body):
            assert target in self.chains, f"no such chain {target}: {line}"
        self.elements[name][key] = line

    def dump(self) -> str:
        """Fake.Dump: the table, chains, sets, maps (each by name), then rules and elements."""
        lines = [self.table or ""]
        lines += [self.chains[name] for name in sorted(self.chains)]
        lines += [self.sets[name] for name in sorted(self.sets)]
        lines += [self.maps[name] for name in sorted(self.maps)]
        lines += [rule for name in sorted(self.chains) for rule in self.rules[name]]
        for names in (sorted(self.sets), sorted(self.maps)):
            lines += [element for name in names for element in self.elements[name].values()]
        return "\n".join(lines) + "\n"

    def rule_texts(self, chain: str) -> list[str]:
        """The rules of a chain without "add rule ip kube-proxy CHAIN " (what the tracer reads)."""
        prefix = f"add rule ip kube-proxy {chain} "
        return [line.removeprefix(prefix) for line in self.rules[chain]]

    def element_values(self, name: str) -> list[tuple[list[str], str]]:
        """(key, value) of every element of a set or map, comments dropped."""
        out = []
        for line in self.elements[name].values():
            body = line.split(" { ", 1)[1].removesuffix(" }")
            key, _, value = body.partition(" : ")
            out.append((re.sub(r' comment "[^"]*"', "", key).split(" . "), value))
        return out


def dump_of(rules: NftRules) -> str:
    return FakeTable().run(rules.script()).dump()


# --- assertNFTablesTransactionEqual (helpers_test.go) -----------------------------------------------

OBJECT_ORDER = {"table": 10, "chain": 9, "rule": 8, "set": 7, "map": 6, "element": 5}


def sort_nftables_transaction(tx: str) -> str:
    """sortNFTablesTransaction: drop blank lines and comments, sort by object type then name;
    rules of the same chain keep their order, other lines of the same object sort as text."""
    lines = [line for line in tx.split("\n") if line and not line.startswith("#")]

    def key(line: str) -> tuple[int, str, str]:
        words = line.split(" ")
        kind = words[1]
        return (-OBJECT_ORDER.get(kind, 0), words[4], "" if kind == "rule" else line)

    return "\n".join(sorted(lines, key=key))  # sorted() is stable, like sort.SliceStable


def diff_nftables_transaction(expected: str, result: str) -> str:
    want, got = sort_nftables_transaction(expected), sort_nftables_transaction(result)
    if want == got:
        return ""
    return "\n".join(difflib.unified_diff(want.splitlines(), got.splitlines(), "expected", "result", lineterm=""))


def assert_nftables_transaction_equal(expected: str, result: str) -> None:
    diff = diff_nftables_transaction(expected, result)
    assert not diff, f"tables do not match:\n{diff}\nfull result:\n{result}"


def golden(version_dir: str, name: str) -> str:
    return (GOLDEN / version_dir / name).read_text()


def expected_for(version: str, name: str) -> str:
    """baseRules + the test's own part, as kube-proxy's tests build their expected text."""
    directory = GOLDEN_DIR[version]
    return golden(directory, "base_rules.txt") + golden(directory, name)


def service_blocks(text: str) -> dict[str, str]:
    """The "# svcN" blocks of an expected text."""
    blocks: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if re.fullmatch(r"# (svc\d+)", line):
            current = line[2:]
            blocks[current] = []
        elif current:
            blocks[current].append(line)
    return {name: "\n".join(lines) + "\n" for name, lines in blocks.items()}


# --- the cases ----------------------------------------------------------------------------------------


def overall_services() -> dict[str, ServicePort]:
    """TestOverallNFTablesRules' Services and EndpointSlices."""
    return {
        # ClusterIP
        "svc1": svc("ns1", "svc1", "172.30.0.41", endpoints=(ep("10.180.0.1"),)),
        # LoadBalancer, eTP=Local; the only endpoint is on another node
        "svc2": svc(
            "ns2", "svc2", "172.30.0.42", node_port=3001, load_balancer_ips=("1.2.3.4",),
            external_ips=("192.168.99.22",), health_check_node_port=30000, external_policy="Local",
            endpoints=(ep("10.180.0.2"),),
        ),
        # NodePort
        "svc3": svc("ns3", "svc3", "172.30.0.43", node_port=3003, endpoints=(ep("10.180.0.3"),)),
        # externalIP, two endpoints, one local
        "svc4": svc(
            "ns4", "svc4", "172.30.0.44", external_ips=("192.168.99.33",),
            endpoints=(ep("10.180.0.4"), ep("10.180.0.5", local=True)),
        ),
        # LoadBalancer, eTP=Cluster, source ranges (with extra whitespace), ClientIP affinity
        "svc5": svc(
            "ns5", "svc5", "172.30.0.45", node_port=3002, load_balancer_ips=("5.6.7.8",),
            health_check_node_port=30000, load_balancer_source_ranges=(" 203.0.113.0/25",),
            affinity_timeout=10800, endpoints=(ep("10.180.0.3"),),
        ),
        # ClusterIP without endpoints
        "svc6": svc("ns6", "svc6", "172.30.0.46"),
    }  # fmt: skip


def bad_ips_services() -> list[ServicePort]:
    """TestBadIPs: leading zeros everywhere; kube-proxy writes canonical addresses."""
    return [
        svc(
            "ns1", "svc1", "172.30.0.041", node_port=3001, load_balancer_ips=("1.2.3.004",),
            external_ips=("192.168.099.022",), load_balancer_source_ranges=("203.0.113.000/025",),
            endpoints=(ep("10.180.00.001"),),
        )
    ]  # fmt: skip


def repeated_initial_services() -> list[ServicePort]:
    return [
        svc("ns1", "svc1", "172.30.0.41", endpoints=(ep("10.0.1.1"),)),
        svc("ns2", "svc2", "172.30.0.42", port=8080, port_name="p8080", endpoints=(ep("10.0.2.1", 8080),)),
    ]


def repeated_no_endpoints_services() -> list[ServicePort]:
    return [
        svc("ns1", "svc1", "172.30.0.41", endpoints=(ep("10.0.1.1"),)),
        svc("ns3", "svc3", "172.30.0.43", endpoints=(ep("10.0.3.1"),)),
        svc("ns4", "svc4", "172.30.0.44"),
    ]


def startup_services() -> list[ServicePort]:
    return [
        svc("ns1", "svc1", "172.30.0.41", endpoints=(ep("10.0.1.1"), ep("10.0.1.2"))),
        svc("ns2", "svc2", "172.30.0.42", port=8080, port_name="p8080", endpoints=(ep("10.0.2.1", 8080),)),
        svc("ns3", "svc3", "172.30.0.43"),
    ]


GOLDEN_CASES = {
    "overall_nftables_rules.txt": lambda: list(overall_services().values()),
    "bad_ips.txt": bad_ips_services,
    "sync_proxy_rules_repeated_initial.txt": repeated_initial_services,
    "sync_proxy_rules_repeated_no_endpoints.txt": repeated_no_endpoints_services,
    "sync_proxy_rules_startup.txt": startup_services,
}


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
    assert len(flushes) == 6 and max(flushes) < first_element
    # the whole script applies cleanly (every reference exists when used)
    FakeTable().run("\n".join(lines))


@pytest.mark.parametrize(
    ("version", "order"),
    [
        ("1.30", ["cluster-ips", "firewall-ips", "no-endpoint-services", "no-endpoint-nodeports", "service-ips"]),
        ("1.31", ["cluster-ips", "service-ips", "firewall-ips", "no-endpoint-services", "no-endpoint-nodeports"]),
    ],
)
def test_set_and_map_flush_order(version, order):
    """1.30 flushes in syncProxyRules; 1.31's nftElementStorage resets at the end of setupNFTables."""
    flushed = [line.split()[4] for line in render([], version).commands if re.match(r"flush (set|map) ", line)]
    assert flushed == ["nodeport-ips", *order, "service-nodeports"]


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
    from lab.kubeproxy.nftables import service_chain_base

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
    from lab.kubeproxy.nftables import endpoint_chain_base

    assert endpoint_chain_base("testing", "service", "tcp", "http", endpoint) == expected


def test_long_names_are_truncated_with_the_hash_kept():
    """Test_servicePortEndpointChainNameBase "truncated, 1" (81810de6)."""
    from lab.kubeproxy.nftables import endpoint_chain_base

    ns = "very-long-namespace-name-abcdefghijklmnopqrstuvwxyz0123456789xx"
    name = "very-long-service-name-why-would-you-even-do-this-i-mean-really"
    port = "port-443-providing-the-hypertext-transmission-protocol-with-tls"
    got = endpoint_chain_base(ns, name, "sctp", port, Endpoint("1234:5678:9abc:def0::abcd:1234:5678", 443, False))
    assert got == f"CI6C53Q3-{ns}/{name}/sctp/{port}__1234.5678.9abc.def0..abcd.1234..."


def test_unsupported_version_is_refused():
    with pytest.raises(ValueError, match="not reproduced"):
        render([], "1.29")


# --- packet flows (nftablesTracer, helpers_test.go) -----------------------------------------------------

DEST_ADDR = re.compile(r"^ip6* daddr (!= )?(\S+)")
DEST_ADDR_LOOKUP = re.compile(r"^ip6* daddr (!= )?\{([^}]*)\}")
DEST_ADDR_LOCAL = re.compile(r"^fib daddr type local")
DEST_PORT = re.compile(r"^(tcp|udp|sctp) dport (\d+)")
DEST_IP_ONLY_LOOKUP = re.compile(r"^ip6* daddr @(\S+)")
DEST_LOOKUP = re.compile(r"^ip6* daddr \. meta l4proto \. th dport @(\S+)")
DEST_PORT_LOOKUP = re.compile(r"^meta l4proto \. th dport @(\S+)")
DEST_DISPATCH = re.compile(r"^ip6* daddr \. meta l4proto \. th dport vmap @(\S+)$")
DEST_PORT_DISPATCH = re.compile(r"^meta l4proto \. th dport vmap @(\S+)$")
SOURCE_ADDR = re.compile(r"^ip6* saddr (!= )?(\S+)")
SOURCE_ADDR_LOOKUP = re.compile(r"^ip6* saddr (!= )?\{([^}]*)\}")
SOURCE_ADDR_LOCAL = re.compile(r"^fib saddr type local")
ENDPOINT_VMAP = re.compile(r"^numgen random mod \d+ vmap \{(.*)\}$")
ENDPOINT_VMAP_ENTRY = re.compile(r"\d+ : goto (\S+)")
MASQUERADE = re.compile(r"^jump mark-for-masquerade$")
JUMP = re.compile(r"^(jump|goto) (\S+)$")
RETURN = re.compile(r"^return$")
VERDICT = re.compile(r"^(drop|reject)$")
DNAT = re.compile(r"^meta l4proto (tcp|udp|sctp) dnat to (\S+)$")
IGNORED = re.compile(r' *comment "[^"]*"$|^ct state new')


def address_matches(ip: str, want: bool, rule_address: str) -> bool:
    address = ipaddress.ip_address(ip)
    if "/" in rule_address:
        match = address in ipaddress.ip_network(rule_address, strict=False)
    else:
        match = address == ipaddress.ip_address(rule_address)
    return match == want


def address_matches_set(ip: str, want: bool, addresses: str) -> bool:
    return all(address_matches(ip, True, a) == want for a in addresses.replace(" ", "").split(","))


@dataclass
class Tracer:
    table: FakeTable
    local_ips: set[str]
    outputs: list[str] = field(default_factory=list)
    masq: bool = False

    def run_chain(self, chain: str, src: str, proto: str, dst: str, dport: str) -> bool:
        """runChain: True when a terminal statement (verdict, DNAT) was reached."""
        for text in self.table.rule_texts(chain):
            rule = IGNORED.sub("", text)
            while rule:
                rule = rule.lstrip(" ")
                if m := DEST_IP_ONLY_LOOKUP.match(rule):
                    rule = rule[m.end() :]
                    if not any(key[0] == dst for key, _ in self.table.element_values(m[1])):
                        rule = ""
                elif m := DEST_LOOKUP.match(rule):
                    rule = rule[m.end() :]
                    if not any(key == [dst, proto, dport] for key, _ in self.table.element_values(m[1])):
                        rule = ""
                elif m := DEST_PORT_LOOKUP.match(rule):
                    rule = rule[m.end() :]
                    if not any(key == [proto, dport] for key, _ in self.table.element_values(m[1])):
                        rule = ""
                elif m := DEST_DISPATCH.match(rule):
                    found = [v for key, v in self.table.element_values(m[1]) if key == [dst, proto, dport]]
                    rule = found[0] if found else ""
                elif m := DEST_PORT_DISPATCH.match(rule):
                    found = [v for key, v in self.table.element_values(m[1]) if key == [proto, dport]]
                    rule = found[0] if found else ""
                elif m := DEST_ADDR_LOOKUP.match(rule):
                    rule = rule[m.end() :] if address_matches_set(dst, m[1] != "!= ", m[2]) else ""
                elif m := DEST_ADDR.match(rule):
                    rule = rule[m.end() :] if address_matches(dst, m[1] != "!= ", m[2]) else ""
                elif m := DEST_ADDR_LOCAL.match(rule):
                    rule = rule[m.end() :] if dst in self.local_ips else ""
                elif m := DEST_PORT.match(rule):
                    rule = rule[m.end() :] if (m[1], m[2]) == (proto, dport) else ""
                elif m := SOURCE_ADDR_LOOKUP.match(rule):
                    rule = rule[m.end() :] if address_matches_set(src, m[1] != "!= ", m[2]) else ""
                elif m := SOURCE_ADDR.match(rule):
                    rule = rule[m.end() :] if address_matches(src, m[1] != "!= ", m[2]) else ""
                elif m := SOURCE_ADDR_LOCAL.match(rule):
                    rule = rule[m.end() :] if src in self.local_ips else ""
                elif MASQUERADE.match(rule):
                    # The jump itself stands for the mark; masquerading happens in postrouting.
                    self.masq, rule = True, ""
                elif m := JUMP.match(rule):
                    if self.run_chain(m[2], src, proto, dst, dport):
                        return True
                    if m[1] == "goto":
                        return False
                    rule = ""
                elif m := VERDICT.match(rule):
                    self.outputs.append(m[1].upper())
                    return True
                elif RETURN.match(rule):
                    return False
                elif m := DNAT.match(rule):
                    self.outputs.append(m[2])
                    return True
                elif m := ENDPOINT_VMAP.match(rule):
                    # numgen picks one; the tracer follows all of them.
                    for target in ENDPOINT_VMAP_ENTRY.findall(m[1]):
                        self.run_chain(target, src, proto, dst, dport)
                    return True
                else:
                    raise AssertionError(f"unmatched rule: {text}")
        return False


def trace_packet(table: FakeTable, version: str, src: str, proto: str, dst: str, dport: int) -> tuple[str, bool]:
    """tracePacket: filter prerouting (pre-DNAT), nat prerouting, DNAT, filter forward and input."""
    tracer = Tracer(table, TRACER_LOCAL_IPS)
    prerouting = "filter-prerouting-pre-dnat" if version >= "1.34" else "filter-prerouting"
    port = str(dport)
    if tracer.run_chain(prerouting, src, proto, dst, port):
        return ", ".join(tracer.outputs), tracer.masq
    tracer.run_chain("nat-prerouting", src, proto, dst, port)
    if tracer.outputs:
        dst = tracer.outputs[0].rsplit(":", 1)[0]
    if not tracer.run_chain("filter-forward", src, proto, dst, port):
        tracer.run_chain("filter-input", src, proto, dst, port)
    return ", ".join(tracer.outputs), tracer.masq


@dataclass(frozen=True)
class Flow:
    name: str
    src: str
    dst: str
    port: int
    output: str
    masq: bool = False
    proto: str = "tcp"


def run_flows(services, flows, version: str, config: ProxyConfig = FAKE) -> None:
    table = FakeTable().run(render(services, version, config).script())
    failures = []
    for flow in flows:
        output, masq = trace_packet(table, version, flow.src, flow.proto, flow.dst, flow.port)
        if (output, masq) != (flow.output, flow.masq):
            failures.append(f"{flow.name}: got {output!r} masq={masq}, want {flow.output!r} masq={flow.masq}")
    assert not failures, "\n".join(failures)


versions = pytest.mark.parametrize("version", NFTABLES_VERSIONS)
CLIENT, BLOCKED = TEST_EXTERNAL_CLIENT, TEST_EXTERNAL_CLIENT_BLOCKED
NODE, NODE_ALT = TEST_NODE_IP, TEST_NODE_IP_ALT


@versions
def test_no_endpoints_reject(version):
    service = svc(
        "ns1", "svc1", "172.30.0.41", node_port=3001, external_ips=("192.168.99.11",), load_balancer_ips=("1.2.3.4",)
    )
    run_flows(
        [service],
        [
            Flow("pod to cluster IP with no endpoints", "10.0.0.2", "172.30.0.41", 80, "REJECT"),
            Flow("external to external IP with no endpoints", CLIENT, "192.168.99.11", 80, "REJECT"),
            Flow("pod to NodePort with no endpoints", "10.0.0.2", NODE, 3001, "REJECT"),
            Flow("external to NodePort with no endpoints", CLIENT, NODE, 3001, "REJECT"),
            Flow("pod to LoadBalancer IP with no endpoints", "10.0.0.2", "1.2.3.4", 80, "REJECT"),
            Flow("external to LoadBalancer IP with no endpoints", CLIENT, "1.2.3.4", 80, "REJECT"),
        ],
        version,
    )


@versions
def test_cluster_ip_general(version):
    local, remote = dict(local=True), dict(local=False)
    services = [
        svc("ns1", "svc1", "172.30.0.41", port_name="http", endpoints=(ep("10.180.0.1", **local),)),
        *(
            svc("ns2", "svc2", "172.30.0.42", port=port, port_name=name, protocol=proto,
                endpoints=(ep("10.180.0.1", target, **local), ep("10.180.2.1", target, **remote)))
            for name, port, target, proto in [
                ("http", 80, 80, "TCP"), ("https", 443, 8443, "TCP"), ("dns-udp", 53, 53, "UDP"),
                ("dns-tcp", 53, 5353, "TCP"), ("dns-sctp", 53, 53, "SCTP"),
            ]
        ),
    ]  # fmt: skip
    both = "10.180.0.1:{0}, 10.180.2.1:{0}"
    run_flows(
        services,
        [
            Flow("simple clusterIP", "10.180.0.2", "172.30.0.41", 80, "10.180.0.1:80"),
            Flow("hairpin to cluster IP", "10.180.0.1", "172.30.0.41", 80, "10.180.0.1:80", masq=True),
            Flow("clusterIP with multiple endpoints", "10.180.0.2", "172.30.0.42", 80, both.format(80)),
            Flow("clusterIP with TargetPort", "10.180.0.2", "172.30.0.42", 443, both.format(8443)),
            Flow("same port (TCP)", "10.180.0.2", "172.30.0.42", 53, both.format(5353)),
            Flow("same port (UDP)", "10.180.0.2", "172.30.0.42", 53, both.format(53), proto="udp"),
            Flow("same port (SCTP)", "10.180.0.2", "172.30.0.42", 53, both.format(53), proto="sctp"),
            Flow("TCP-only port does not match UDP traffic", "10.180.0.2", "172.30.0.42", 80, "REJECT", proto="udp"),
            Flow("svc1 does not accept svc2's ports", "10.180.0.2", "172.30.0.41", 443, "REJECT"),
            Flow("packet to unallocated cluster ip", "10.180.0.2", "172.30.0.50", 80, "DROP"),
        ],
        version,
    )


@versions
def test_load_balancer_source_ranges(version):
    service = svc(
        "ns1", "svc1", "172.30.0.41", node_port=3001, load_balancer_ips=("1.2.3.4", "5.6.7.8"),
        load_balancer_source_ranges=("192.168.0.0/24", " 203.0.113.0/25"), endpoints=(ep("10.180.0.1"),),
    )  # fmt: skip
    out = "10.180.0.1:80"
    run_flows(
        [service],
        [
            Flow("pod to cluster IP", "10.0.0.2", "172.30.0.41", 80, out),
            Flow("external to nodePort", CLIENT, NODE, 3001, out, True),
            Flow("nodePort bypasses LoadBalancerSourceRanges", BLOCKED, NODE, 3001, out, True),
            Flow("accepted external to LB1", CLIENT, "1.2.3.4", 80, out, True),
            Flow("accepted external to LB2", CLIENT, "5.6.7.8", 80, out, True),
            Flow("blocked external to LB1", BLOCKED, "1.2.3.4", 80, "DROP"),
            Flow("blocked external to LB2", BLOCKED, "5.6.7.8", 80, "DROP"),
            Flow("pod to LB1 (blocked by LoadBalancerSourceRanges)", "10.0.0.2", "1.2.3.4", 80, "DROP"),
            Flow("pod to LB2 (blocked by LoadBalancerSourceRanges)", "10.0.0.2", "5.6.7.8", 80, "DROP"),
            Flow("node to LB1 (allowed by LoadBalancerSourceRanges)", NODE, "1.2.3.4", 80, out, True),
            Flow("node to LB2 (allowed by LoadBalancerSourceRanges)", NODE, "5.6.7.8", 80, out, True),
            Flow("same node to LB1, SNATted to LB1 (implicitly allowed)", "1.2.3.4", "1.2.3.4", 80, out, True),
            Flow("same node to LB2, SNATted to LB2 (implicitly allowed)", "5.6.7.8", "5.6.7.8", 80, out, True),
        ],
        version,
    )


@versions
@pytest.mark.parametrize(
    ("addresses", "alt_allowed"),
    [((), False), (("192.168.0.0/24", "192.168.1.0/24", "2001:db8::/64"), True), (("0.0.0.0/0",), True)],
    ids=["ipv4", "ipv4, multiple nodeport-addresses", "all addresses (not in kube-proxy's test)"],
)
def test_node_ports(version, addresses, alt_allowed):
    service = svc(
        "ns1", "svc1", "172.30.0.41", node_port=3001, endpoints=(ep("10.180.0.1"), ep("10.180.2.1", local=True))
    )
    both = "10.180.0.1:80, 10.180.2.1:80"
    alt = (
        Flow("external to nodePort on secondary IP", CLIENT, NODE_ALT, 3001, both, True)
        if alt_allowed
        else Flow("secondary nodeIP ignores NodePorts", CLIENT, NODE_ALT, 3001, "")
    )
    run_flows(
        [service],
        [
            Flow("pod to cluster IP", "10.0.0.2", "172.30.0.41", 80, both),
            Flow("external to nodePort", CLIENT, NODE, 3001, both, True),
            Flow("node to nodePort", NODE, NODE, 3001, both, True),
            alt,
        ],
        version,
        replace(FAKE, node_port_addresses=addresses),
    )


def etp_service(policy: str) -> ServicePort:
    return svc(
        "ns1", "svc1", "172.30.0.41", node_port=3001, external_ips=("192.168.99.11",), load_balancer_ips=("1.2.3.4",),
        health_check_node_port=30000, external_policy=policy,
        endpoints=(ep("10.180.0.1"), ep("10.180.2.1", local=True)),
    )  # fmt: skip


@versions
def test_external_traffic_policy_local(version):
    both, local = "10.180.0.1:80, 10.180.2.1:80", "10.180.2.1:80"
    run_flows(
        [etp_service("Local")],
        [
            Flow("pod to cluster IP hits both endpoints, unmasqueraded", "10.0.0.2", "172.30.0.41", 80, both),
            Flow("pod to external IP hits both endpoints, unmasqueraded", "10.0.0.2", "192.168.99.11", 80, both),
            Flow("external to external IP hits only local endpoint", CLIENT, "192.168.99.11", 80, local),
            Flow("pod to LB IP hits only both endpoints, unmasqueraded", "10.0.0.2", "1.2.3.4", 80, both),
            Flow("external to LB IP hits only local endpoint, unmasqueraded", CLIENT, "1.2.3.4", 80, local),
            Flow("pod to NodePort hits both endpoints, unmasqueraded", "10.0.0.2", NODE, 3001, both),
            Flow("external to NodePort hits only local endpoint", CLIENT, NODE, 3001, local),
        ],
        version,
    )


@versions
def test_external_traffic_policy_cluster(version):
    both = "10.180.0.1:80, 10.180.2.1:80"
    run_flows(
        [etp_service("Cluster")],
        [
            Flow("pod to cluster IP hits both endpoints, unmasqueraded", "10.0.0.2", "172.30.0.41", 80, both),
            Flow("pod to external IP hits both endpoints, masqueraded", "10.0.0.2", "192.168.99.11", 80, both, True),
            Flow("external to external IP, masqueraded", CLIENT, "192.168.99.11", 80, both, True),
            Flow("pod to LB IP hits both endpoints, masqueraded", "10.0.0.2", "1.2.3.4", 80, both, True),
            Flow("external to LB IP hits both endpoints, masqueraded", CLIENT, "1.2.3.4", 80, both, True),
            Flow("pod to NodePort hits both endpoints, masqueraded", "10.0.0.2", NODE, 3001, both, True),
            Flow("external to NodePort, masqueraded", CLIENT, NODE, 3001, both, True),
        ],
        version,
    )


@versions
@pytest.mark.parametrize(
    ("policy", "endpoints", "output"),
    [
        (
            "Cluster",
            [("10.0.1.1", True), ("10.0.1.2", False), ("10.0.1.3", False)],
            "10.0.1.1:80, 10.0.1.2:80, 10.0.1.3:80",
        ),  # noqa: E501
        ("Local", [("10.0.1.1", True), ("10.0.1.2", False), ("10.0.1.3", False)], "10.0.1.1:80"),
        ("Local", [("10.0.1.1", True), ("10.0.1.2", True), ("10.0.1.3", False)], "10.0.1.1:80, 10.0.1.2:80"),
        ("Local", [("10.0.1.1", False), ("10.0.1.2", False), ("10.0.1.3", False)], "DROP"),
    ],
)
def test_internal_traffic_policy(version, policy, endpoints, output):
    eps = tuple(ep(ip, local=local) for ip, local in endpoints)
    service = svc("ns1", "svc1", "172.30.1.1", port_name="", internal_policy=policy, endpoints=eps)
    run_flows([service], [Flow("pod to ClusterIP", "10.0.0.2", "172.30.1.1", 80, output)], version)
    no_endpoints = replace(service, endpoints=())
    run_flows([no_endpoints], [Flow("endpoints deleted", "10.0.0.2", "172.30.1.1", 80, "REJECT")], version)


READY = dict(ready=True, serving=True, terminating=False)
TERMINATING = dict(ready=False, serving=True, terminating=True)
GONE = dict(ready=False, serving=False, terminating=True)


@versions
@pytest.mark.parametrize(
    ("policy", "endpoints", "pod_output", "external_output", "external_masq"),
    [
        ("Local", [("10.0.1.1", True, READY), ("10.0.1.2", True, READY), ("10.0.1.3", True, TERMINATING),
                   ("10.0.1.4", True, GONE), ("10.0.1.5", False, READY)],
         "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80", "10.0.1.1:80, 10.0.1.2:80", False),
        ("Local", [("10.0.1.2", True, TERMINATING), ("10.0.1.3", True, TERMINATING), ("10.0.1.4", True, GONE),
                   ("10.0.1.5", False, READY)],
         "10.0.1.5:80", "10.0.1.2:80, 10.0.1.3:80", False),
        ("Local", [("10.0.1.5", False, TERMINATING)], "10.0.1.5:80", "DROP", False),
        ("Local", [("10.0.1.5", True, GONE), ("10.0.1.5", False, GONE)], "REJECT", "REJECT", False),
        ("Cluster", [("10.0.1.1", True, READY), ("10.0.1.2", True, READY), ("10.0.1.3", False, TERMINATING),
                     ("10.0.1.4", False, GONE), ("10.0.1.5", False, READY)],
         "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80", "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80", True),
        ("Cluster", [("10.0.1.2", True, TERMINATING), ("10.0.1.3", True, TERMINATING), ("10.0.1.4", False, GONE),
                     ("10.0.1.5", False, TERMINATING)],
         "10.0.1.2:80, 10.0.1.3:80, 10.0.1.5:80", "10.0.1.2:80, 10.0.1.3:80, 10.0.1.5:80", True),
        ("Cluster", [("10.0.1.5", False, TERMINATING)], "10.0.1.5:80", "10.0.1.5:80", True),
        ("Cluster", [("10.0.1.5", True, GONE), ("10.0.1.5", False, GONE)], "REJECT", "REJECT", False),
    ],
    ids=[f"{p}-{c}" for p in ("local", "cluster") for c in ("ready", "only-terminating", "remote-terminating", "none")],
)  # fmt: skip
def test_terminating_endpoints(version, policy, endpoints, pod_output, external_output, external_masq):
    """TestTerminatingEndpointsTrafficPolicyLocal / ...Cluster."""
    eps = tuple(ep(ip, local=local, **conditions) for ip, local, conditions in endpoints)
    service = svc(
        "ns1", "svc1", "172.30.1.1", port_name="", load_balancer_ips=("1.2.3.4",), health_check_node_port=30000,
        external_policy=policy, endpoints=eps,
    )  # fmt: skip
    flows = [
        Flow("pod to clusterIP", "10.0.0.2", "172.30.1.1", 80, pod_output),
        Flow("external to LB", CLIENT, "1.2.3.4", 80, external_output, external_masq),
    ]
    run_flows([service], flows, version)


def masquerade_services() -> list[ServicePort]:
    def lb(n: int, lb_ip: str, **kw) -> ServicePort:
        return svc(
            f"ns{n}", f"svc{n}", f"172.30.0.4{n}", node_port=3000 + n, health_check_node_port=30000 + n,
            load_balancer_ips=(lb_ip,), endpoints=(ep(f"10.180.0.{n}", local=True), ep(f"10.180.1.{n}")), **kw,
        )  # fmt: skip

    return [lb(1, "1.2.3.4"), lb(2, "5.6.7.8", external_policy="Local"), lb(3, "9.10.11.12", internal_policy="Local")]


# Both endpoints of svc1, svc2, svc3 (the local one first).
EPS1, EPS2, EPS3 = (f"10.180.0.{n}:80, 10.180.1.{n}:80" for n in (1, 2, 3))
MASQUERADE_FLOWS = [
    Flow("pod to ClusterIP", "10.0.0.2", "172.30.0.41", 80, EPS1, False),
    Flow("pod to NodePort", "10.0.0.2", NODE, 3001, EPS1, True),
    Flow("pod to LB", "10.0.0.2", "1.2.3.4", 80, EPS1, True),
    Flow("node to ClusterIP", NODE, "172.30.0.41", 80, EPS1, True),
    Flow("node to NodePort", NODE, NODE, 3001, EPS1, True),
    Flow("node to LB", NODE, "1.2.3.4", 80, EPS1, True),
    Flow("external to ClusterIP", CLIENT, "172.30.0.41", 80, EPS1, True),
    Flow("external to NodePort", CLIENT, NODE, 3001, EPS1, True),
    Flow("external to LB", CLIENT, "1.2.3.4", 80, EPS1, True),
    Flow("pod to ClusterIP with eTP:Local", "10.0.0.2", "172.30.0.42", 80, EPS2, False),
    Flow("pod to NodePort with eTP:Local", "10.0.0.2", NODE, 3002, EPS2, False),
    Flow("pod to LB with eTP:Local", "10.0.0.2", "5.6.7.8", 80, EPS2, False),
    Flow("node to ClusterIP with eTP:Local", NODE, "172.30.0.42", 80, EPS2, True),
    Flow("node to NodePort with eTP:Local", NODE, NODE, 3001, EPS1, True),
    Flow("node to LB with eTP:Local", NODE, "5.6.7.8", 80, EPS2, True),
    Flow("external to ClusterIP with eTP:Local", CLIENT, "172.30.0.42", 80, EPS2, True),
    Flow("external to NodePort with eTP:Local", CLIENT, NODE, 3002, "10.180.0.2:80", False),
    Flow("external to LB with eTP:Local", CLIENT, "5.6.7.8", 80, "10.180.0.2:80", False),
    Flow("pod to ClusterIP with iTP:Local", "10.0.0.2", "172.30.0.43", 80, "10.180.0.3:80", False),
    Flow("pod to NodePort with iTP:Local", "10.0.0.2", NODE, 3003, EPS3, True),
    Flow("pod to LB with iTP:Local", "10.0.0.2", "9.10.11.12", 80, EPS3, True),
    Flow("node to ClusterIP with iTP:Local", NODE, "172.30.0.43", 80, "10.180.0.3:80", True),
    Flow("node to NodePort with iTP:Local", NODE, NODE, 3003, EPS3, True),
    Flow("node to LB with iTP:Local", NODE, "9.10.11.12", 80, EPS3, True),
    Flow("external to ClusterIP with iTP:Local", CLIENT, "172.30.0.43", 80, "10.180.0.3:80", True),
    Flow("external to NodePort with iTP:Local", CLIENT, NODE, 3003, EPS3, True),
    Flow("external to LB with iTP:Local", CLIENT, "9.10.11.12", 80, EPS3, True),
]  # fmt: skip

NO_DETECTOR = {
    # Without a LocalTrafficDetector all ClusterIP traffic is assumed to come from pods...
    **{name: {"masq": False} for name in (
        "node to ClusterIP", "node to ClusterIP with eTP:Local", "node to ClusterIP with iTP:Local",
        "external to ClusterIP", "external to ClusterIP with eTP:Local", "external to ClusterIP with iTP:Local",
    )},
    # ...and there is no eTP:Local short-circuit for pods.
    "pod to NodePort with eTP:Local": {"output": "10.180.0.2:80"},
    "pod to LB with eTP:Local": {"output": "10.180.0.2:80"},
}  # fmt: skip
MASQUERADE_ALL = {
    name: {"masq": True}
    for name in ("pod to ClusterIP", "pod to ClusterIP with eTP:Local", "pod to ClusterIP with iTP:Local")
}


@versions
@pytest.mark.parametrize(
    ("masquerade_all", "detector", "overrides"),
    [
        (False, True, {}),
        (False, False, NO_DETECTOR),
        (True, True, MASQUERADE_ALL),
        (True, False, {**MASQUERADE_ALL, **{k: v for k, v in NO_DETECTOR.items() if "output" in v}}),
    ],
    ids=["base", "no LocalTrafficDetector", "masqueradeAll", "masqueradeAll, no LocalTrafficDetector"],
)
def test_internal_external_masquerade(version, masquerade_all, detector, overrides):
    config = replace(FAKE, masquerade_all=masquerade_all, cluster_cidr=FAKE.cluster_cidr if detector else None)
    flows = [replace(flow, **overrides.get(flow.name, {})) for flow in MASQUERADE_FLOWS]
    assert sum(flow.name in overrides for flow in MASQUERADE_FLOWS) == len(overrides)
    run_flows(masquerade_services(), flows, version, config)
