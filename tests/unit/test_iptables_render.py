"""kube-proxy's iptables renderer against kube-proxy's own unit tests.

The cases are ported from pkg/proxy/iptables/proxier_test.go at kubernetes/kubernetes
531be81208e2274ef42e72525a26610a9622bcdf:
- golden payloads (tests/golden/iptables/*.txt) compared the way assertIPTablesRulesEqual does:
  kube-proxy's output is reordered by sortIPTablesRules and must then equal the expected text;
- single-chain expectations compared as assertIPTablesChainEqual does;
- packet-flow tests, which trace a packet through the rules as kube-proxy's iptablesTracer does
  (here through restore_text(), so the built-in chain jumps are exercised too).
The inputs mirror NewFakeProxier: node "test-node" with IP 192.168.0.2, pod CIDR 10.0.0.0/8
(the local-traffic detector), masquerade mark "0x4000", no --random-fully, localhost NodePorts
on, nfacct counters available, nf_conntrack_tcp_be_liberal off.
"""

from __future__ import annotations

import difflib
import functools
import ipaddress
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from lab.kubeproxy import hashing
from lab.kubeproxy.iptables import JUMP_RULES, render_iptables
from lab.kubeproxy.service import Endpoint, ProxyConfig, ServicePort

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "iptables"

TEST_NODE_IP = "192.168.0.2"
TEST_NODE_IP_ALT = "192.168.1.2"
TEST_EXTERNAL_IP = "192.168.99.11"
TEST_EXTERNAL_CLIENT = "203.0.113.2"
TEST_EXTERNAL_CLIENT_BLOCKED = "203.0.113.130"
# The fake proxier's interfaces (lo and eth0); the node IP comes first.
NODE_IPS = (TEST_NODE_IP, "127.0.0.1", TEST_NODE_IP_ALT, TEST_EXTERNAL_IP, "::1", "2001:db8::1", "2001:db8:1::2")
# What the tracer treats as local addresses (newIPTablesTracer: 127.0.0.1, ::1 and testNodeIPs).
TRACER_LOCAL_IPS = set(NODE_IPS)

FAKE = ProxyConfig(cluster_cidr="10.0.0.0/8", masquerade_mark="0x4000", random_fully=False, nfacct_counters=True)


def svc(
    namespace: str, name: str, cluster_ip: str | None, port: int = 80, port_name: str = "p80", protocol="TCP", **kw
) -> ServicePort:
    return ServicePort(namespace, name, port_name, protocol, port, cluster_ip, **kw)


def ep(ip: str, port: int = 80, local: bool = False, ready: bool = True, **conditions) -> Endpoint:
    # EndpointConditions: serving defaults to ready when unset.
    serving = conditions.pop("serving", ready)
    return Endpoint(ip=ip, port=port, is_local=local, ready=ready, serving=serving, **conditions)


def render(services, config: ProxyConfig = FAKE, node_ips=NODE_IPS):
    return render_iptables(services, config, node_ips)


# --- assertIPTablesRulesEqual: parse, sort, print (pkg/util/iptables/testing/parse.go) -----------


@dataclass
class Chain:
    name: str
    rules: list[str] = field(default_factory=list)
    deleted: bool = False


@dataclass
class Table:
    name: str
    chains: list[Chain] = field(default_factory=list)

    def chain(self, name: str) -> Chain | None:
        return next((c for c in self.chains if c.name == name), None)


# Built-in chains ("ACCEPT" policy) are accepted too, for restore_text().
DECLARE_CHAIN = re.compile(r"^:([^ ]*) (?:-|ACCEPT) \[([0-9]*):([0-9]*)\]$")
WORD = re.compile(r'(?:^|\s)("[^"]*"|[^"]\S*)')


def parse_dump(data: str) -> list[Table]:
    """ParseIPTablesDump: tables of declared chains (in declaration order) and their rules."""
    tables: list[Table] = []
    declaring = False
    for raw in data.strip("\n").split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("*"):
            tables.append(Table(line[1:]))
            declaring = True
        elif declaring and (match := DECLARE_CHAIN.match(line)):
            tables[-1].chains.append(Chain(match[1]))
        elif line.startswith("-A "):
            declaring = False
            chain = tables[-1].chain(line.split()[1])
            assert chain is not None, f"rule for an undeclared chain: {line}"
            chain.rules.append(line)
        elif line.startswith("-X "):
            declaring = False
            tables[-1].chain(line.split()[1]).deleted = True
        else:
            assert line == "COMMIT", f"cannot parse {line!r}"
            declaring = False
    return tables


