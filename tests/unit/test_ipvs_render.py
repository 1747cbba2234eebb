"""kube-proxy's ipvs renderer against kube-proxy's own ipvs unit tests.

Two generations of pkg/proxy/ipvs/proxier_test.go are ported, each compared the way it compares:
- current (rendered as 1.31): kubernetes/kubernetes @ 531be81208e2274ef42e72525a26610a9622bcdf.
  IPVS state with reflect.DeepEqual on the fake IPVS (every virtual server with scheduler, flags,
  timeout and real servers), checkIPVS (number of virtual servers, and the real servers of one),
  checkIPSet (same number of entries, same sorted entries) and checkIptables (per chain, nat then
  filter: the same number of rules, each with the expected -j target and --match-set set, in order).
- legacy (rendered as 1.20): the 1.18-era stored version whose rule-writing code is identical to
  S1.20's (see tests/golden/ipvs/legacy/*). Its checkIptables is hasJump: some rule of the chain
  has that target and a --match-set containing that set name.
Expectations live in tests/golden/ipvs/{current,legacy}/*.txt, inputs here. The inputs mirror
NewFakeProxier: node "test-node" (so NodeName "test-node" = local), no local-traffic detector
(no cluster CIDR), no --masquerade-all, no --random-fully, and the node addresses the test gives
(netlink's and the fake network interfaces' are one list here).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from support.builders import ep, svc

from lab.render.kubeproxy.ipvs import IPVS_VERSIONS, IpvsRules, check_ipvs_version, render_ipvs
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "ipvs"
CURRENT, LEGACY = "1.31", "1.20"
FAKE = ProxyConfig(random_fully=False)


def render(services, version: str = CURRENT, node_ips=(), config: ProxyConfig = FAKE) -> IpvsRules:
    return render_ipvs(services, config, node_ips, version)


# --- the golden files and kube-proxy's ways of comparing ---------------------------------------


def golden_sections(path: Path) -> list[tuple[str, list[str]]]:
    """[(section header, its lines)]; "#" lines (the source header) and blank lines skipped."""
    sections: list[tuple[str, list[str]]] = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.append((line[1:-1], []))
        else:
            sections[-1][1].append(line)
    return sections


def ipvs_state(lines: list[str]) -> dict[str, tuple[str, list[str]]]:
    """ipvsadm-save lines -> {"-t VIP:PORT": ("-s rr [-p N]", sorted real servers)}, the fake IPVS's content."""
    state: dict[str, tuple[str, list[str]]] = {}
    for line in lines:
        words = line.split()
        service = " ".join(words[1:3])
        if words[0] == "-A":
            assert service not in state, f"virtual server twice: {line}"
            state[service] = (" ".join(words[3:]), [])
        else:
            assert words[0] == "-a" and service in state, f"real server before its virtual server: {line}"
            state[service][1].append(" ".join(words[3:]))
    return {service: (options, sorted(rs)) for service, (options, rs) in state.items()}


def rendered_ipvs(rules: IpvsRules) -> dict[str, tuple[str, list[str]]]:
    return ipvs_state(rules.ipvsadm_restore().splitlines())


def chain_rules(rules: IpvsRules, chain: str) -> list[tuple[str, str]]:
    """getRules(): the rules of a chain from the nat, then the filter table, as (-j target, --match-set set)."""
    found = []
    for line in rules.kube_proxy_payload.splitlines():
        words = shlex.split(line)
        if words[:2] != ["-A", chain]:
            continue
        target = words[words.index("-j") + 1] if "-j" in words else ""
        match_set = words[words.index("--match-set") + 1] if "--match-set" in words else "-"
        found.append((target, match_set))
    return found


def check_golden(rules: IpvsRules, path: Path) -> None:
    """Apply every section of a golden file the way the ported kube-proxy test compares it."""
    problems = []
    for header, lines in golden_sections(path):
        kind, _, arg = header.partition(" ")
        if kind == "ipvs":  # reflect.DeepEqual(ipvs, test.expectedIPVS)
            if rendered_ipvs(rules) != ipvs_state(lines):
                problems.append(f"IPVS state differs:\nexpected {ipvs_state(lines)}\nrendered {rendered_ipvs(rules)}")
        elif kind == "check-ipvs":  # checkIPVS
            state, (service, (_, want_rs)) = rendered_ipvs(rules), next(iter(ipvs_state(lines).items()))
            if len(state) != int(arg):
                problems.append(f"expected {arg} virtual servers, rendered {len(state)}: {sorted(state)}")
            if service in state:
                got_rs = state[service][1]
                if len(got_rs) != len(want_rs) or (len(want_rs) == 1 and got_rs[0] != want_rs[0]):
                    problems.append(f"{service}: expected real servers {want_rs}, rendered {got_rs}")
        elif kind == "ipset":  # checkIPSet
            got = sorted(rules.ipset(arg).entries)
            if got != sorted(lines):
                problems.append(f"ipset {arg}: expected {sorted(lines)}, rendered {got}")
        elif kind == "chain":  # checkIptables: same number, same order
            want = [tuple(line.split()) for line in lines]
            got = chain_rules(rules, arg)
            if got != want:
                problems.append(f"chain {arg}: expected {want}, rendered {got}")
        elif kind == "chain-has":  # legacy checkIptables / hasJump
            got = chain_rules(rules, arg)
            for target, match_set in (line.split() for line in lines):
                if not any(t == target and (match_set == "-" or match_set in s) for t, s in got):
                    problems.append(f"chain {arg}: no jump to {target} matching set {match_set} in {got}")
        elif kind in ("nat-chains", "filter-chains"):  # assert.Equal on the chain declarations
            chains = rules.nat_chains if kind == "nat-chains" else rules.filter_chains
            got_lines = [f":{chain} - [0:0]" for chain in chains]
            if got_lines != lines:
                problems.append(f"{kind}: expected {lines}, rendered {got_lines}")
        else:
            raise ValueError(f"unknown golden section {header!r} in {path}")
    if problems:
        pytest.fail(f"{path.name} does not match:\n" + "\n".join(problems))


