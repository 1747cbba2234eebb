"""A dual-stack node's rules: one kube-proxy proxier per family, each with its own family's addresses, per mode.

The goldens under tests/golden/dualstack are the lab's own output for tests/fixtures/dualstack/dual-stack-nodeport.yaml
(regression texts, not kube-proxy's: kube-proxy's IPv6 agreement is tests/unit/test_iptables_ipv6.py); the
assertions below say what each must hold whatever the golden.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lab.describe.load import load_scenario
from lab.render.dataplane import node_dataplane

FILE = "tests/fixtures/dualstack/dual-stack-nodeport.yaml"
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "dualstack"


def plane(mode: str):
    (topo,) = load_scenario(FILE, {"proxyMode": [mode]}).variants
    return node_dataplane(topo, "node2")


@pytest.mark.parametrize("mode", ["iptables", "ipvs", "nftables"])
def test_both_proxiers_as_lab_render_prints_them(mode):
    assert plane(mode).text() == (GOLDEN / f"{mode}-node2.txt").read_text()


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_each_proxier_has_its_family_only(mode):
    v4 = plane(mode)
    v6 = v4.other_family
    assert (v4.family, v6.family if v6 else None) == ("IPv4", "IPv6")
    text4 = v4.iptables or v4.nft
    text6 = v6.iptables or v6.nft
    # The dual-stack Service in both, the IPv6-only one in the IPv6 proxier alone; endpoints of the family.
    assert "10.96.0.10" in text4 and "fd00:10:96::a" not in text4 and "fd00:10:96::b" not in text4
    assert "fd00:10:96::a" in text6 and "fd00:10:96::b" in text6 and "10.96.0.10" not in text6
    assert "10.244.1.2" in text4 and "fd00:10:244:1::2" in text6 and "10.244.1.2" not in text6
    # The local-traffic detector is the family's clusterCIDR.
    assert "10.244.0.0/16" in text4 and "fd00:10:244::/56" in text6


def test_each_ipvs_proxier_adds_its_own_family_to_the_one_ipvs_table_and_kube_ipvs0():
    """NewDualStackProxier: two ipvs proxiers on one IPVS table and one kube-ipvs0, each with its own family's
    virtual servers, addresses, sets (KUBE-6-... for IPv6) and ip6tables rules; nothing of one family in the other's."""
    v4 = plane("ipvs")
    v6 = v4.other_family
    assert v6 is not None and (v4.family, v6.family) == ("IPv4", "IPv6")
    assert v4.dummy_addresses == ("10.96.0.10/32",)
    assert v6.dummy_addresses == ("fd00:10:96::a/128", "fd00:10:96::b/128")
    assert "-A -t [fd00:10:96::a]:80 -s rr" in v6.ipvs.splitlines() and "[" not in v4.ipvs and "10.96" not in v6.ipvs
    assert "-a -t [fd00:56::12]:30000 -r [fd00:10:244:1::2]:8080 -m -w 1" in v6.ipvs.splitlines()
    creates6 = [line.split()[1] for line in v6.ipsets.splitlines() if line.startswith("create ")]
    creates4 = [line.split()[1] for line in v4.ipsets.splitlines() if line.startswith("create ")]
    assert all(name.startswith("KUBE-6-") for name in creates6) and not set(creates6) & set(creates4)
    assert "! -s fd00:10:244::/56 -j KUBE-MARK-MASQ" in v6.iptables and "-s ::1/128 -j RETURN" in v6.iptables
    assert "10.244" not in v6.iptables and "fd00" not in v4.iptables


def test_ip6tables_serves_no_nodeport_on_loopback_and_sets_no_route_localnet():
    v6 = plane("iptables").other_family
    assert v6 is not None
    assert "127.0.0.0/8" not in v6.iptables
    assert all(key != "net.ipv4.conf.all.route_localnet" for key, _ in v6.setup.sysctls)


def test_the_ip6_table_speaks_ipv6():
    v6 = plane("nftables").other_family
    assert v6 is not None
    lines = v6.nft.splitlines()
    assert all(" ip6 kube-proxy" in line for line in lines if line.startswith(("add ", "flush ", "delete ")))
    assert "ip daddr" not in v6.nft and "ipv4_addr" not in v6.nft
    # nftables serves NodePorts on the primary node IP of the family by default.
    assert "add element ip6 kube-proxy nodeport-ips { fd00:56::12 }" in v6.nft and "type ipv6_addr" in v6.nft


def test_ip6_nodeports_on_every_address_leave_loopback_out():
    from lab.render.kubeproxy.nftables import render_nftables
    from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort

    port = ServicePort("ns1", "svc1", "p80", "TCP", 80, "fd00:ab34::20", node_port=30001,
                       endpoints=(Endpoint("ff06::c1", 80, False),))  # fmt: skip
    config = ProxyConfig(family="IPv6", node_port_addresses=("::/0",))
    script = render_nftables([port], config, ["2001:db8::1"], "1.31").script()
    assert "fib daddr type local ip6 daddr != ::1" in script and "127.0.0.0/8" not in script