def dump_string(tables: list[Table]) -> str:
    out = []
    for table in tables:
        out.append(f"*{table.name}")
        out += [f":{c.name} - [0:0]" for c in table.chains]
        out += [rule for c in table.chains for rule in c.rules]
        out += [f"-X {c.name}" for c in table.chains if c.deleted]
        out.append("COMMIT")
    return "\n".join(out) + "\n"


def words(rule: str) -> list[str]:
    return [w.strip('"') for w in WORD.findall(rule)]


def comment_of(rule: str) -> str | None:
    w = words(rule)
    return w[w.index("--comment") + 1] if "--comment" in w else None


def by_comment_service_name(rule1: str, rule2: str) -> int:
    """orderByCommentServiceName, as a cmp: the service name is the comment up to " " or ":"."""
    c1, c2 = comment_of(rule1), comment_of(rule2)
    if c1 is None or c2 is None:
        return 0
    n1, n2 = re.split("[ :]", c1)[0], re.split("[ :]", c2)[0]
    return (n1 > n2) - (n1 < n2)


def last_rule_last_cmp(rule1: str, rule2: str) -> int:
    last1 = "must be the last rule" in (comment_of(rule1) or "")
    last2 = "must be the last rule" in (comment_of(rule2) or "")
    if last1 != last2:
        return 1 if last1 else -1
    return 0 if last1 else by_comment_service_name(rule1, rule2)


def chain_key(name: str) -> tuple[int, str]:
    order = {"KUBE-NODEPORTS": 0, "KUBE-SERVICES": 1}
    return (order.get(name, 2 if name.startswith("KUBE-") else 3), name)


SORTED_BY_SERVICE_NAME = {("filter", "KUBE-NODEPORTS"), ("nat", "KUBE-NODEPORTS"), ("filter", "KUBE-SERVICES")}


def sort_iptables_rules(data: str) -> str:
    """sortIPTablesRules: tables and chains sorted, KUBE-NODEPORTS / KUBE-SERVICES rules stably
    sorted by service name (keeping the "must be the last rule" rule last)."""
    tables = sorted(parse_dump(data), key=lambda t: t.name)
    for table in tables:
        table.chains.sort(key=lambda c: chain_key(c.name))
        for chain in table.chains:
            if (table.name, chain.name) in SORTED_BY_SERVICE_NAME:
                chain.rules.sort(key=functools.cmp_to_key(by_comment_service_name))
            elif (table.name, chain.name) == ("nat", "KUBE-SERVICES"):
                chain.rules.sort(key=functools.cmp_to_key(last_rule_last_cmp))
    return dump_string(tables)


def check_rule_jumps(data: str) -> None:
    """checkIPTablesRuleJumps: every jump and every filled chain is declared, no jump to an empty
    chain (but KUBE-NODEPORTS), no declared chain left unused (but the top-level ones)."""
    builtin_targets = {"ACCEPT", "REJECT", "DROP", "MARK", "RETURN", "DNAT", "SNAT", "MASQUERADE"}
    top_level = {"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-FORWARD"}
    top_level |= {"KUBE-MARK-MASQ", "KUBE-PROXY-FIREWALL", "KUBE-FIREWALL"}
    for table in parse_dump(data):
        created = {c.name for c in table.chains if not c.deleted}
        filled = {c.name for c in table.chains if c.rules}
        jumped = {m[1] for c in table.chains for r in c.rules if (m := re.search(r" -j (\S+)", r))} - builtin_targets
        assert not (jumped | filled) - created, f"{table.name}: used but not created: {(jumped | filled) - created}"
        assert not jumped - filled - {"KUBE-NODEPORTS"}, f"{table.name}: jumped to but empty: {jumped - filled}"
        assert not created - jumped - top_level, f"{table.name}: created but not used: {created - jumped - top_level}"


def assert_rules_equal(expected: str, result: str) -> None:
    got = sort_iptables_rules(result)
    if got != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), got.splitlines(True), "expected", "rendered"))
        pytest.fail(f"rules do not match:\n{diff}\nfull result:\n{got}")


def assert_chain_equal(table: str, chain: str, expected: str, result: str) -> None:
    """assertIPTablesChainEqual: exactly these rules, in this order."""
    found = next(t for t in parse_dump(result) if t.name == table).chain(chain)
    got = "".join(f"{rule}\n" for rule in (found.rules if found else []))
    assert got == expected, "".join(difflib.unified_diff(expected.splitlines(True), got.splitlines(True)))


def golden(name: str) -> str:
    """A golden file, without its "# source:" header."""
    text = (GOLDEN / name).read_text()
    return "".join(line for line in text.splitlines(True) if not line.startswith("#"))


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