# --- current kube-proxy (531be812 test expectations, rendered as 1.31) ---------------------------


@dataclass(frozen=True)
class Case:
    golden: str
    services: tuple[ServicePort, ...]
    node_ips: tuple[str, ...] = ()
    node_port_addresses: tuple[str, ...] = ()


def local_and_remote() -> tuple[Endpoint, Endpoint]:
    return ep("10.180.0.1", local=True), ep("10.180.1.1")


NODE_PORT = dict(node_port=3001)
# The cases whose inputs kube-proxy's tests of both eras share (each era compares them with its own golden).
BOTH_ERAS = [
    Case(
        "load_balancer_source_ranges",
        (
            svc(
                "ns1", "svc1", "10.20.30.41", load_balancer_ips=("1.2.3.4",),
                load_balancer_source_ranges=("10.0.0.0/8",), endpoints=(ep("10.180.0.1"),),
            ),
        ),
    ),
    # TestAcceptIPVSTraffic: every port has nodePort 80; the EndpointSlices name no Service, so none has endpoints.
    Case(
        "accept_ipvs_traffic",
        (
            svc("ns1", "svc1", "10.20.30.40", node_port=80, external_ips=("5.6.7.8",)),
            svc("ns1", "svc2", "10.20.30.41", node_port=80, load_balancer_ips=("1.2.3.4",)),
            svc("ns1", "svc3", "10.20.30.42", node_port=80),
        ),
    ),
    Case(
        "only_local_load_balancing",
        (
            svc(
                "ns1", "svc1", "10.20.30.41", **NODE_PORT, load_balancer_ips=("1.2.3.4",), external_policy="Local",
                endpoints=local_and_remote(),
            ),
        ),
    ),
]  # fmt: skip
CURRENT_CASES = [
    # TestNodePortIPv4: the IPv6 slice and node IP are ignored by the IPv4 proxier.
    Case(
        "node_port_ipv4-two_endpoints",
        (svc("ns1", "svc1", "10.20.30.41", **NODE_PORT, endpoints=(ep("10.180.0.1"), ep("1002:ab8::2:10"))),),
        ("100.101.102.103", "2001:db8::1:1"),
    ),
    Case(
        "node_port_ipv4-udp",
        (svc("ns1", "svc1", "10.20.30.41", protocol="UDP", **NODE_PORT, endpoints=(ep("10.180.0.1"),)),),
        ("100.101.102.103",),
        ("0.0.0.0/0",),
    ),
    Case("node_port_ipv4-no_endpoints", (svc("ns1", "svc1", "10.20.30.41", **NODE_PORT),), ("100.101.102.103",)),
    Case(
        "node_port_ipv4-sctp_multiple_node_ips",
        (svc("ns1", "svc1", "10.20.30.41", protocol="SCTP", **NODE_PORT, endpoints=(ep("10.180.0.1"),)),),
        ("100.101.102.103", "100.101.102.104", "100.101.102.105", "2001:db8::1:1", "2001:db8::1:2", "2001:db8::1:3"),
    ),
    Case(
        "node_port_ipv4-sctp_local",
        (
            svc(
                "ns1", "svc1", "10.20.30.41", protocol="SCTP", **NODE_PORT, external_policy="Local",
                endpoints=local_and_remote(),
            ),
        ),
        ("100.101.102.103",),
    ),
    # TestIPv4Proxier: ns2/svc2 has an IPv6 ClusterIP and is not the IPv4 proxier's.
    Case(
        "ipv4_proxier-with_endpoints",
        (
            svc("ns1", "svc1", "10.20.30.41", endpoints=(ep("10.180.0.1"),)),
            svc("ns2", "svc2", "1002:ab8::2:1", 8080, "p8080", endpoints=(ep("1009:ab8::5:6", 8080),)),
        ),
    ),
    Case("ipv4_proxier-no_endpoints", (svc("ns1", "svc1", "10.20.30.41"),)),
    # TestLoadBalancer: its EndpointSlice port is UDP for a TCP Service port; kube-proxy keys
    # endpoints by port name *and* protocol, so this Service port has none.
    Case("load_balancer", (svc("ns1", "svc1", "10.20.30.41", **NODE_PORT, load_balancer_ips=("1.2.3.4",)),)),
    # TestOnlyLocalNodePorts: NodePort addresses 100.101.102.0/24; eth0 100.101.102.103/24, eth1 2001:db8::/64.
    Case(
        "only_local_node_ports",
        (svc("ns1", "svc1", "10.20.30.41", **NODE_PORT, external_policy="Local", endpoints=local_and_remote()),),
        ("100.101.102.103", "2001:db8::"),
        ("100.101.102.0/24",),
    ),
    # TestHealthCheckNodePort: invalid-svc3 is eTP=Cluster, so its healthCheckNodePort is ignored.
    Case(
        "health_check_node_port",
        tuple(
            svc("ns1", name, "10.20.30.41", node_port=3000, external_policy=policy, health_check_node_port=hc)
            for name, policy, hc in (("valid-svc1", "Local", 30000), ("valid-svc2", "Local", 30001),
                                     ("invalid-svc3", "Cluster", 30002))
        ),
        ("100.101.102.103", "2001:db8::"),
        ("100.101.102.0/24",),
    ),
    *BOTH_ERAS,
    Case("create_and_link_kube_chain", ()),
]  # fmt: skip


