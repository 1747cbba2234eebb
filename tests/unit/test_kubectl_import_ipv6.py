"""`lab import` of dual-stack and IPv6-only clusters (tests/fixtures/kubectl/dual-stack, ipv6-only: kubectl's own
output of a kind cluster with both families, and with IPv6 alone): the round trip import → validate → render, each
family's addresses kept as the cluster has them; what stays IPv4-only in the lab said."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
import yaml
from test_kubectl_import import FIXTURES, SHOP, imported, loaded, notes_about

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


# The dual-stack fixture with global IPv6 addresses (a cloud's, as EKS or GKE give them) and other IPv4 networks.
GLOBAL = {
    "fd00:10:244:": "2a05:d018:a1c:",
    "fd00:10:96:": "2a05:d018:9c0:",
    "fd00:56:": "2a05:d018:56a:",
    "10.244.": "100.70.",
    "10.96.": "172.20.",
    "192.168.56.": "10.31.7.",
}


def _global(tmp_path: Path) -> list[str]:
    files = []
    for original in DUAL:
        text = Path(original).read_text()
        for old, new in GLOBAL.items():
            text = text.replace(old, new)
        files.append(str(tmp_path / Path(original).name))
        Path(files[-1]).write_text(text)
    return files


def test_anonymize_moves_both_families_and_keeps_every_address_in_its_place(tmp_path):
    plain = loaded(tmp_path, imported(_global(tmp_path)))
    assert plain.nodes[0].secondary_ip == "2a05:d018:56a::11"  # the edited dump is read as written
    result = imported(_global(tmp_path), anonymize=True)
    text = yaml.safe_dump(result.scenario)
    for secret in ("2a05", "d018", "100.70.", "172.20.", "10.31.7."):
        assert secret not in text
    topo = loaded(tmp_path, result)
    cluster = topo.cluster
    assert (cluster.secondary_cluster_cidr, cluster.secondary_service_cidr) == ("fd00:10:244::/56", "fd00:10:96::/112")
    pod_net6, service_net6 = (ipaddress.ip_network(c) for c in ("fd00:10:244::/56", "fd00:10:96::/112"))
    for node in topo.nodes:
        assert ipaddress.ip_network(node.secondary_pod_cidr).subnet_of(pod_net6)
        assert ipaddress.ip_address(node.secondary_ip) in ipaddress.ip_network("fd00:56::/64")
    for pod in topo.pods:
        node = topo.node(pod.node)
        assert ipaddress.ip_address(pod.ips[0]) in ipaddress.ip_network(node.pod_cidr)
        assert ipaddress.ip_address(pod.ips[1]) in ipaddress.ip_network(node.secondary_pod_cidr)
    dual = next(s for s in topo.services if len(s.cluster_ips) == 2)
    assert ipaddress.ip_address(dual.cluster_ips[1]) in service_net6
    # every address keeps its offset in its network: the fixture's own addresses (at the usual places) make the same
    assert result.scenario == imported(DUAL, anonymize=True).scenario
    plane = node_dataplane(topo, topo.nodes[0].name)
    assert "dnat to [fd00:10:244:2::7]:8080" in plane.other_family.nft


def test_anonymize_places_networks_apart_and_other_addresses_in_documentation_ranges():
    from lab.describe.kubectl.addresses import Anonymizer

    apart = Anonymizer({"IPv4": ("10.0.0.0/8", "172.30.0.0/16", "192.168.0.0/16")})
    # a /8 pod network takes 10.0.0.0/8: the Service network's usual 10.96.0.0 would fall in it, so it takes the next
    assert apart.walk("10.0.0.0/8,172.30.0.0/16,192.168.0.0/16") == "10.0.0.0/8,172.16.0.0/16,192.168.0.0/16"
    assert apart.address("172.30.0.10") == "172.16.0.10"
    anonymizer = Anonymizer(
        {
            "IPv4": ("10.0.0.0/8", "10.100.0.0/16", "10.200.0.0/16"),
            "IPv6": ("2600:1900:4000::/44", "2600:1900:5000::/108", "2600:1900:6000::/64"),
        }
    )
    # networks inside one placed before (a VPC's Services and nodes inside its pods' range) move with it
    assert anonymizer.walk("10.100.0.10,10.200.0.5") == "10.100.0.10,10.200.0.5"
    assert anonymizer.network("2600:1900:4000:12::/64") == "fd00:10:240:12::/64"
    assert anonymizer.address("2600:1900:5000::a") == "fd00:10:96::a"
    assert anonymizer.address("2600:1900:6000::11") == "fd00:56::11"
    # addresses and networks outside the cluster's: documentation ranges, the same each time they come back
    assert anonymizer.walk(["203.0.114.9", "2001:4860::8888", "2001:4860::8888"]) == [
        "203.0.113.1",
        "2001:db8:1::1",
        "2001:db8:1::1",
    ]
    assert anonymizer.network("2a00:1450:4000::/48") == "2001:db8:8000::/48"
    assert anonymizer.address("2a00:1450:4000::7") == "2001:db8:8000::7"
    assert anonymizer.walk("::/0") == "::/0"
    assert anonymizer.walk("not an address, 10.0.0.1") == "not an address, 10.0.0.1"


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


def test_anonymize_says_in_words_when_a_documentation_range_runs_out():
    from lab.describe.kubectl.addresses import Anonymizer, PoolExhausted

    anonymizer = Anonymizer({"IPv4": ("10.244.0.0/16", "10.96.0.0/12", "192.168.56.0/24")})
    # 198.18.0.0/15 holds two /16 blocks: a third source range of that size has nowhere to go (was StopIteration)
    assert anonymizer.walk(["11.0.0.0/16", "12.0.0.0/16"]) == ["198.18.0.0/16", "198.19.0.0/16"]
    with pytest.raises(PoolExhausted, match="no /16 of 198.18.0.0/15 left for 13.0.0.0/16"):
        anonymizer.walk(["13.0.0.0/16"])
    # 203.0.113.0/24 holds 254 hosts for external and load balancer addresses
    anonymizer.walk([f"11.1.{i // 250}.{i % 250 + 1}" for i in range(254)])
    with pytest.raises(PoolExhausted, match="no address of 203.0.113.0/24 left for 11.9.9.9"):
        anonymizer.walk(["11.9.9.9"])
