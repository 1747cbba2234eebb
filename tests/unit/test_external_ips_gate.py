"""kube-proxy's AllowServiceExternalIPs gate (KEP-5707, kubernetes#137293; 1.36+, deprecated and on by default): which
releases take it, and what each mode writes for a Service's externalIPs with it on and off. (The kernel's answer:
tests/integration/test_external_ips_gate_kernel.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.scenario import BASE, write

from lab.describe.kubectl.objects import read_inputs
from lab.describe.kubectl.scenario import Options, import_cluster
from lab.describe.load import load_scenario
from lab.describe.topology import Topology
from lab.pipeline import cannot_run
from lab.render.dataplane import render
from lab.render.kubeproxy.adapter import service_ports

GATE = "AllowServiceExternalIPs"
EXTERNAL_IP = "192.168.56.200"
DUMP = Path(__file__).resolve().parents[1] / "fixtures" / "kubectl" / "nodeport-source-ip" / "dump.yaml"


def scenario(fields: str) -> str:
    """BASE with the web Service given an external IP and `fields` added to the cluster."""
    text = BASE.replace("cluster: {", "cluster: {" + fields + ", ")
    return text.replace("      type: NodePort\n", f"      type: NodePort\n      externalIPs: [{EXTERNAL_IP}]\n")


def variant(tmp_path: Path, fields: str, **axes: list) -> Topology:
    (topo,) = load_scenario(write(tmp_path, scenario(fields)), axes).variants
    return topo


def external_ips(topo: Topology) -> tuple[str, ...]:
    return tuple(ip for port in service_ports(topo, "node1") for ip in port.external_ips)


@pytest.mark.parametrize(
    ("fields", "kept"),
    [
        ('kubeVersion: "1.35"', True),  # no gate yet
        ('kubeVersion: "1.36"', True),  # the gate's default: on
        ('kubeVersion: "1.38"', True),
        (f'kubeVersion: "1.36", featureGates: {{{GATE}: false}}', False),
        (f'kubeVersion: "1.38", featureGates: {{{GATE}: false}}', False),
        (f'kubeVersion: "1.38", featureGates: {{{GATE}: true}}', True),
    ],
)
def test_kube_proxy_sees_external_ips_unless_the_gate_is_off(tmp_path, fields, kept):
    assert external_ips(variant(tmp_path, fields)) == ((EXTERNAL_IP,) if kept else ())


@pytest.mark.parametrize("mode", ["iptables", "ipvs", "nftables"])
def test_no_mode_writes_an_external_ip_with_the_gate_off(tmp_path, mode):
    """The rules differ only in what belongs to the external IP: the gate on writes it (iptables' and nftables'
    rules, ipvs' virtual server and its kube-ipvs0 address), off writes nothing of it."""
    on = render(variant(tmp_path, f'kubeVersion: "1.38", proxyMode: {mode}'))["node1"]
    off = render(variant(tmp_path, f'kubeVersion: "1.38", proxyMode: {mode}, featureGates: {{{GATE}: false}}'))["node1"]
    texts = (on.iptables + on.nft + on.ipvs + " ".join(on.dummy_addresses), off.iptables + off.nft + off.ipvs)
    assert EXTERNAL_IP in texts[0] and EXTERNAL_IP not in texts[1] + " ".join(off.dummy_addresses)


def test_a_release_without_the_gate_refuses_to_start(tmp_path):
    topo = variant(tmp_path, f'kubeVersion: "1.35", featureGates: {{{GATE}: false}}')
    assert "kube-proxy 1.35 has no feature gate AllowServiceExternalIPs (added in 1.36" in cannot_run(topo)


def test_the_gate_axis_turns_it_off_or_leaves_it_out(tmp_path):
    """`false` on the axis is written off for 1.36+ and left out for 1.35, which refuses a gate it does not know."""
    text = scenario('kubeVersion: "1.35"') + f"matrix: {{{GATE}: [false], kubeVersion: ['1.35', '1.36']}}\n"
    old, new = load_scenario(write(tmp_path, text)).variants
    assert old.cluster.feature_gates == () and cannot_run(old) == "" and external_ips(old) == (EXTERNAL_IP,)
    assert not new.cluster.gate(GATE) and cannot_run(new) == "" and external_ips(new) == ()


def test_an_imported_configuration_keeps_the_gate_where_its_release_has_it(tmp_path):
    conf = tmp_path / "conf.yaml"
    conf.write_text(
        f"apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nfeatureGates: {{{GATE}: false}}\n"
    )
    for version, gates in (("1.38", {GATE: False}), ("1.35", None)):
        result = import_cluster(read_inputs([str(DUMP), str(conf)]), Options(kube_version=version))
        assert result.scenario["cluster"].get("featureGates") == gates, result.notes
    assert any("conf.yaml:3" in note and "no feature gate AllowServiceExternalIPs" in note for note in result.notes)