@pytest.mark.parametrize("case", CURRENT_CASES, ids=lambda c: c.golden)
def test_current_kube_proxy_expectations(case: Case):
    config = replace(FAKE, node_port_addresses=case.node_port_addresses)
    rules = render(case.services, CURRENT, case.node_ips, config)
    check_golden(rules, GOLDEN / "current" / f"{case.golden}.txt")


@pytest.mark.parametrize("version", ["1.30", "1.35", "1.36", "1.37", "1.38"])
def test_current_expectations_hold_for_1_30_to_1_38(version):
    """1.30's proxier (S1.30) and the 1.31+ one write the same rules; the same expectations hold. For 1.36 to
    1.38 that is INFERRED: their changelogs name no ipvs rule change (docs/kubeproxy-versions.md)."""
    for case in CURRENT_CASES:
        config = replace(FAKE, node_port_addresses=case.node_port_addresses)
        check_golden(render(case.services, version, case.node_ips, config), GOLDEN / "current" / f"{case.golden}.txt")


# TestNodePortIPv6 and TestIPv6Proxier: the same fake (NewFakeProxier) built for v1.IPv6Protocol; each proxier takes
# its own family's ClusterIP, endpoints and node addresses and leaves the other family's alone.
IPV6 = replace(FAKE, family="IPv6")
IPV6_CASES = [
    Case(
        "node_port_ipv6-two_endpoints",
        (svc("ns1", "svc1", "2020::1", **NODE_PORT, endpoints=(ep("10.180.0.1"), ep("1002:ab8::2:10"))),),
        ("100.101.102.103", "2001:db8::1:1"),
    ),
    # The Service's ClusterIP is IPv4 (its slice says IPv6 but holds an IPv4 address): nothing for this proxier.
    Case(
        "node_port_ipv6-udp_ipv4_service",
        (svc("ns1", "svc1", "10.20.30.41", protocol="UDP", **NODE_PORT, endpoints=(ep("10.180.0.1"),)),),
        ("100.101.102.103",),
        ("0.0.0.0/0",),
    ),
    Case(
        "node_port_ipv6-no_endpoints",
        (svc("ns1", "svc1", "2020::1", **NODE_PORT),),
        ("100.101.102.103", "2001:db8::1:1"),
    ),
    Case(
        "node_port_ipv6-sctp_multiple_node_ips",
        (svc("ns1", "svc1", "2020::1", protocol="SCTP", **NODE_PORT, endpoints=(ep("2001::1"),)),),
        ("2001:db8::1:1", "2001:db8::1:2"),
    ),
    Case(
        "ipv6_proxier-with_endpoints",
        (
            svc("ns1", "svc1", "10.20.30.41", endpoints=(ep("10.180.0.1"),)),
            svc("ns2", "svc2", "1002:ab8::2:1", 8080, "p8080", endpoints=(ep("1009:ab8::5:6", 8080),)),
        ),
    ),
    Case("ipv6_proxier-no_endpoints", (svc("ns1", "svc1", "2001::1"),)),
]  # fmt: skip


@pytest.mark.parametrize("version", ["1.30", "1.31", "1.37"])
@pytest.mark.parametrize("case", IPV6_CASES, ids=lambda c: c.golden)
def test_ipv6_kube_proxy_expectations(case: Case, version: str):
    config = replace(IPV6, node_port_addresses=case.node_port_addresses)
    check_golden(render(case.services, version, case.node_ips, config), GOLDEN / "ipv6" / f"{case.golden}.txt")


