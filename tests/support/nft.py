"""kube-proxy's nftables test machinery, ported from pkg/proxy/nftables/proxier_test.go and knftables' Fake: the
fake proxier's inputs, FakeTable (applies a transaction, dumps it as knftables does), the transaction sort and
diff, the golden files and the Services of each golden test. Shared by the unit tests and the kernel load test."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

from lab.render.kubeproxy.nftables import NFTABLES_VERSIONS, NftRules, render_nftables
from lab.render.kubeproxy.service import ProxyConfig, ServicePort
from support.builders import ep, svc

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "nftables"

TEST_NODE_IP = "192.168.0.2"
TEST_NODE_IP_ALT = "192.168.1.2"
TEST_EXTERNAL_IP = "192.168.99.11"
# The fake proxier's interface addresses (lo, eth0), the node IP first.
NODE_IPS = (TEST_NODE_IP, "127.0.0.1", TEST_NODE_IP_ALT, TEST_EXTERNAL_IP)

# The localhost NodePort gate off, as kube-proxy's own test fake runs up to 1.37: 1.38 turns it on by default
# (tests/unit/test_localhost_nodeports.py checks that release's default).
FAKE = ProxyConfig(
    cluster_cidr="10.0.0.0/8", masquerade_mark="0x4000", service_cidrs=("172.30.0.0/16",), nft_localhost_nodeports=False
)

# Which golden directory holds what kube-proxy of each version writes.
GOLDEN_DIR = {
    "1.30": "1.30", "1.31": "1.33", "1.32": "1.33", "1.33": "1.33", "1.34": "1.35", "1.35": "1.35",
    "1.36": "1.36", "1.37": "1.37", "1.38": "1.37",
}  # fmt: skip
assert set(GOLDEN_DIR) == set(NFTABLES_VERSIONS)


def render(services, version: str, config: ProxyConfig = FAKE, node_ips=NODE_IPS) -> NftRules:
    return render_nftables(services, config, node_ips, version)


# --- knftables.Fake: apply a transaction, Dump the table ---------------------------------------------

# Table ip kube-proxy, or the IPv6 proxier's ip6 kube-proxy (knftables' Fake holds one family's table at a time).
COMMAND = re.compile(r"^(add|flush|delete) (table|chain|rule|set|map|element) ip6? kube-proxy(?: (\S+))?(?: (.*))?$")


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
        """The rules of a chain without "add rule ip kube-proxy CHAIN "."""
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
