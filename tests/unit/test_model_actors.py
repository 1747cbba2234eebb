"""The actors around the cluster (routers, load balancers, egress gateway, ip-masq-agent), cni routed-tunnel,
expectations relative to the entry node: how they resolve, and the errors a user sees for bad files."""

from __future__ import annotations

import socket
import struct
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from support.host import REPO
from support.scenario import ScriptedSession

from lab.describe.errors import ScenarioError
from lab.describe.load import load_scenario
from lab.install.actors import Decision, fabric_rules, masq_agent_rules
from lab.install.health import CheckResult, HealthListener, response
from lab.judge.attempts import resolve, run_probe
from lab.probe.capture import Frame
from lab.probe.observation import Observation
from lab.probe.why import stray_answer
from lab.render.kubeproxy.adapter import service_ports
from lab.render.kubeproxy.healthcheck import local_endpoints, service_body
from lab.render.kubeproxy.versions import Release

BASE = """\
name: t
cluster: {kubeVersion: "1.20", clusterCIDR: 10.244.0.0/16, serviceCIDR: 10.96.0.0/16, underlay: 192.168.56.0/24}
nodes:
  - {name: node1, ip: 192.168.56.11, podCIDR: 10.244.1.0/24, labels: {ingress: "true"}}
  - {name: node2, ip: 192.168.56.12, podCIDR: 10.244.2.0/24}
externalHosts:
  - name: router
    ip: 192.168.56.254
    network: 10.10.6.0/24
    routes: [{to: 172.19.100.2/32, via: [node1, node2]}]
  - {name: client, ip: 10.10.6.91, behind: router}
loadBalancers:
  - name: clb
    services: [web]
    address: 192.168.56.2
    nodes: [node1, node2]
    avoidSourceBackend: true
egressGateway:
  destinations: [203.0.113.0/24]
  nodeAddresses: {node1: 198.51.100.11}
ipMasqAgent:
  nonMasqueradeCIDRs: [10.244.0.0/16, 192.168.0.0/16]
  nodes: [node1]
workload:
  - kind: Pod
    metadata: {name: web, labels: {app: web}}
    spec: {nodeName: node1, containers: [{ports: [{name: http, containerPort: 8080}]}]}
  - kind: Service
    metadata: {name: web}
    spec:
      type: LoadBalancer
      externalTrafficPolicy: Local
      selector: {app: web}
      ports: [{name: http, port: 80, targetPort: http}]
    status: {loadBalancer: {ingress: [{ip: 172.19.100.2}]}}
probes:
  - name: p
    from: client
    to: {service: web, port: http, via: loadBalancer}
    attempts: 4
    expect: {outcome: delivered, node: entry, source: client, entries: [node1]}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def load(tmp_path: Path, text: str = BASE):
    return load_scenario(write(tmp_path, text)).variants[0]


def error_for(tmp_path: Path, text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, text))
    return info.value


def test_resolves_routers_load_balancers_egress_and_masq_agent(tmp_path):
    topo = load(tmp_path)
    router, client = topo.externals
    assert (router.network, router.lan_ip, router.is_router) == ("10.10.6.0/24", "10.10.6.1", True)
    assert router.routes[0].via == ("192.168.56.11", "192.168.56.12")
    assert (client.behind, client.is_router) == ("router", False)
    (lb,) = topo.load_balancers
    assert (lb.name, lb.address, lb.source, lb.forward, lb.pool) == (
        "clb",
        "192.168.56.2",
        "preserve",
        "nodePort",
        ("node1", "node2"),
    )
    (front,) = lb.frontends
    svc = topo.services[0]
    assert (front.vip, front.port, front.node_port) == ("172.19.100.2", 80, svc.ports[0].node_port)
    assert front.health_check_node_port == svc.health_check_node_port != 0
    assert topo.lb_routes == ()  # the VIP is the load balancer's now, not a static gateway route
    assert topo.egress is not None and topo.egress.address_of("node1") == "198.51.100.11"
    assert topo.egress.address_of("node2") == ""
    assert topo.masq_agent is not None and topo.masq_agent.nodes == ("node1",)
    names = topo.address_names()
    assert names["192.168.56.2"] == "clb" and names["198.51.100.11"] == "node1/public"
    assert names["10.10.6.1"] == "router/lan"
    probe = topo.probes[0]
    assert probe.attempts == 4 and probe.expected.relative and probe.expected.entries == ("node1",)


def test_routed_tunnel_addresses(tmp_path):
    text = BASE.replace('kubeVersion: "1.20",', 'kubeVersion: "1.20", cni: routed-tunnel,')
    topo = load(tmp_path, text)
    node1 = topo.node("node1")
    assert (node1.bridge_ip, node1.tunnel_ip) == ("", "10.244.1.0")
    assert node1.addresses == ("192.168.56.11", "10.244.1.0")
    assert topo.pods[0].ip == "10.244.1.1"  # no bridge address to skip
    assert topo.address_names()["10.244.1.0"] == "node1/tunl0"


def test_ip_mode_proxy_is_honoured_from_1_30_only(tmp_path):
    proxy = BASE.replace("ingress: [{ip: 172.19.100.2}]", "ingress: [{ip: 172.19.100.2, ipMode: Proxy}]")
    old = load(tmp_path, proxy)
    assert (old.services[0].ingress_ips, old.services[0].proxy_ingress_ips) == (("172.19.100.2",), ("172.19.100.2",))
    assert {port.load_balancer_ips for port in service_ports(old, "node1")} == {("172.19.100.2",)}
    new = load(tmp_path, proxy.replace('kubeVersion: "1.20"', 'kubeVersion: "1.31"'))
    assert new.services[0].ingress_ips == ("172.19.100.2",)
    assert {port.load_balancer_ips for port in service_ports(new, "node1")} == {()}


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "message"),
    [
        (
            "via: [node1, node2]",
            "via: [node1, node9]",
            10,
            "externalHosts[0].routes[0].via[1]",
            "unknown next hop 'node9'",
        ),
        (
            "via: [node1, node2]",
            "via: [node1, 10.9.9.9]",
            10,
            "externalHosts[0].routes[0].via[1]",
            "not on the underlay",
        ),
        ("via: [node1, node2]", "via: [node1, node1]", 10, "externalHosts[0].routes[0].via", "listed twice"),
        ("behind: router}", "behind: nobody}", 11, "externalHosts[1].behind", "'nobody' is not a router"),
        ("ip: 10.10.6.91,", "ip: 10.10.7.91,", 11, "externalHosts[1].ip", "outside router's network 10.10.6.0/24"),
        ("ip: 10.10.6.91,", "ip: 10.10.6.1,", 11, "externalHosts[1].ip", "reserved"),
        ("network: 10.10.6.0/24", "network: 10.244.6.0/24", 9, "externalHosts[0].network", "overlaps clusterCIDR"),
        (
            "nodes: [node1, node2]\n    avoid",
            "nodes: [node1, node7]\n    avoid",
            16,
            "loadBalancers[0].nodes[1]",
            "unknown node 'node7'",
        ),
        ("services: [web]", "services: [nope]", 14, "loadBalancers[0].services[0]", "no Service default/nope"),
        ("address: 192.168.56.2", "address: 192.168.56.11", 15, "loadBalancers[0].address", "node1's address"),
        (
            "avoidSourceBackend: true",
            "avoidSourceBackend: true\n    forward: vip",
            17,
            "loadBalancers[0].avoidSourceBackend",
            "needs `forward: nodePort`",
        ),
        (
            "ingress: [{ip: 172.19.100.2}]",
            "ingress: [{ip: 192.168.56.77}]",
            14,
            "loadBalancers[0].services",
            "inside the underlay",
        ),
        ("nodeAddresses: {node1:", "nodeAddresses: {node8:", 20, "egressGateway.nodeAddresses.node8", "unknown node"),
        (
            "destinations: [203.0.113.0/24]",
            "destinations: [10.244.0.0/24]",
            19,
            "egressGateway.destinations[0]",
            "overlaps",
        ),
        (
            "  nodes: [node1]\nworkload",
            "  nodes: [node3]\nworkload",
            23,
            "ipMasqAgent.nodes[0]",
            "unknown node 'node3'",
        ),
        ("entries: [node1]", "entries: [node5]", 41, "probes[0].expect.entries[0]", "unknown node 'node5'"),
        ("source: client,", "source: entry/tunl0,", 41, "probes[0].expect.source", "expected one of entry"),
        ("attempts: 4", "attempts: 0", 40, "probes[0].attempts", "a number of at least 1"),
    ],
)
def test_errors_name_file_line_field_and_expectation(tmp_path, old, new, line, field, message):
    assert old in BASE
    error = error_for(tmp_path, BASE.replace(old, new, 1))
    assert (error.line, error.field) == (line, field), str(error)
    assert message in error.message, error.message
    assert str(error).startswith(f"{tmp_path / 's.yaml'}:{line}: {field}: ")


def test_a_service_served_twice_names_the_first_load_balancer(tmp_path):
    text = BASE.replace(
        "    avoidSourceBackend: true\n", "    avoidSourceBackend: true\n  - {name: other, services: [web]}\n"
    )
    error = error_for(tmp_path, text)
    assert error.field == "loadBalancers[1].services[0]" and "already served by the load balancer at line 14" in str(
        error
    )


def _observation(entry: str, node: str, source: str) -> Observation:
    return Observation("delivered", backend="web", node=node, source=source, entry=entry)


def test_relative_expectations_resolve_per_connection(tmp_path):
    text = BASE.replace("node: entry, source: client,", "source: {local: entry, remote: entry/eth0},")
    topo = load(tmp_path, text)
    expected = topo.probes[0].expected
    local = resolve(expected, _observation("node1", "node1", "node1"), topo)
    remote = resolve(expected, _observation("node2", "node1", "node2"), topo)
    assert not isinstance(local, str) and (local.source, local.source_ip) == ("node1", "192.168.56.11")
    assert not isinstance(remote, str) and (remote.source, remote.source_ip) == ("node2/eth0", "192.168.56.12")
    plain = resolve(topo.probes[0].expected, _observation("", "node1", "x"), topo)
    assert plain == "no node saw the connection, so it entered through none"


def test_fabric_rules_skip_the_source_backend_and_snat_the_egress(tmp_path):
    topo = load(tmp_path)
    lb = topo.load_balancers[0]
    checks = (CheckResult("node1", "u", 200), CheckResult("node2", "u", 200))
    text = fabric_rules(topo, [Decision(lb, lb.frontends[0], checks, ("node1", "node2"))])
    np = lb.frontends[0].node_port
    assert (
        f"-A LOAD-BALANCER -d 172.19.100.2/32 -p tcp -m tcp --dport 80 ! -s 192.168.56.11/32 "
        f'-m comment --comment "clb default/web: health node1 200, node2 200" '
        f"-j DNAT --to-destination 192.168.56.11:{np}"
    ) in text
    assert text.count("-j DNAT") == 3  # one per backend with its exclusion, then the first one unconditionally
    assert "-A EGRESS-GATEWAY -s 10.244.1.0/24 -m conntrack --ctorigdst 203.0.113.0/24" in text
    assert "--to-source 198.51.100.11" in text and "192.168.56.12/32 -m conntrack" not in text


def test_masq_agent_rules_as_the_report_shows_them(tmp_path):
    text = masq_agent_rules(load(tmp_path).masq_agent)
    assert text.splitlines()[:2] == ["*nat", ":IP-MASQ-AGENT - [0:0]"]
    assert (
        '-A IP-MASQ-AGENT -d 10.244.0.0/16 -m comment --comment "ip-masq-agent: cluster-local traffic should not be '
        'subject to MASQUERADE" -m addrtype ! --dst-type LOCAL -j RETURN'
    ) in text
    assert text.rstrip().endswith("-m addrtype ! --dst-type LOCAL -j MASQUERADE\nCOMMIT")


def test_health_check_answers_as_kube_proxy_writes_them(tmp_path):
    topo = load(tmp_path)
    assert local_endpoints(topo, "default/web", "node1") == 1 and local_endpoints(topo, "default/web", "node2") == 0
    assert service_body("default", "web", 1, Release(20)) == (
        '{\n\t"service": {\n\t\t"namespace": "default",\n\t\t"name": "web"\n\t},\n\t"localEndpoints": 1\n}'
    )
    assert service_body("ns", "s", 0, Release(27)).endswith('\t"localEndpoints": 0,\n\t"serviceProxyHealthy": true\n}')
    ok = response(HealthListener("node1", "ns", 30001, "default/web", 1, Release(28)), now=0).decode()
    assert ok.startswith("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n")
    assert "X-Load-Balancing-Endpoint-Weight: 1\r\n" in ok
    gone = response(HealthListener("node2", "ns", 30001, "default/web", 0, Release(20)), now=0).decode()
    assert gone.startswith("HTTP/1.1 503 Service Unavailable") and "Weight" not in gone
    healthz = response(HealthListener("node1", "ns", 10256, release=Release(20)), now=0).decode()
    assert healthz.endswith(
        '{"lastUpdated": "1970-01-01 00:00:00 +0000 UTC","currentTime": "1970-01-01 00:00:00 +0000 UTC"}'
    )


def _tcp(where: str, src: str, dst: str, flags: int, outgoing: bool = False) -> Frame:
    (sip, sport), (dip, dport) = (a.split(":") for a in (src, dst))
    tcp = struct.pack("!HHIIBBHHH", int(sport), int(dport), 0, 0, 5 << 4, flags, 0, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, 0, 0, 64, 6, 0, socket.inet_aton(sip), socket.inet_aton(dip))
    actor, ifname = where.split("/")
    return Frame(actor, ifname, outgoing, 0.0, b"\x00" * 12 + b"\x08\x00" + ip + tcp)


def test_a_syn_ack_from_the_wrong_address_is_explained_as_a_bypassed_nat():
    frames = [
        _tcp("node1/veth-a", "10.244.1.3:4000", "172.18.96.4:80", 0x02),
        _tcp("node1/veth-a", "192.168.56.11:30000", "10.244.1.3:4000", 0x12, outgoing=True),
        _tcp("node1/veth-a", "10.244.1.3:4000", "192.168.56.11:30000", 0x04),
    ]
    why = stray_answer("dropped", frames, "172.18.96.4:80")
    assert why.startswith("the answer reached the client from 192.168.56.11:30000, not 172.18.96.4:80")
    assert why.endswith("and the client reset it")
    assert stray_answer("dropped", frames[:1], "172.18.96.4:80") == ""
    assert stray_answer("delivered", frames, "172.18.96.4:80") == ""


def test_vxlan_encapsulation_is_not_a_hop_of_its_own():
    udp = struct.pack("!HHHH", 40000, 4789, 8, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28, 0, 0, 64, 17, 0, bytes(4), bytes(4))
    outer = Frame("node1", "eth0", True, 0.0, b"\x00" * 12 + b"\x08\x00" + ip + udp)
    assert not outer.opens_or_ends
    dns = Frame("node1", "eth0", True, 0.0, b"\x00" * 12 + b"\x08\x00" + ip + struct.pack("!HHHH", 4000, 53, 8, 0))
    assert dns.opens_or_ends


def test_several_connections_name_their_sources_from_their_entry(tmp_path):
    text = BASE.replace("node: entry, source: client,", "source: {local: entry, remote: entry/eth0},")
    topo = load(tmp_path, text)
    remote, local = ("node2", "node1", "node2/eth0", "192.168.56.12"), ("node1", "node1", "node1", "192.168.56.11")
    seen = [replace(_observation(entry, node, source), source_ip=ip) for entry, node, source, ip in (remote, local) * 2]
    summary, verdict = run_probe(ScriptedSession(seen), topo.probes[0], topo)  # type: ignore[arg-type]
    assert verdict.ok, verdict.reasons
    assert summary.source == "node1|node2/eth0"  # sorted, whatever order the connections came in
    assert summary.source_by_entry == "entry|entry/eth0"  # the same whichever node a connection entered by


def test_a_load_balancer_of_an_ipv6_address_or_vip_is_refused(tmp_path):
    """The lab's load balancers are IPv4 only: an IPv6 cluster's (its address the IPv6 gateway's) is refused at
    its address, a dual-stack cluster's at the Service whose IPv6 ingress IP it would serve."""
    fixtures = REPO / "tests" / "fixtures"
    text = (fixtures / "ipv6" / "ipv6-loadbalancer.yaml").read_text()
    error = error_for(tmp_path, text + "loadBalancers: [{name: lb}]\n")
    assert error.field == "loadBalancers[0].address", str(error)
    assert "IPv6 gateway fd00:56::1: the lab's load balancers are IPv4 only yet" in error.message, error.message
    text = (fixtures / "dualstack" / "dual-stack-loadbalancer.yaml").read_text()
    error = error_for(tmp_path, text + "loadBalancers: [{name: lb}]\n")
    assert error.field == "loadBalancers[0].services", str(error)
    assert "fd00:203::10 is IPv6: the lab's load balancers serve IPv4 only yet" in error.message, error.message