def external_ip_servers(rules: IpvsRules, external_ips: set[str]) -> dict[str, list[str]]:
    return {s: rs for s, (_, rs) in rendered_ipvs(rules).items() if s.split()[1].rsplit(":", 1)[0] in external_ips}


def test_external_ips():
    """TestExternalIPs: 3 virtual servers (the IPv6 externalIP is filtered); every real server of an
    externalIP one is the endpoint. Its slice port is UDP for a TCP Service port, so there is none."""
    external = {"50.60.70.81", "2012::51", "127.0.0.1"}
    rules = render([svc("ns1", "svc1", "10.20.30.41", external_ips=tuple(sorted(external)))])
    assert len(rendered_ipvs(rules)) == 3
    servers = external_ip_servers(rules, external)
    assert servers, "Expect external ip type service, got none"
    assert all(rs.startswith("-r 10.180.0.1:80 ") for dests in servers.values() for rs in dests)


def test_only_local_external_ips():
    """TestOnlyLocalExternalIPs: 3 virtual servers; an externalIP one has exactly the local endpoint."""
    external = {"50.60.70.81", "2012::51", "127.0.0.1"}
    port = svc(
        "ns1", "svc1", "10.20.30.41", external_ips=tuple(sorted(external)), external_policy="Local",
        endpoints=local_and_remote(),
    )  # fmt: skip
    rules = render([port])
    assert len(rendered_ipvs(rules)) == 3
    servers = external_ip_servers(rules, external)
    assert servers and all(dests == ["-r 10.180.0.1:80 -m -w 1"] for dests in servers.values())


def test_session_affinity():
    """TestSessionAffinity: every virtual server is persistent with the 10800 s default timeout."""
    port = svc("ns1", "svc1", "10.20.30.41", node_port=3001, external_ips=("50.60.70.81",), affinity_timeout=10800)
    rules = render([port], node_ips=("100.101.102.103",))
    assert len(rules.virtual_servers) == 3
    assert all(vs.timeout == 10800 for vs in rules.virtual_servers)
    assert all("-p 10800" in line for line in rules.ipvsadm_restore().splitlines() if line.startswith("-A"))


def test_multi_port_service_bind_addr():
    """TestMultiPortServiceBindAddr: one bound address per ClusterIP, however many ports."""
    two = [svc("ns1", "svc1", "172.16.55.4", port, name) for port, name in ((1234, "port1"), (1235, "port2"))]
    three = [*two, svc("ns1", "svc1", "172.16.55.4", 1236, "port3", "UDP")]
    for ports in (two, two[:1], three):
        assert render(ports).dummy_addresses == ("172.16.55.4/32",)
    assert render([]).dummy_addresses == ()


@pytest.mark.parametrize(("config", "source"), [(FAKE, "127.0.0.0/8"), (IPV6, "::1/128")], ids=["ipv4", "ipv6"])
def test_dismiss_localhost_rule_exist(config, source):
    """TestDismissLocalhostRuleExist, its "ipv4 rule" and "ipv6 rule" (the IPv6 one on iptablestest.NewIPv6Fake):
    KUBE-SERVICES starts with a RETURN of the family's loopback source."""
    first = next(r for r in render([], config=config).nat_rules if r.startswith("-A KUBE-SERVICES "))
    assert first == f"-A KUBE-SERVICES -s {source} -j RETURN"


def real_servers(rules: IpvsRules, address: str) -> list[str]:
    """The real servers of the virtual server at this address, as RealServer.String() ("IP:port")."""
    (rs,) = [rs for s, (_, rs) in rendered_ipvs(rules).items() if s.split()[1].rsplit(":", 1)[0] == address]
    return [line.split()[1] for line in rs]


def test_endpoint_slice_e2e():
    """TestEndpointSliceE2E: one local endpoint in KUBE-LOOP-BACK; not-ready ones are no real server."""
    eps = (ep("10.0.1.1", local=True), ep("10.0.1.2"), ep("10.0.1.3"), ep("10.0.1.4", ready=False))
    rules = render([svc("ns1", "svc1", "172.20.1.1", port=0, port_name="", endpoints=eps)])
    assert rules.ipset("KUBE-LOOP-BACK").entries == ("10.0.1.1,tcp:80,10.0.1.1",)
    assert len(rules.virtual_servers) == 1
    assert real_servers(rules, "172.20.1.1") == ["10.0.1.1:80", "10.0.1.2:80", "10.0.1.3:80"]


@pytest.mark.parametrize(
    ("policy", "local_ip", "loop_back", "servers"),
    [
        ("Cluster", "10.0.1.1", 1, ["10.0.1.1:80", "10.0.1.2:80", "10.0.1.3:80"]),
        ("Cluster", None, 0, None),
        ("Local", "10.0.1.1", 1, ["10.0.1.1:80"]),
        ("Local", None, 0, None),
    ],
)
def test_internal_traffic_policy_e2e(policy, local_ip, loop_back, servers):
    """TestTestInternalTrafficPolicyE2E (the cases without a local endpoint check no real servers)."""
    eps = tuple(ep(ip, local=ip == local_ip) for ip in ("10.0.1.1", "10.0.1.2", "10.0.1.3"))
    rules = render([svc("ns1", "svc1", "172.20.1.1", port=0, port_name="", internal_policy=policy, endpoints=eps)])
    assert len(rules.ipset("KUBE-LOOP-BACK").entries) == loop_back
    if servers is not None:
        assert len(rules.virtual_servers) == 1
        assert real_servers(rules, "172.20.1.1") == servers


