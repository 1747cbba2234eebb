"""`lab import` of dual-stack and IPv6-only clusters (tests/fixtures/kubectl/dual-stack, ipv6-only: kubectl's own
output of a kind cluster with both families, and with IPv6 alone): the round trip import → validate → render, each
family's addresses kept as the cluster has them; what stays IPv4-only in the lab said."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_kubectl_import import FIXTURES, SHOP, imported, loaded, notes_about

from lab.describe.errors import ScenarioError
from lab.render.dataplane import node_dataplane

DUAL = [str(FIXTURES / "dual-stack" / f) for f in ("dump.yaml", "kube-proxy.yaml", "version.yaml")]
IPV6 = [str(FIXTURES / "ipv6-only" / f) for f in ("dump.yaml", "kube-proxy.yaml", "version.yaml")]


def test_a_dual_stack_cluster_round_trips(tmp_path):
    result = imported(DUAL)
    cluster = result.scenario["cluster"]
    assert (cluster["clusterCIDR"], cluster["serviceCIDR"], cluster["underlay"]) == (
        "10.244.0.0/16,fd00:10:244::/56",
        "10.96.0.0/16,fd00:10:96::/112",
        "192.168.56.0/24,fd00:56::/64",
    )
    topo = loaded(tmp_path, result)
    assert [(n.name, n.ip, n.secondary_ip, n.pod_cidr, n.secondary_pod_cidr) for n in topo.nodes] == [
        ("node1", "192.168.56.11", "fd00:56::11", "10.244.1.0/24", "fd00:10:244:1::/64"),
        ("node2", "192.168.56.12", "fd00:56::12", "10.244.2.0/24", "fd00:10:244:2::/64"),
    ]
    # the pods keep both their addresses (status.podIPs), so the IPv6 EndpointSlices' addresses are theirs
    assert sorted(p.ips for p in topo.pods) == [
        ("10.244.1.5", "fd00:10:244:1::5"),
        ("10.244.2.7", "fd00:10:244:2::7"),
    ]
    web = next(s for s in topo.services if s.name == "web")
    assert (web.ip_families, web.cluster_ips) == (("IPv4", "IPv6"), ("10.96.0.10", "fd00:10:96::a"))
    web6 = next(s for s in topo.services if s.name == "web6")
    assert (web6.ip_families, web6.cluster_ips) == (("IPv6",), ("fd00:10:96::b",))
    slices = [m for m in result.scenario["workload"] if m["kind"] == "EndpointSlice"]
    assert sorted((m["metadata"]["name"], m["addressType"]) for m in slices) == [
        ("web-4xk2p", "IPv4"),
        ("web-q8v7n", "IPv6"),
        ("web6-m2h9d", "IPv6"),
    ]
    # the dual-stack Service is probed in its second family too
    families = {p.name: p.family for p in topo.probes}
    assert families["default-web-http-node-port-via-node1-ipv6"] == "IPv6"
    assert families["default-web6-http-cluster-ip-from-node1"] in ("IPv6", None)
    # render: each proxier has its family's endpoints of both Services
    plane = node_dataplane(topo, "node1")
    assert plane.other_family is not None
    assert "dnat to 10.244.2.7:8080" in plane.nft and "fd00" not in plane.nft
    six = plane.other_family.nft
    assert six.count("dnat to [fd00:10:244:2::7]:8080") == 2 and "dnat to 10." not in six
    assert not notes_about(result, "IPv6", "left out")


def test_an_ipv6_only_cluster_round_trips(tmp_path):
    result = imported(IPV6)
    topo = loaded(tmp_path, result)
    assert topo.cluster.families == ("IPv6",)
    assert [(n.ip, n.pod_cidr) for n in topo.nodes] == [
        ("fd00:56::11", "fd00:10:244:1::/64"),
        ("fd00:56::12", "fd00:10:244:2::/64"),
    ]
    assert result.scenario["externalHosts"] == [{"name": "client", "ip": "fd00:56::ffff:ffff:ffff:fffe"}]
    web = next(s for s in topo.services if s.name == "web")
    # PreferDualStack in a single-stack cluster: one family, as the API server left it
    assert (web.cluster_ip, web.ip_families) == ("fd00:10:96::a", ("IPv6",))
    plane = node_dataplane(topo, "node2")
    assert plane.family == "IPv6" and "-j DNAT --to-destination [fd00:10:244:1::5]:8080" in plane.iptables
    assert "! -d ::1/128 -j KUBE-NODEPORTS" in plane.iptables


def test_anonymize_refuses_what_it_cannot_rename():
    with pytest.raises(ScenarioError, match="--anonymize renames IPv4 addresses only"):
        imported(DUAL, anonymize=True)


def test_a_dual_stack_cluster_in_ipvs_mode_is_imported_dual_stack(tmp_path):
    config = Path(DUAL[1]).read_text().replace("    mode: nftables", "    mode: ipvs")
    (tmp_path / "kube-proxy.yaml").write_text(config)
    result = imported([DUAL[0], str(tmp_path / "kube-proxy.yaml"), DUAL[2]])
    assert result.scenario["cluster"]["clusterCIDR"] == "10.244.0.0/16,fd00:10:244::/56"
    assert loaded(tmp_path, result).cluster.proxy_mode == "ipvs"


def test_require_dual_stack_in_an_ipv4_import_is_written_single_stack(tmp_path):
    dump = yaml.safe_load(Path(DUAL[0]).read_text())
    for item in dump["items"]:
        if item["kind"] == "Node":
            item["status"]["addresses"] = [a for a in item["status"]["addresses"] if ":" not in a["address"]]
        if item["kind"] == "Service" and item["metadata"]["name"] == "web":
            item["spec"]["ipFamilyPolicy"] = "RequireDualStack"
    (tmp_path / "dump.yaml").write_text(yaml.safe_dump(dump))
    result = imported([str(tmp_path / "dump.yaml"), DUAL[2]])
    assert notes_about(result, "Service default/web", "RequireDualStack in a single-stack import")
    assert loaded(tmp_path, result).cluster.families == ("IPv4",)


def test_the_shop_cluster_on_calico_is_imported_ipv4_and_says_why():
    """The EKS-like dual-stack fixture runs Calico, which the lab builds (routed-tunnel) for IPv4 only: imported
    IPv4, every IPv6 object said."""
    result = imported(SHOP)
    assert "," not in result.scenario["cluster"]["clusterCIDR"]
    assert notes_about(result, "2a05:d018:1:1::f", "routed-tunnel", "imported IPv4", "left out")
    assert notes_about(result, "clusterCIDR", "fd00:64::/48", "imported IPv4")
    assert notes_about(result, "EndpointSlice shop/web-r9fmd", "IPv6", "skipped")
    assert notes_about(result, "Service monitoring/grafana", "no cluster IP of the imported families (IPv4)")