# --- packet flows (iptablesTracer) -------------------------------------------------------------

# Parameters kube-proxy's test parser knows (ParseRule); False = takes no value.
PARAMS = {
    "-A": True,
    "--comment": True,
    "-p": True,
    "-s": True,
    "--src-type": True,
    "--sport": True,
    "-d": True,
    "--dst-type": True,
    "--dport": True,
    "--match-set": True,
    "-j": True,
    "--random-fully": False,
    "--probability": True,
    "--to-destination": True,
    "--rcheck": False,
    "--mark": True,
    "--ctstate": True,
    "--name": True,
    "--seconds": True,
    "--set": False,
    "--reap": False,
    "--mode": True,
}


def parse_rule(rule: str) -> dict[str, tuple[bool, str]]:
    """ParseRule, non-strict: parameter -> (negated, value); "-m MODULE" and unknown words skipped."""
    parsed: dict[str, tuple[bool, str]] = {}
    ws, i, negated = words(rule), 0, False
    while i < len(ws):
        word = ws[i]
        if word == "-m" and i < len(ws) - 1:
            i += 2
            continue
        if word == "!":
            negated, i = True, i + 1
            continue
        if word in PARAMS:
            takes_value = PARAMS[word]
            parsed[word] = (negated, ws[i + 1] if takes_value else "")
            i += 2 if takes_value else 1
        else:
            i += 1
        negated = False
    return parsed


def address_matches(value: tuple[bool, str], ip: str) -> bool:
    negated, text = value
    address = ipaddress.ip_address(ip)
    if "/" in text:
        net = ipaddress.ip_network(text, strict=False)
        matches = address.version == net.version and address in net
    else:
        matches = address == ipaddress.ip_address(text)
    return matches != negated


def value_matches(value: tuple[bool, str], text: str) -> bool:
    negated, wanted = value
    return (wanted == text) != negated


@dataclass
class Tracer:
    tables: dict[str, dict[str, list[dict[str, tuple[bool, str]]]]]
    outputs: list[str] = field(default_factory=list)
    masq: bool = False

    def rule_matches(self, rule, src: str, proto: str, dst: str, dport: str) -> bool:
        if "-s" in rule and not address_matches(rule["-s"], src):
            return False
        if "--src-type" in rule and not value_matches(rule["--src-type"], self._addrtype(src)):
            return False
        if "-p" in rule and not value_matches(rule["-p"], proto):
            return False
        if "-d" in rule and not address_matches(rule["-d"], dst):
            return False
        if "--dst-type" in rule and not value_matches(rule["--dst-type"], self._addrtype(dst)):
            return False
        if "--dport" in rule and not value_matches(rule["--dport"], dport):
            return False
        # Anything that depends on history (affinity, marks, conntrack) does not match.
        return not ({"--rcheck", "--mark", "--ctstate"} & rule.keys())

    @staticmethod
    def _addrtype(ip: str) -> str:
        return "LOCAL" if ip in TRACER_LOCAL_IPS else "not-matched"

    def run_chain(self, table: str, chain: str, src: str, proto: str, dst: str, dport: str) -> bool:
        for rule in self.tables[table].get(chain, []):
            if "-j" not in rule or not self.rule_matches(rule, src, proto, dst, dport):
                continue
            target = rule["-j"][1]
            if target == "KUBE-MARK-MASQ":
                self.masq = True
            elif target in ("ACCEPT", "REJECT", "DROP"):
                self.outputs.append(target)
                return True
            elif target == "DNAT":
                self.outputs.append(rule["--to-destination"][1])
                return True
            elif self.run_chain(table, target, src, proto, dst, dport) and "--probability" not in rule:
                # A probabilistic jump keeps collecting the other endpoints.
                return True
        return False


def trace(restore_text: str, src: str, dst: str, dport: int, proto: str = "tcp") -> tuple[str, bool]:
    """tracePacket: nat PREROUTING, pending DNAT, then kube-proxy's filter chains."""
    tables = {t.name: {c.name: [parse_rule(r) for r in c.rules] for c in t.chains} for t in parse_dump(restore_text)}
    tracer = Tracer(tables)
    port = str(dport)
    tracer.run_chain("nat", "PREROUTING", src, proto, dst, port)
    if tracer.outputs:
        dst = tracer.outputs[0].split(":")[0]
    for chain in ("KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-PROXY-FIREWALL"):
        tracer.run_chain("filter", chain, src, proto, dst, port)
    return ", ".join(tracer.outputs), tracer.masq