TERMINATING = dict(ready=False, serving=True, terminating=True)
NOT_SERVING = dict(ready=False, serving=False, terminating=True)
READY_AND_TERMINATING = (
    ep("10.0.1.1", local=True),
    ep("10.0.1.2", local=True),
    ep("10.0.1.3", local=True, **TERMINATING),
    ep("10.0.1.4", local=True, **NOT_SERVING),
    ep("10.0.1.5"),
)
ONLY_TERMINATING_CLUSTER = (
    ep("10.0.1.1", local=True, **TERMINATING),
    ep("10.0.1.2", local=True, **TERMINATING),
    ep("10.0.1.3", local=True, **NOT_SERVING),
    ep("10.0.1.4", **TERMINATING),
    ep("10.0.1.5", ready=False, serving=False),
)
ONLY_TERMINATING_LOCAL = (*ONLY_TERMINATING_CLUSTER[:4], ep("10.0.1.5"))


@pytest.mark.parametrize(
    ("test", "policy", "endpoints", "loop_back", "cluster_ip", "external_ip"),
    [
        ("ReadyAndTerminatingCluster", "Cluster", READY_AND_TERMINATING, 4,
         ["10.0.1.1:80", "10.0.1.2:80", "10.0.1.5:80"], ["10.0.1.1:80", "10.0.1.2:80", "10.0.1.5:80"]),
        ("ReadyAndTerminatingLocal", "Local", READY_AND_TERMINATING, 4,
         ["10.0.1.1:80", "10.0.1.2:80", "10.0.1.5:80"], ["10.0.1.1:80", "10.0.1.2:80"]),
        ("OnlyReadyAndTerminatingCluster", "Cluster", ONLY_TERMINATING_CLUSTER, 3,
         ["10.0.1.1:80", "10.0.1.2:80", "10.0.1.4:80"], ["10.0.1.1:80", "10.0.1.2:80", "10.0.1.4:80"]),
        ("OnlyReadyAndTerminatingLocal", "Local", ONLY_TERMINATING_LOCAL, 3,
         ["10.0.1.5:80"], ["10.0.1.1:80", "10.0.1.2:80"]),
    ],
)  # fmt: skip
def test_endpoint_slice_terminating(test, policy, endpoints, loop_back, cluster_ip, external_ip):
    """Test_EndpointSlice{ReadyAndTerminating,OnlyReadyAndTerminating}{Cluster,Local}."""
    port = svc(
        "ns1", "svc1", "172.20.1.1", port_name="", external_ips=("1.2.3.4",), external_policy=policy,
        endpoints=endpoints,
    )  # fmt: skip
    rules = render([port])
    assert len(rules.ipset("KUBE-LOOP-BACK").entries) == loop_back
    assert len(rules.virtual_servers) == 2
    assert real_servers(rules, "172.20.1.1") == cluster_ip
    assert real_servers(rules, "1.2.3.4") == external_ip


# --- the 1.20 layout (1.18-era test expectations, IPv4 view) --------------------------------------

LEGACY_CASES = [
    Case(
        "node_port-two_endpoints",
        (svc("ns1", "svc1", "10.20.30.41", **NODE_PORT, endpoints=(ep("10.180.0.1"), ep("1002:ab8::2:10"))),),
        ("100.101.102.103", "2001:db8::1:1"),
    ),
    Case(
        "node_port-udp",
        (svc("ns1", "svc1", "10.20.30.41", protocol="UDP", **NODE_PORT, endpoints=(ep("10.180.0.1"),)),),
        ("100.101.102.103",),
        ("0.0.0.0/0",),
    ),
    Case("node_port-no_endpoints", (svc("ns1", "svc1", "10.20.30.41", **NODE_PORT),), ("100.101.102.103",)),
    Case(
        "node_port-sctp_multiple_node_ips",
        (svc("ns1", "svc1", "10.20.30.41", protocol="SCTP", **NODE_PORT, endpoints=(ep("10.180.0.1"),)),),
        ("100.101.102.103", "100.101.102.104", "100.101.102.105", "2001:db8::1:1", "2001:db8::1:2", "2001:db8::1:3"),
    ),
    Case(
        "cluster_ip-with_endpoints",
        (
            svc("ns1", "svc1", "10.20.30.41", endpoints=(ep("10.180.0.1"),)),
            svc("ns2", "svc2", "1002:ab8::2:1", 8080, "p8080", endpoints=(ep("1009:ab8::5:6", 8080),)),
        ),
    ),
    Case("cluster_ip-no_endpoints", (svc("ns1", "svc1", "10.20.30.41"),)),
    # In the 1.18 test the Endpoints port has no protocol (TCP): the LB port has its endpoint.
    Case(
        "load_balancer",
        (
            svc(
                "ns1", "svc1", "10.20.30.41", **NODE_PORT, load_balancer_ips=("1.2.3.4",),
                endpoints=(ep("10.180.0.1"),),
            ),
        ),
    ),
    Case(
        "only_local_node_ports",
        (svc("ns1", "svc1", "10.20.30.41", **NODE_PORT, external_policy="Local", endpoints=local_and_remote()),),
        ("100.101.102.103", "2001:db8::"),
        ("100.101.102.0/24", "2001:db8::0/64"),
    ),
    *BOTH_ERAS,
]  # fmt: skip