@pytest.mark.parametrize("version", ["1.30", "1.31", "1.32", "1.33"])
def test_ip6_table_agrees_with_kube_proxys_ipv6_node_ports_dump(version):
    """The IPv6 NodePort dump of kube-proxy's nftables era before 1.34's chain rework (tests/golden/nftables/ipv6):
    one NodePort Service, two endpoints, nodePortAddresses covering both IPv6 node addresses, ServiceCIDR
    fd00:10:96::/112. 1.34+ hook their chains otherwise (filter-prerouting-pre-dnat...): that dump predates it."""
    from support.builders import ep, svc
    from support.nft import FAKE, assert_nftables_transaction_equal, dump_of

    from lab.render.kubeproxy.nftables import render_nftables

    service = svc(
        "ns1", "svc1", "fd00:172:30::41", node_port=3001, endpoints=(ep("fd00:10:180::1"), ep("fd00:10:180::2:1"))
    )
    config = replace(FAKE, family="IPv6", cluster_cidr="fd00:10::/64", service_cidrs=("fd00:10:96::/112",),
                     node_port_addresses=("2001:db8::/32",))  # fmt: skip
    rules = render_nftables([service], config, ["2001:db8::1", "2001:db8:1::2"], version)
    expected = (
        Path(__file__).resolve().parents[1] / "golden" / "nftables" / "ipv6" / "node_ports_basic_v6.txt"
    ).read_text()
    assert_nftables_transaction_equal(expected, dump_of(rules))


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_each_proxier_filters_its_lb_ips_on_its_own_familys_source_ranges(mode):
    """kube-proxy's service change tracker keeps, per proxier, the loadBalancerSourceRanges and VIP-mode ingress
    IPs of its family: `web` lists only an IPv6 range, so the IPv6 proxier filters its IPv6 VIP and the IPv4
    proxier writes no firewall for its IPv4 VIP (open to every source)."""
    (topo,) = load_scenario("tests/fixtures/dualstack/dual-stack-loadbalancer.yaml", {"proxyMode": [mode]}).variants
    v4 = node_dataplane(topo, "node1")
    v6 = v4.other_family
    assert v6 is not None
    text4, text6 = v4.iptables or v4.nft, v6.iptables or v6.nft
    assert "203.0.113.10" in text4 and "fd00:203::10" not in text4 and "fd00:56::100" not in text4
    assert "fd00:203::10" in text6 and "203.0.113.10" not in text6
    if mode == "iptables":
        assert "KUBE-FW-" not in text4
        assert '--comment "default/web:http loadbalancer IP" -s fd00:56::100/128 -j KUBE-EXT-' in text6
        # Each proxier opens the Local Service's healthCheckNodePort in its own filter table (the Service needs a
        # health check whatever the family: its BaseServicePortInfo of each family carries the port).
        accept = '"default/local:http health check node port" -m tcp -p tcp --dport 30002 -j ACCEPT'
        assert accept in text4 and accept in text6
    else:
        assert "add element ip kube-proxy firewall-ips" not in text4 and "firewall-SUSTUHLJ" not in text4
        assert "ip6 saddr != { fd00:56::100/128 } drop" in text6


def test_nodeport_addresses_of_one_family_leave_the_other_proxier_serving_everywhere():
    """kube-proxy's NodePortAddresses is per proxier family: an IPv6 CIDR alone narrows the IPv6 proxier to the
    node's addresses inside it, and leaves the IPv4 proxier with none of its family, so every address."""
    path = "tests/fixtures/dualstack/dual-stack-nodeport-addresses.yaml"
    (topo,) = load_scenario(path, {"proxyMode": ["iptables"]}).variants
    v4 = node_dataplane(topo, "node2")
    v6 = v4.other_family
    assert v6 is not None
    assert "-m addrtype --dst-type LOCAL -j KUBE-NODEPORTS" in v4.iptables
    assert "-d fd00:56::12 -j KUBE-NODEPORTS" in v6.iptables and "--dst-type LOCAL -j KUBE-NODEPORTS" not in v6.iptables


@pytest.mark.parametrize(("version", "written"), [("1.29", True), ("1.30", False)])
def test_an_ipv6_ingress_of_ip_mode_proxy_is_written_until_the_gate_is_on(tmp_path, version, written):
    """The IPv6 proxier skips a Proxy-mode ingress IP as the IPv4 one does (IsVIPMode, LoadBalancerIPMode on by
    default from 1.30); before, every ingress IP of its family is its load balancer IP."""
    text = Path("tests/fixtures/ipv6/ipv6-loadbalancer.yaml").read_text()
    proxied = text.replace('ingress: [{ip: "fd00:203::20"}]', 'ingress: [{ip: "fd00:203::20", ipMode: Proxy}]')
    assert proxied != text
    (tmp_path / "s.yaml").write_text(proxied)
    (topo,) = load_scenario(tmp_path / "s.yaml", {"proxyMode": ["iptables"], "kubeVersion": [version]}).variants
    rules = node_dataplane(topo, "node2").iptables
    assert ("fd00:203::20" in rules) == written and "fd00:203::10" in rules