@dataclass(frozen=True)
class Flow:
    name: str
    src: str
    dst: str
    dport: int
    output: str
    masq: bool = False
    proto: str = "tcp"


def run_flows(rules, flows: list[Flow]) -> None:
    text = rules.restore_text()
    failures = []
    for flow in flows:
        output, masq = trace(text, flow.src, flow.dst, flow.dport, flow.proto)
        if (output, masq) != (flow.output, flow.masq):
            failures.append(f"{flow.name}: expected {flow.output!r} masq={flow.masq}, got {output!r} masq={masq}")
    assert not failures, "\n".join(failures) + "\n\n" + text


def test_no_endpoints_reject():
    """TestNoEndpointsReject."""
    s = svc(
        "ns1", "svc1", "172.30.0.41", node_port=3001, external_ips=("192.168.99.11",), load_balancer_ips=("1.2.3.4",)
    )
    run_flows(
        render([s]),
        [
            Flow("pod to cluster IP with no endpoints", "10.0.0.2", "172.30.0.41", 80, "REJECT"),
            Flow("external to external IP with no endpoints", TEST_EXTERNAL_CLIENT, "192.168.99.11", 80, "REJECT"),
            Flow("pod to NodePort with no endpoints", "10.0.0.2", TEST_NODE_IP, 3001, "REJECT"),
            Flow("external to NodePort with no endpoints", TEST_EXTERNAL_CLIENT, TEST_NODE_IP, 3001, "REJECT"),
            Flow("pod to LoadBalancer IP with no endpoints", "10.0.0.2", "1.2.3.4", 80, "REJECT"),
            Flow("external to LoadBalancer IP with no endpoints", TEST_EXTERNAL_CLIENT, "1.2.3.4", 80, "REJECT"),
        ],
    )


def test_cluster_ip_general():
    """TestClusterIPGeneral: several ports and protocols on one ClusterIP."""
    both = (ep("10.180.0.1", local=True), ep("10.180.2.1"))
    services = [
        svc("ns1", "svc1", "172.30.0.41", port_name="http", endpoints=(ep("10.180.0.1", local=True),)),
        svc("ns2", "svc2", "172.30.0.42", port_name="http", endpoints=both),
        svc("ns2", "svc2", "172.30.0.42", 443, "https", endpoints=tuple(replace(e, port=8443) for e in both)),
        svc(
            "ns2",
            "svc2",
            "172.30.0.42",
            53,
            "dns-udp",
            protocol="UDP",
            endpoints=tuple(replace(e, port=53) for e in both),
        ),
        svc("ns2", "svc2", "172.30.0.42", 53, "dns-tcp", endpoints=tuple(replace(e, port=5353) for e in both)),
        svc(
            "ns2",
            "svc2",
            "172.30.0.42",
            53,
            "dns-sctp",
            protocol="SCTP",
            endpoints=tuple(replace(e, port=53) for e in both),
        ),
    ]
    run_flows(
        render(services),
        [
            Flow("simple clusterIP", "10.180.0.2", "172.30.0.41", 80, "10.180.0.1:80"),
            Flow("hairpin to cluster IP", "10.180.0.1", "172.30.0.41", 80, "10.180.0.1:80", masq=True),
            Flow("clusterIP with multiple endpoints", "10.180.0.2", "172.30.0.42", 80, "10.180.0.1:80, 10.180.2.1:80"),
            Flow("clusterIP with TargetPort", "10.180.0.2", "172.30.0.42", 443, "10.180.0.1:8443, 10.180.2.1:8443"),
            Flow("same port (TCP)", "10.180.0.2", "172.30.0.42", 53, "10.180.0.1:5353, 10.180.2.1:5353"),
            Flow("same port (UDP)", "10.180.0.2", "172.30.0.42", 53, "10.180.0.1:53, 10.180.2.1:53", proto="udp"),
            Flow("same port (SCTP)", "10.180.0.2", "172.30.0.42", 53, "10.180.0.1:53, 10.180.2.1:53", proto="sctp"),
            Flow("TCP-only port does not match UDP traffic", "10.180.0.2", "172.30.0.42", 80, "", proto="udp"),
            Flow("svc1 does not accept svc2's ports", "10.180.0.2", "172.30.0.41", 443, ""),
        ],
    )