@pytest.mark.parametrize("case", LEGACY_CASES, ids=lambda c: c.golden)
@pytest.mark.parametrize("version", ["1.19", "1.20"])
def test_legacy_kube_proxy_expectations(case: Case, version):
    config = replace(FAKE, node_port_addresses=case.node_port_addresses)
    rules = render(case.services, version, case.node_ips, config)
    check_golden(rules, GOLDEN / "legacy" / f"{case.golden}.txt")


def test_legacy_external_ips():
    """1.18-era TestExternalIPs: 4 virtual servers there, 3 for the IPv4 proxier; the endpoint serves them."""
    external = {"50.60.70.81", "2012::51", "127.0.0.1"}
    port = svc("ns1", "svc1", "10.20.30.41", external_ips=tuple(sorted(external)), endpoints=(ep("10.180.0.1"),))
    rules = render([port], LEGACY)
    assert len(rendered_ipvs(rules)) == 3
    servers = external_ip_servers(rules, external)
    assert servers and all(dests == ["-r 10.180.0.1:80 -m -w 1"] for dests in servers.values())


def test_legacy_only_local_external_ips():
    """1.18-era TestOnlyLocalExternalIPs: an externalIP virtual server has only the local endpoint."""
    external = {"50.60.70.81", "2012::51", "127.0.0.1"}
    port = svc(
        "ns1", "svc1", "10.20.30.41", external_ips=tuple(sorted(external)), external_policy="Local",
        endpoints=local_and_remote(),
    )  # fmt: skip
    rules = render([port], LEGACY)
    assert len(rendered_ipvs(rules)) == 3
    servers = external_ip_servers(rules, external)
    assert servers and all(dests == ["-r 10.180.0.1:80 -m -w 1"] for dests in servers.values())


def test_legacy_session_affinity():
    port = svc("ns1", "svc1", "10.20.30.41", node_port=3001, external_ips=("50.60.70.81",), affinity_timeout=10800)
    rules = render([port], LEGACY, ("100.101.102.103",))
    assert len(rules.virtual_servers) == 3 and all(vs.timeout == 10800 for vs in rules.virtual_servers)


# --- the comparison is real ---------------------------------------------------------------------


def test_corrupted_golden_fails(tmp_path):
    """A golden file with one real server changed no longer matches, and says where."""
    case = CURRENT_CASES[0]
    good = GOLDEN / "current" / f"{case.golden}.txt"
    rules = render(case.services, CURRENT, case.node_ips)
    check_golden(rules, good)
    bad = tmp_path / good.name
    bad.write_text(good.read_text().replace("-r 10.180.0.1:80", "-r 10.180.0.9:80", 1))
    with pytest.raises(pytest.fail.Exception, match="IPVS state differs"):
        check_golden(rules, bad)


def test_corrupted_chain_order_fails(tmp_path):
    """checkIptables is order-sensitive: swapping two expected rules fails."""
    case = next(c for c in CURRENT_CASES if c.golden == "node_port_ipv4-udp")
    good = GOLDEN / "current" / "node_port_ipv4-udp.txt"
    rules = render(case.services, CURRENT, case.node_ips, replace(FAKE, node_port_addresses=case.node_port_addresses))
    bad = tmp_path / good.name
    text = good.read_text()
    bad.write_text(text.replace("KUBE-NODE-PORT -\nACCEPT KUBE-CLUSTER-IP", "ACCEPT KUBE-CLUSTER-IP\nKUBE-NODE-PORT -"))
    assert bad.read_text() != text
    with pytest.raises(pytest.fail.Exception, match="chain KUBE-SERVICES"):
        check_golden(rules, bad)


# --- version differences read from the S-commits (openshift/sdn vendored proxier.go) ----------------


def test_versions_and_unknown_version():
    assert IPVS_VERSIONS[0] == "1.19" and IPVS_VERSIONS[-1] == "1.38"
    assert check_ipvs_version("1.31") is None
    assert "not reproduced" in check_ipvs_version("1.18")
    with pytest.raises(ValueError, match="not reproduced"):
        render([], "1.39")


