"""Localhost NodePorts as a scenario sets them: nodePortAddresses' keywords (kubernetes#138427, 1.37; `primary` alone
from 1.30), iptables.localhostNodePorts, and 1.37's KubeProxyNFTablesLocalhostNodePorts gate — what each release
accepts, and what each mode writes for them. (The kernel's answer: topologies/localhost-nodeport.yaml.)"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario
from lab.describe.topology import Topology
from lab.pipeline import cannot_run
from lab.render.dataplane import NodeDataplane, render
from lab.render.kubeproxy.nftables import LocalhostNodePort, render_nftables
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort

GATE = "KubeProxyNFTablesLocalhostNodePorts"


def cluster(fields: str) -> str:
    return BASE.replace("cluster: {", "cluster: {" + fields + ", ")


def variant(tmp_path: Path, fields: str, **axes: list) -> Topology:
    (topo,) = load_scenario(write(tmp_path, cluster(fields)), axes).variants
    return topo


def node1(tmp_path: Path, fields: str, mode: str) -> NodeDataplane:
    return render(variant(tmp_path, fields, proxyMode=[mode]))["node1"]


@pytest.mark.parametrize(
    "fields",
    [
        'kubeVersion: "1.37", nodePortAddresses: [primary, localhost]',
        'kubeVersion: "1.37", nodePortAddresses: [all, localhost, 10.0.0.0/8]',
        'kubeVersion: "1.30", nodePortAddresses: [primary]',
        'kubeVersion: "1.36", nodePortAddresses: [127.0.0.0/8, 192.168.56.0/24]',
        f'kubeVersion: "1.37", featureGates: {{{GATE}: true}}',
        'kubeVersion: "1.26", iptables: {localhostNodePorts: false}',
    ],
)
def test_what_each_release_takes(tmp_path, fields):
    assert variant(tmp_path, fields).cluster.kube_version


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ('kubeVersion: "1.36", nodePortAddresses: [localhost]', "cluster.nodePortAddresses", "added in 1.37"),
        ('kubeVersion: "1.36", nodePortAddresses: [all]', "cluster.nodePortAddresses", "kubernetes#138427"),
        ('kubeVersion: "1.36", nodePortAddresses: [primary, 127.0.0.1/32]', "cluster.nodePortAddresses", "both"),
        ('kubeVersion: "1.29", nodePortAddresses: [primary]', "cluster.nodePortAddresses", "came in 1.30"),
        ('kubeVersion: "1.37", nodePortAddresses: [Localhost]', "cluster.nodePortAddresses", "lower case"),
        ('kubeVersion: "1.37", nodePortAddresses: [localhost, localhost]', "cluster.nodePortAddresses", "2 times"),
        ('kubeVersion: "1.25", iptables: {localhostNodePorts: false}', "cluster.iptables", "added in 1.26"),
        ("featureGates: {KubeProxyNFTablesLocalhost: true}", "cluster.featureGates", GATE),
    ],
)
def test_what_a_release_does_not_take_is_refused_in_words(tmp_path, fields, field, words):
    error = error_for(tmp_path, cluster(fields))
    assert error.field.startswith(field) and words in error.message, str(error)


def test_a_release_without_the_gate_refuses_to_start(tmp_path):
    topo = variant(tmp_path, f'kubeVersion: "1.36", proxyMode: nftables, featureGates: {{{GATE}: false}}')
    assert "kube-proxy 1.36 has no feature gate" in cannot_run(topo) and "1.37" in cannot_run(topo)


def test_the_gate_axis_turns_it_on_or_leaves_it_out(tmp_path):
    text = cluster('kubeVersion: "1.36"') + f"matrix: {{{GATE}: [false, true]}}\n"
    off, on = load_scenario(write(tmp_path, text)).variants
    assert off.cluster.feature_gates == () and cannot_run(off) == ""
    assert on.cluster.gate(GATE) and cannot_run(on)


def test_the_gate_axis_writes_it_off_where_the_release_has_it(tmp_path):
    """1.38 turns the gate on by default (#142490), so the axis' false must reach kube-proxy as false; 1.37's false
    is its default either way, and the scenario's own setting stands beside no axis."""
    text = cluster('kubeVersion: "1.38"') + f"matrix: {{{GATE}: [false, true], kubeVersion: ['1.38', '1.37']}}\n"
    off_38, off_37, on_38, on_37 = load_scenario(write(tmp_path, text)).variants
    assert off_38.cluster.feature_gates == ((GATE, False),) and not off_38.cluster.gate(GATE)
    assert not off_37.cluster.gate(GATE) and on_38.cluster.gate(GATE) and on_37.cluster.gate(GATE)
    assert variant(tmp_path, 'kubeVersion: "1.38"').cluster.gate(GATE)
    assert not variant(tmp_path, 'kubeVersion: "1.37"').cluster.gate(GATE)
    assert not variant(tmp_path, f'kubeVersion: "1.38", featureGates: {{{GATE}: false}}').cluster.gate(GATE)


@pytest.mark.parametrize("addresses", [("primary",), ("primary", "localhost")])
def test_1_38_writes_what_1_37_writes_with_the_gate_on_unless_it_is_turned_off(addresses):
    """#142490: beta and on by default in 1.38, otherwise as 1.37's (INFERRED, docs/kubeproxy-versions.md): a
    configuration that does not name the gate gets 1.37's gate-on rules and listeners, one that turns it off 1.37's
    default ones."""
    default_38 = _nft(addresses, "1.38", gate=None)
    assert replace(default_38, version="1.37") == _nft(addresses, "1.37", gate=True)
    assert _rejecting(default_38.commands)
    off_38 = _nft(addresses, "1.38", gate=False)
    assert replace(off_38, version="1.37") == _nft(addresses, "1.37", gate=None)
    assert not _rejecting(off_38.commands)


def test_keywords_resolve_to_the_node_ip_and_loopback_in_iptables_mode(tmp_path):
    plane = node1(tmp_path, 'kubeVersion: "1.37", nodePortAddresses: [primary, localhost]', "iptables")
    jumps = [line for line in plane.iptables.splitlines() if line.endswith("-j KUBE-NODEPORTS")]
    assert any("-d 192.168.56.11 " in line for line in jumps) and any("-d 127.0.0.1 " in line for line in jumps)
    assert ("net.ipv4.conf.all.route_localnet", "1") in plane.setup.sysctls


def test_localhost_node_ports_false_keeps_127_out_in_iptables_mode(tmp_path):
    plane = node1(tmp_path, 'kubeVersion: "1.37", iptables: {localhostNodePorts: false}', "iptables")
    assert "! -d 127.0.0.0/8 -j KUBE-NODEPORTS" in plane.iptables
    assert ("net.ipv4.conf.all.route_localnet", "1") not in plane.setup.sysctls


def _service(protocol: str = "TCP", policy: str = "Cluster", endpoints: tuple[Endpoint, ...] | None = None):
    eps = (Endpoint("10.244.1.2", 5000, True), Endpoint("10.244.2.2", 5000, False)) if endpoints is None else endpoints
    return ServicePort("default", "registry", "", protocol, 5000, "10.96.0.10", 30500, external_policy=policy,  # type: ignore[arg-type]
                       endpoints=eps)  # fmt: skip


def _nft(addresses: tuple[str, ...], version: str = "1.37", gate: bool | None = True, services=None):
    config = ProxyConfig(cluster_cidr="10.244.0.0/16", node_port_addresses=addresses, nft_localhost_nodeports=gate)
    return render_nftables(services or [_service(), _service("UDP")], config, ["192.168.56.11"], version)


def _rejecting(lines: tuple[str, ...]) -> list[str]:
    return [line.split()[-1] for line in lines if line.startswith("add rule ip kube-proxy localhost-nodeport-reject-")]


def test_gate_with_a_loopback_cidr_proxies_tcp_and_rejects_the_rest():
    rules = _nft(("primary", "localhost"))
    assert _rejecting(rules.commands) == ["reject", "reject"]
    assert "add counter ip kube-proxy localhost-nodeport-rejected-udp" in rules.commands
    assert "add counter ip kube-proxy localhost-nodeport-rejected-tcp" not in rules.commands
    check = "add rule ip kube-proxy nodeport-endpoints-check ip daddr 127.0.0.0/8 meta l4proto . th dport vmap"
    assert f"{check} @localhost-nodeport-reject-ports" in rules.commands
    elements = [c for c in rules.commands if c.startswith("add element ip kube-proxy localhost-nodeport-reject-ports")]
    assert elements == [
        "add element ip kube-proxy localhost-nodeport-reject-ports { udp . 30500 : goto localhost-nodeport-reject-udp }"
    ]
    assert rules.localhost_nodeports == (
        LocalhostNodePort("default/registry", 30500, ("10.244.1.2:5000", "10.244.2.2:5000")),
    )


@pytest.mark.parametrize("addresses", [(), ("primary",), ("all",), ("0.0.0.0/0",)])
def test_gate_without_a_loopback_cidr_rejects_every_protocol(addresses):
    rules = _nft(addresses)
    assert rules.localhost_nodeports == ()
    assert "add counter ip kube-proxy localhost-nodeport-rejected-tcp" in rules.commands
    assert len(_rejecting(rules.commands)) == 3


def test_the_proxy_forwards_to_local_endpoints_only_for_a_local_policy():
    local = _service(policy="Local")
    rules = _nft(("primary", "localhost"), services=[local])
    assert rules.localhost_nodeports[0].endpoints == ("10.244.1.2:5000",)
    remote_only = _service(policy="Local", endpoints=(Endpoint("10.244.2.2", 5000, False),))
    assert _nft(("primary", "localhost"), services=[remote_only]).localhost_nodeports == ()


@pytest.mark.parametrize(("version", "gate"), [("1.37", False), ("1.36", True)])
def test_no_gate_writes_nothing_for_localhost(version, gate):
    rules = _nft(("192.168.56.0/24", "127.0.0.0/8"), version, gate)
    assert rules.localhost_nodeports == () and not any("localhost" in line for line in rules.commands)
    assert rules == replace(_nft(("192.168.56.0/24",), version, gate), version=version)


def test_lab_render_names_the_proxys_listeners_after_the_rules(tmp_path):
    fields = f'kubeVersion: "1.37", nodePortAddresses: [primary, localhost], featureGates: {{{GATE}: true}}'
    text = node1(tmp_path, fields, "nftables").text()
    assert text.endswith("# kube-proxy listens on 127.0.0.1:30000/TCP for default/web:http -> 10.244.1.2:8080, "
                         "10.244.1.3:8080\n"), text  # fmt: skip


def test_the_proxy_pins_one_endpoint_under_client_ip_affinity_and_forgets_it_when_affinity_changes():
    from lab.install.localhost_proxy import _Listener

    endpoints = tuple(f"10.244.1.{n}:5000" for n in range(2, 12))
    pinned = _Listener("ns", LocalhostNodePort("default/registry", 30500, endpoints, affinity_timeout=10800))
    first = pinned.pick()
    assert {pinned.pick() for _ in range(20)} == {first}
    pinned.update(LocalhostNodePort("default/registry", 30500, endpoints))
    assert pinned.pinned == "" and len({pinned.pick() for _ in range(200)}) > 1