def test_load_balancer_source_ranges():
    """TestLoadBalancer: loadBalancerSourceRanges, KUBE-FW and KUBE-PROXY-FIREWALL."""
    s = svc(
        "ns1",
        "svc1",
        "172.30.0.41",
        node_port=3001,
        load_balancer_ips=("1.2.3.4", "5.6.7.8"),
        load_balancer_source_ranges=("192.168.0.0/24", " 203.0.113.0/25"),
        endpoints=(ep("10.180.0.1"),),
    )
    ok = "10.180.0.1:80"
    run_flows(
        render([s]),
        [
            Flow("pod to cluster IP", "10.0.0.2", "172.30.0.41", 80, ok),
            Flow("external to nodePort", TEST_EXTERNAL_CLIENT, TEST_NODE_IP, 3001, ok, masq=True),
            Flow(
                "nodePort bypasses LoadBalancerSourceRanges", TEST_EXTERNAL_CLIENT_BLOCKED, TEST_NODE_IP, 3001, ok, True
            ),
            Flow("accepted external to LB1", TEST_EXTERNAL_CLIENT, "1.2.3.4", 80, ok, masq=True),
            Flow("accepted external to LB2", TEST_EXTERNAL_CLIENT, "5.6.7.8", 80, ok, masq=True),
            Flow("blocked external to LB1", TEST_EXTERNAL_CLIENT_BLOCKED, "1.2.3.4", 80, "DROP"),
            Flow("blocked external to LB2", TEST_EXTERNAL_CLIENT_BLOCKED, "5.6.7.8", 80, "DROP"),
            Flow("pod to LB1 (blocked by LoadBalancerSourceRanges)", "10.0.0.2", "1.2.3.4", 80, "DROP"),
            Flow("pod to LB2 (blocked by LoadBalancerSourceRanges)", "10.0.0.2", "5.6.7.8", 80, "DROP"),
            Flow("node to LB1 (allowed by LoadBalancerSourceRanges)", TEST_NODE_IP, "1.2.3.4", 80, ok, masq=True),
            Flow("node to LB2 (allowed by LoadBalancerSourceRanges)", TEST_NODE_IP, "5.6.7.8", 80, ok, masq=True),
            Flow("same node to LB1, SNATted to LB1 (implicitly allowed)", "1.2.3.4", "1.2.3.4", 80, ok, masq=True),
            Flow("same node to LB2, SNATted to LB2 (implicitly allowed)", "5.6.7.8", "5.6.7.8", 80, ok, masq=True),
        ],
    )


LOCALNET_RULE = (
    '-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections"'
    " -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP\n"
)


@pytest.mark.parametrize(
    ("localhost_nodeports", "nodeport_addresses", "allow_alt_node_ip", "expect_firewall"),
    [
        pytest.param(True, (), True, True, id="localhost-nodeports enabled"),
        pytest.param(False, (), True, False, id="localhost-nodeports disabled"),
        pytest.param(False, ("192.168.0.0/24", "127.0.0.1/32"), False, False, id="localhost in nodeport-addresses"),
        pytest.param(False, ("192.168.0.0/24", "192.168.1.0/24", "2001:db8::/64"), True, False, id="multiple"),
    ],
)
def test_node_ports(localhost_nodeports, nodeport_addresses, allow_alt_node_ip, expect_firewall):
    """TestNodePorts (its IPv4 cases): --nodeport-addresses and --iptables-localhost-nodeports."""
    config = replace(FAKE, localhost_nodeports=localhost_nodeports, node_port_addresses=nodeport_addresses)
    s = svc("ns1", "svc1", "172.30.0.41", node_port=3001, endpoints=(ep("10.180.0.1"), ep("10.180.2.1", local=True)))
    rules = render([s], config)
    both = "10.180.0.1:80, 10.180.2.1:80"
    run_flows(
        rules,
        [
            Flow("pod to cluster IP", "10.0.0.2", "172.30.0.41", 80, both),
            Flow("external to nodePort", TEST_EXTERNAL_CLIENT, TEST_NODE_IP, 3001, both, masq=True),
            Flow("node to nodePort", TEST_NODE_IP, TEST_NODE_IP, 3001, both, masq=True),
            Flow(
                "localhost to nodePort",
                "127.0.0.1",
                "127.0.0.1",
                3001,
                *((both, True) if localhost_nodeports else ("", False)),
            ),
            Flow(
                "nodePort on secondary IP",
                TEST_EXTERNAL_CLIENT,
                TEST_NODE_IP_ALT,
                3001,
                *((both, True) if allow_alt_node_ip else ("", False)),
            ),
        ],
    )
    assert_chain_equal("filter", "KUBE-FIREWALL", LOCALNET_RULE if expect_firewall else "", rules.kube_proxy_payload)
    assert rules.route_localnet == localhost_nodeports