def test_sysctls():
    """NewProxier: route_localnet only up to 1.20 (gone in S1.21); conn_reuse_mode left alone on
    kernels >= 5.9 from 1.22; strict ARP adds arp_ignore/arp_announce."""
    base = {
        "net/ipv4/vs/conntrack": 1,
        "net/ipv4/vs/expire_nodest_conn": 1,
        "net/ipv4/vs/expire_quiescent_template": 1,
        "net/ipv4/ip_forward": 1,
    }
    old = render_ipvs([], FAKE, (), "1.20", kernel=(5, 10)).sysctls
    assert old == {"net/ipv4/conf/all/route_localnet": 1, **base, "net/ipv4/vs/conn_reuse_mode": 0}
    assert "net/ipv4/conf/all/route_localnet" not in render_ipvs([], FAKE, (), "1.21").sysctls
    assert render_ipvs([], FAKE, (), "1.31", kernel=(5, 10)).sysctls == base
    assert render_ipvs([], FAKE, (), "1.31", kernel=(5, 4)).sysctls["net/ipv4/vs/conn_reuse_mode"] == 0
    strict = render_ipvs([], replace(FAKE, ipvs_strict_arp=True), (), "1.31").sysctls
    assert strict["net/ipv4/conf/all/arp_ignore"] == 1 and strict["net/ipv4/conf/all/arp_announce"] == 2


NODE = ("192.168.0.2", "127.0.0.1", "192.168.99.3")


def node_port_service(**kw) -> ServicePort:
    return svc("ns1", "np", "172.30.0.42", node_port=30002, endpoints=(ep("10.180.1.1"),), **kw)


def test_loopback_node_port_until_1_21():
    """<= 1.21 NodePort virtual servers include 127.0.0.1 (issue 96879); S1.22 skips loopback (#101023)."""
    assert "127.0.0.1" in render([node_port_service()], "1.21", NODE).node_port_addresses
    assert render([node_port_service()], "1.22", NODE).node_port_addresses == ("192.168.0.2", "192.168.99.3")


def test_external_ip_on_node_interface_is_bound_until_1_27():
    """S1.28: shouldBind := !nodeAddressSet.Has(ip)."""
    port = svc("ns1", "e", "172.30.0.41", external_ips=("192.168.99.3", "192.168.99.9"))
    assert render([port], "1.27", NODE).dummy_addresses == ("172.30.0.41/32", "192.168.99.3/32", "192.168.99.9/32")
    assert render([port], "1.28", NODE).dummy_addresses == ("172.30.0.41/32", "192.168.99.9/32")
    # 1.23-1.27 take NodePort addresses minus what kube-ipvs0 holds, so the bound node IP has none.
    both = [port, node_port_service()]
    assert render(both, "1.22", NODE).node_port_addresses == ("192.168.0.2", "192.168.99.3")
    assert render(both, "1.27", NODE).node_port_addresses == ("192.168.0.2",)
    assert render(both, "1.28", NODE).node_port_addresses == ("192.168.0.2", "192.168.99.3")


def test_local_policy_without_local_endpoints():
    """eTP=Local, no local endpoint: no real servers up to 1.23, all of them from 1.24 (#97081)."""
    port = node_port_service(external_policy="Local", load_balancer_ips=("1.2.3.4",))
    assert real_servers(render([port], "1.23", NODE), "1.2.3.4") == []
    assert real_servers(render([port], "1.23", NODE), "172.30.0.42") == ["10.180.1.1:80"]
    assert real_servers(render([port], "1.24", NODE), "1.2.3.4") == ["10.180.1.1:80"]


def test_internal_policy_local_versions():
    """iTP=Local: ignored in 1.21 (gate off), narrows every virtual server in 1.22-1.23 (FilterEndpoints),
    only the ClusterIP one from 1.24 (CategorizeEndpoints)."""
    port = node_port_service(internal_policy="Local")
    assert real_servers(render([port], "1.21", NODE), "172.30.0.42") == ["10.180.1.1:80"]
    assert real_servers(render([port], "1.22", NODE), "192.168.0.2") == []
    assert real_servers(render([port], "1.24", NODE), "172.30.0.42") == ["10.180.1.1:80"]  # cluster fallback
    assert real_servers(render([port], "1.24", NODE), "192.168.0.2") == ["10.180.1.1:80"]


def test_source_ranges_chains_by_version():
    """<= 1.24 nat KUBE-FIREWALL -> kubelet's KUBE-MARK-DROP; >= 1.25 filter KUBE-SOURCE-RANGES-FIREWALL -> DROP;
    >= 1.29 KUBE-IPVS-OUT-FILTER when the node IP is outside the ranges."""
    port = svc("ns1", "lb", "172.30.0.42", load_balancer_ips=("1.2.3.4",), load_balancer_source_ranges=("10.0.0.0/8",))
    old = render([port], "1.24", NODE)
    assert chain_rules(old, "KUBE-FIREWALL") == [("RETURN", "KUBE-LOAD-BALANCER-SOURCE-CIDR"), ("KUBE-MARK-DROP", "-")]
    assert old.kubelet is not None and ":KUBE-MARK-DROP - [0:0]" in old.iptables_restore()
    new = render([port], "1.25", NODE)
    assert new.kubelet is None and "KUBE-MARK-DROP" not in new.iptables_restore()
    assert chain_rules(new, "KUBE-SOURCE-RANGES-FIREWALL")[-1] == ("DROP", "-")
    assert chain_rules(render([port], "1.28", NODE), "KUBE-IPVS-OUT-FILTER") == []
    assert chain_rules(render([port], "1.29", NODE), "KUBE-IPVS-OUT-FILTER") == [("DROP", "-")]
    inside = replace(port, load_balancer_source_ranges=("192.168.0.0/24",))
    rules = render([inside], "1.29", NODE)
    assert chain_rules(rules, "KUBE-IPVS-OUT-FILTER") == []
    assert rules.ipset("KUBE-LOAD-BALANCER-SOURCE-IP").entries == ("1.2.3.4,tcp:80,1.2.3.4",)


