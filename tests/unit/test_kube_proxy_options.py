"""kube-proxy's configuration fields in a scenario reach the rules it writes: masqueradeAll, nodePortAddresses,
ipvs scheduler and strictARP; bad values are refused at their line. (The kernel's answer to them is
tests/integration/topologies/kube-proxy-options.yaml.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario
from lab.render.dataplane import NodeDataplane, render


def cluster(fields: str) -> str:
    return BASE.replace("cluster: {", "cluster: {" + fields + ", ")


def planes(tmp_path: Path, text: str, mode: str) -> dict[str, NodeDataplane]:
    (topo,) = load_scenario(write(tmp_path, text), {"proxyMode": [mode]}).variants
    return dict(render(topo))


def node2(tmp_path: Path, text: str, mode: str) -> NodeDataplane:
    return planes(tmp_path, text, mode)["node2"]


def test_ipvs_scheduler_and_strict_arp_reach_ipvsadm_and_sysctls(tmp_path):
    plane = node2(tmp_path, cluster("ipvs: {scheduler: sh, strictARP: true}"), "ipvs")
    assert " -s sh" in plane.ipvs and " -s rr" not in plane.ipvs
    assert ("net.ipv4.conf.all.arp_ignore", "1") in plane.sysctls
    default = node2(tmp_path, BASE, "ipvs")
    assert " -s rr" in default.ipvs and ("net.ipv4.conf.all.arp_ignore", "1") not in default.sysctls


def test_masquerade_all_marks_every_cluster_ip_packet(tmp_path):
    rule = '-m comment --comment "default/web:http cluster IP"'
    marked = [line for line in node2(tmp_path, cluster("masqueradeAll: true"), "iptables").iptables.splitlines()]
    plain = [line for line in node2(tmp_path, BASE, "iptables").iptables.splitlines()]
    marked, plain = ([line for line in lines if rule in line] for lines in (marked, plain))
    assert any("KUBE-MARK-MASQ" in line and "! -s" not in line for line in marked), marked
    assert not any("KUBE-MARK-MASQ" in line and "! -s" not in line for line in plain), plain


def test_node_port_addresses_narrow_the_nodeport_rules(tmp_path):
    def jumps(text: str) -> dict[str, list[str]]:
        return {
            node: [
                line
                for line in plane.iptables.splitlines()
                if line.startswith("-A KUBE-SERVICES") and "-j KUBE-NODEPORTS" in line
            ]
            for node, plane in planes(tmp_path, text, "iptables").items()
        }

    default, listed = jumps(BASE), jumps(cluster("nodePortAddresses: [192.168.56.11/32]"))
    assert all("--dst-type LOCAL" in lines[0] for lines in default.values()), default
    assert "-d 192.168.56.11 -j KUBE-NODEPORTS" in listed["node1"][0] and listed["node2"] == [], listed


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ("ipvs: {scheduler: fifo}", "cluster.ipvs.scheduler", "'rr'"),
        ("nodePortAddresses: [10.0.0.0/33]", "cluster.nodePortAddresses", "10.0.0.0/33"),
        ("masqueradeAll: maybe", "cluster.masqueradeAll", "expected true or false"),
    ],
)
def test_bad_values_are_refused_at_their_field(tmp_path, fields, field, message):
    error = error_for(tmp_path, cluster(fields))
    assert error.field.startswith(field) and message in error.message, str(error)