def test_health_check_node_port():
    """TestHealthCheckNodePort (with --nodeport-addresses 127.0.0.0/8)."""
    s = svc("ns1", "svc1", "172.30.0.42", node_port=3001, health_check_node_port=30000, external_policy="Local")
    rules = render([s], replace(FAKE, node_port_addresses=("127.0.0.0/8",)))
    run_flows(rules, [Flow("firewall accepts HealthCheckNodePort", "1.2.3.4", TEST_NODE_IP, 30000, "ACCEPT")])
    run_flows(render([]), [Flow("HealthCheckNodePort no longer has any rule", "1.2.3.4", TEST_NODE_IP, 30000, "")])


def external_policy_service(policy: str) -> ServicePort:
    return svc(
        "ns1",
        "svc1",
        "172.30.0.41",
        node_port=3001,
        external_ips=("192.168.99.11",),
        load_balancer_ips=("1.2.3.4",),
        health_check_node_port=30000,
        external_policy=policy,
        endpoints=(ep("10.180.0.1"), ep("10.180.2.1", local=True)),
    )


def test_external_traffic_policy_local():
    """TestExternalTrafficPolicyLocal: only local endpoints from outside, no masquerade; pods and
    the node short-circuit to all endpoints."""
    both, local = "10.180.0.1:80, 10.180.2.1:80", "10.180.2.1:80"
    run_flows(
        render([external_policy_service("Local")]),
        [
            Flow("pod to cluster IP hits both endpoints, unmasqueraded", "10.0.0.2", "172.30.0.41", 80, both),
            Flow("pod to external IP hits both endpoints, unmasqueraded", "10.0.0.2", "192.168.99.11", 80, both),
            Flow("external to external IP hits only local endpoint", TEST_EXTERNAL_CLIENT, "192.168.99.11", 80, local),
            Flow("pod to LB IP hits only both endpoints, unmasqueraded", "10.0.0.2", "1.2.3.4", 80, both),
            Flow(
                "external to LB IP hits only local endpoint, unmasqueraded", TEST_EXTERNAL_CLIENT, "1.2.3.4", 80, local
            ),
            Flow("pod to NodePort hits both endpoints, unmasqueraded", "10.0.0.2", TEST_NODE_IP, 3001, both),
            Flow("external to NodePort hits only local endpoint", TEST_EXTERNAL_CLIENT, TEST_NODE_IP, 3001, local),
        ],
    )


def test_external_traffic_policy_cluster():
    """TestExternalTrafficPolicyCluster: everything external is masqueraded."""
    both = "10.180.0.1:80, 10.180.2.1:80"
    run_flows(
        render([external_policy_service("Cluster")]),
        [
            Flow("pod to cluster IP hits both endpoints, unmasqueraded", "10.0.0.2", "172.30.0.41", 80, both),
            Flow("pod to external IP hits both endpoints, masqueraded", "10.0.0.2", "192.168.99.11", 80, both, True),
            Flow("external to external IP, masqueraded", TEST_EXTERNAL_CLIENT, "192.168.99.11", 80, both, True),
            Flow("pod to LB IP hits both endpoints, masqueraded", "10.0.0.2", "1.2.3.4", 80, both, True),
            Flow("external to LB IP hits both endpoints, masqueraded", TEST_EXTERNAL_CLIENT, "1.2.3.4", 80, both, True),
            Flow("pod to NodePort hits both endpoints, masqueraded", "10.0.0.2", TEST_NODE_IP, 3001, both, True),
            Flow(
                "external to NodePort hits both endpoints, masqueraded",
                TEST_EXTERNAL_CLIENT,
                TEST_NODE_IP,
                3001,
                both,
                True,
            ),
        ],
    )


@pytest.mark.parametrize(
    ("policy", "nodes", "output"),
    [
        pytest.param("Cluster", ("test-node", "node1", "node2"), "10.0.1.1:80, 10.0.1.2:80, 10.0.1.3:80", id="cluster"),
        pytest.param("Local", ("test-node", "node1", "node2"), "10.0.1.1:80", id="local, one local endpoint"),
        pytest.param("Local", ("test-node", "test-node", "node2"), "10.0.1.1:80, 10.0.1.2:80", id="local, two local"),
        pytest.param("Local", ("node0", "node1", "node2"), "DROP", id="local, no local endpoints"),
    ],
)
def test_internal_traffic_policy(policy, nodes, output):
    """TestInternalTrafficPolicy."""
    endpoints = tuple(ep(f"10.0.1.{i}", local=node == "test-node") for i, node in enumerate(nodes, 1))
    s = svc("ns1", "svc1", "172.30.1.1", port_name="", internal_policy=policy, endpoints=endpoints)
    run_flows(render([s]), [Flow("pod to ClusterIP", "10.0.0.2", "172.30.1.1", 80, output)])
    run_flows(render([replace(s, endpoints=())]), [Flow("endpoints deleted", "10.0.0.2", "172.30.1.1", 80, "REJECT")])