def test_forward_rules_and_sctp_order():
    """S1.23: one conntrack FORWARD rule instead of two, SCTP "-LOCAL" RETURN before the masquerade."""
    port = svc("ns1", "s", "172.30.0.43", protocol="SCTP", node_port=30003, external_policy="Local")
    for version, forward, sctp in (("1.22", 3, "KUBE-MARK-MASQ"), ("1.23", 2, "RETURN")):
        rules = render([port], version, NODE)
        assert len(chain_rules(rules, "KUBE-FORWARD")) == forward
        assert chain_rules(rules, "KUBE-NODE-PORT")[0][0] == sctp


@pytest.mark.parametrize(
    ("version", "returns"),
    [
        ("1.25", None),
        ("1.26", ["KUBE-LOAD-BALANCER", "KUBE-CLUSTER-IP", "KUBE-EXTERNAL-IP"]),
        ("1.28", ["KUBE-LOAD-BALANCER", "KUBE-CLUSTER-IP", "KUBE-EXTERNAL-IP", "KUBE-HEALTH-CHECK-NODE-PORT"]),
        ("1.30", ["KUBE-LOAD-BALANCER", "KUBE-CLUSTER-IP", "KUBE-EXTERNAL-IP", "KUBE-EXTERNAL-IP-LOCAL",
                  "KUBE-HEALTH-CHECK-NODE-PORT"]),
    ],
)  # fmt: skip
def test_ipvs_filter_by_version(version, returns):
    rules = render([svc("ns1", "c", "172.30.0.41")], version)
    got = chain_rules(rules, "KUBE-IPVS-FILTER")
    if returns is None:
        assert got == [] and "KUBE-IPVS-FILTER" not in rules.filter_chains
        assert [s.name for s in rules.ipsets][-1] == "KUBE-HEALTH-CHECK-NODE-PORT"
        return
    assert got == [("RETURN", name) for name in returns] + [("REJECT", "KUBE-IPVS-IPS")]
    assert rules.ipset("KUBE-IPVS-IPS").entries == ("172.30.0.41",)


def test_health_check_set_from_1_21():
    port = node_port_service(external_policy="Local", health_check_node_port=32000)
    assert "KUBE-HEALTH-CHECK-NODE-PORT" not in {s.name for s in render([port], "1.20", NODE).ipsets}
    assert render([port], "1.21", NODE).ipset("KUBE-HEALTH-CHECK-NODE-PORT").entries == ("32000",)


def test_builtin_chains_and_kubelet_rules():
    """kube-proxy prepends its jumps (so they end up reversed); kubelet's -j KUBE-FIREWALL stays below."""
    rules = render([], "1.20")
    assert rules.builtin_rules("filter", "INPUT") == ["-A INPUT -j KUBE-FIREWALL"]
    assert rules.builtin_rules("nat", "PREROUTING") == [
        '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES'
    ]
    current = render([], "1.31")
    assert [r.split(" -j ")[1] for r in current.builtin_rules("filter", "INPUT")] == [
        "KUBE-IPVS-FILTER",
        "KUBE-PROXY-FIREWALL",
        "KUBE-NODE-PORT",
    ]


def test_masquerade_rules():
    """TestMasqueradeRule: -j MASQUERADE in KUBE-POSTROUTING, --random-fully when iptables has it."""
    for random_fully in (False, True):
        rules = render([], config=replace(FAKE, random_fully=random_fully))
        masq = [r for r in rules.nat_rules if r.startswith("-A KUBE-POSTROUTING") and "-j MASQUERADE" in r]
        assert len(masq) == 1 and masq[0].endswith("--random-fully") == random_fully
    assert "-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000" in render([], config=ProxyConfig()).nat_rules


def test_ipset_restore_creates_every_set():
    rules = render([node_port_service()], "1.31", NODE)
    text = rules.ipset_restore()
    creates = [line.split()[1] for line in text.splitlines() if line.startswith("create ")]
    assert creates == [s.name for s in rules.ipsets] and len(creates) == 17
    assert "create KUBE-NODE-PORT-TCP bitmap:port range 0-65535" in text
    assert "create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536" in text
    assert "add KUBE-CLUSTER-IP 172.30.0.42,tcp:80" in text