def terminating(ip: str, local: bool, serving: bool = True) -> Endpoint:
    return ep(ip, local=local, ready=False, serving=serving, terminating=True)


@pytest.mark.parametrize(
    ("endpoints", "to_cluster_ip", "to_lb"),
    [
        pytest.param(
            (
                ep("10.0.1.1", local=True),
                ep("10.0.1.2", local=True),
                terminating("10.0.1.3", True),
                terminating("10.0.1.4", True, serving=False),
                ep("10.0.1.5"),
            ),
            "10.0.1.1:80, 10.0.1.2:80, 10.0.1.5:80",
            "10.0.1.1:80, 10.0.1.2:80",
            id="ready endpoints exist",
        ),
        pytest.param(
            (
                terminating("10.0.1.2", True),
                terminating("10.0.1.3", True),
                terminating("10.0.1.4", True, serving=False),
                ep("10.0.1.5"),
            ),
            "10.0.1.5:80",
            "10.0.1.2:80, 10.0.1.3:80",
            id="only terminating endpoints exist",
        ),
        pytest.param(
            (terminating("10.0.1.5", False),), "10.0.1.5:80", "DROP", id="terminating endpoints on remote node"
        ),
        pytest.param(
            (terminating("10.0.1.5", True, serving=False), terminating("10.0.1.5", False, serving=False)),
            "REJECT",
            "REJECT",
            id="no usable endpoints on any node",
        ),
    ],
)
def test_terminating_endpoints_traffic_policy_local(endpoints, to_cluster_ip, to_lb):
    """TestTerminatingEndpointsTrafficPolicyLocal: ready endpoints, else serving+terminating ones,
    chosen separately for the cluster-wide and the node-local list."""
    s = svc(
        "ns1",
        "svc1",
        "172.30.1.1",
        port_name="",
        load_balancer_ips=("1.2.3.4",),
        health_check_node_port=30000,
        external_policy="Local",
        endpoints=endpoints,
    )
    run_flows(
        render([s]),
        [
            Flow("pod to clusterIP", "10.0.0.2", "172.30.1.1", 80, to_cluster_ip),
            Flow("external to LB", TEST_EXTERNAL_CLIENT, "1.2.3.4", 80, to_lb),
        ],
    )
    run_flows(
        render([replace(s, endpoints=())]),
        [
            Flow("pod to clusterIP after endpoints deleted", "10.0.0.2", "172.30.1.1", 80, "REJECT"),
            Flow("external to LB after endpoints deleted", TEST_EXTERNAL_CLIENT, "1.2.3.4", 80, "REJECT"),
        ],
    )


def masquerade_services() -> list[ServicePort]:
    def endpoints(n: int) -> tuple[Endpoint, ...]:
        return ep(f"10.180.0.{n}", local=True), ep(f"10.180.1.{n}")

    return [
        svc(
            "ns1",
            "svc1",
            "172.30.0.41",
            node_port=3001,
            health_check_node_port=30001,
            load_balancer_ips=("1.2.3.4",),
            endpoints=endpoints(1),
        ),
        svc(
            "ns2",
            "svc2",
            "172.30.0.42",
            node_port=3002,
            health_check_node_port=30002,
            external_policy="Local",
            load_balancer_ips=("5.6.7.8",),
            endpoints=endpoints(2),
        ),
        svc(
            "ns3",
            "svc3",
            "172.30.0.43",
            node_port=3003,
            health_check_node_port=30003,
            internal_policy="Local",
            load_balancer_ips=("9.10.11.12",),
            endpoints=endpoints(3),
        ),
    ]


POD, NODE, EXT = "10.0.0.2", TEST_NODE_IP, TEST_EXTERNAL_CLIENT
ALL1, ALL2, ALL3 = "10.180.0.1:80, 10.180.1.1:80", "10.180.0.2:80, 10.180.1.2:80", "10.180.0.3:80, 10.180.1.3:80"
MASQUERADE_FLOWS = [
    Flow("pod to ClusterIP", POD, "172.30.0.41", 80, ALL1, False),
    Flow("pod to NodePort", POD, NODE, 3001, ALL1, True),
    Flow("pod to LB", POD, "1.2.3.4", 80, ALL1, True),
    Flow("node to ClusterIP", NODE, "172.30.0.41", 80, ALL1, True),
    Flow("node to NodePort", NODE, NODE, 3001, ALL1, True),
    Flow("localhost to NodePort", "127.0.0.1", "127.0.0.1", 3001, ALL1, True),
    Flow("node to LB", NODE, "1.2.3.4", 80, ALL1, True),
    Flow("external to ClusterIP", EXT, "172.30.0.41", 80, ALL1, True),
    Flow("external to NodePort", EXT, NODE, 3001, ALL1, True),
    Flow("external to LB", EXT, "1.2.3.4", 80, ALL1, True),
    Flow("pod to ClusterIP with eTP:Local", POD, "172.30.0.42", 80, ALL2, False),
    Flow("pod to NodePort with eTP:Local", POD, NODE, 3002, ALL2, False),
    Flow("pod to LB with eTP:Local", POD, "5.6.7.8", 80, ALL2, False),
    Flow("node to ClusterIP with eTP:Local", NODE, "172.30.0.42", 80, ALL2, True),
    Flow("node to NodePort with eTP:Local", NODE, NODE, 3001, ALL1, True),
    Flow("localhost to NodePort with eTP:Local", "127.0.0.1", "127.0.0.1", 3002, ALL2, True),
    Flow("node to LB with eTP:Local", NODE, "5.6.7.8", 80, ALL2, True),
    Flow("external to ClusterIP with eTP:Local", EXT, "172.30.0.42", 80, ALL2, True),
    Flow("external to NodePort with eTP:Local", EXT, NODE, 3002, "10.180.0.2:80", False),
    Flow("external to LB with eTP:Local", EXT, "5.6.7.8", 80, "10.180.0.2:80", False),
    Flow("pod to ClusterIP with iTP:Local", POD, "172.30.0.43", 80, "10.180.0.3:80", False),
    Flow("pod to NodePort with iTP:Local", POD, NODE, 3003, ALL3, True),
    Flow("pod to LB with iTP:Local", POD, "9.10.11.12", 80, ALL3, True),
    Flow("node to ClusterIP with iTP:Local", NODE, "172.30.0.43", 80, "10.180.0.3:80", True),
    Flow("node to NodePort with iTP:Local", NODE, NODE, 3003, ALL3, True),
    Flow("localhost to NodePort with iTP:Local", "127.0.0.1", "127.0.0.1", 3003, ALL3, True),
    Flow("node to LB with iTP:Local", NODE, "9.10.11.12", 80, ALL3, True),
    Flow("external to ClusterIP with iTP:Local", EXT, "172.30.0.43", 80, "10.180.0.3:80", True),
    Flow("external to NodePort with iTP:Local", EXT, NODE, 3003, ALL3, True),
    Flow("external to LB with iTP:Local", EXT, "9.10.11.12", 80, ALL3, True),
]
# Without a local-traffic detector pods get no eTP:Local short-circuit, so only the local endpoint...
NO_SHORT_CIRCUIT = {
    "pod to NodePort with eTP:Local": {"output": "10.180.0.2:80"},
    "pod to LB with eTP:Local": {"output": "10.180.0.2:80"},
}
# ...and all ClusterIP traffic is taken for pod traffic.
NO_DETECTOR = {
    **{
        name: {"masq": False}
        for name in (
            "node to ClusterIP",
            "node to ClusterIP with eTP:Local",
            "node to ClusterIP with iTP:Local",
            "external to ClusterIP",
            "external to ClusterIP with eTP:Local",
            "external to ClusterIP with iTP:Local",
        )
    },
    **NO_SHORT_CIRCUIT,
}
MASQUERADE_ALL = {
    name: {"masq": True}
    for name in ("pod to ClusterIP", "pod to ClusterIP with eTP:Local", "pod to ClusterIP with iTP:Local")
}


@pytest.mark.parametrize(
    ("masquerade_all", "detector", "overrides"),
    [
        pytest.param(False, True, {}, id="base"),
        pytest.param(False, False, NO_DETECTOR, id="no LocalTrafficDetector"),
        pytest.param(True, True, MASQUERADE_ALL, id="masqueradeAll"),
        pytest.param(True, False, {**NO_SHORT_CIRCUIT, **MASQUERADE_ALL}, id="masqueradeAll, no LocalTrafficDetector"),
    ],
)
def test_internal_external_masquerade(masquerade_all, detector, overrides):
    """TestInternalExternalMasquerade."""
    config = replace(FAKE, masquerade_all=masquerade_all, cluster_cidr="10.0.0.0/8" if detector else None)
    flows = [replace(flow, **overrides.get(flow.name, {})) for flow in MASQUERADE_FLOWS]
    run_flows(render(masquerade_services(), config), flows)


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
