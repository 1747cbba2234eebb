"""kube-proxy's IPv6 ipvs proxier beyond what its own IPv6 tests check (tests/unit/test_ipvs_render.py ports
TestNodePortIPv6, TestIPv6Proxier and TestDismissLocalhostRuleExist): the names and family of its sets, its
kube-ipvs0 addresses, its rules' set names, and what it leaves to IPv4. Read in openshift/sdn
vendor/k8s.io/kubernetes/pkg/proxy/ipvs/{proxier.go,ipset.go} at 64fa36f6 (1.20) and 70cefcdd (1.30)."""

from __future__ import annotations

import re

import pytest

from lab.render.kubeproxy.ipvs import IPSET_INFO, render_ipvs, set_name
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort

NODE_IPS = ("2001:db8::1", "::1", "192.168.0.2", "127.0.0.1")


def rules(version: str = "1.31", **config):
    port = ServicePort(
        "ns1",
        "svc1",
        "p80",
        "TCP",
        80,
        "fd00:ab34::20",
        node_port=30001,
        external_ips=("2001:db8:99::22", "192.168.99.22"),
        load_balancer_ips=("2001:db8:98::1",),
        load_balancer_source_ranges=("2001:db8::/64", "10.0.0.0/8"),
        endpoints=(Endpoint("fd00:10::c1", 80, True), Endpoint("10.0.0.1", 80, True)),
    )
    family = ProxyConfig(family="IPv6", cluster_cidr="fd00:10::/64", **config)
    return render_ipvs([port], family, NODE_IPS, version)


def test_ipv6_virtual_servers_in_brackets_with_ipv6_real_servers_only():
    assert rules().ipvsadm_restore().splitlines() == [
        "-A -t [fd00:ab34::20]:80 -s rr",
        "-a -t [fd00:ab34::20]:80 -r [fd00:10::c1]:80 -m -w 1",
        "-A -t [2001:db8:99::22]:80 -s rr",
        "-a -t [2001:db8:99::22]:80 -r [fd00:10::c1]:80 -m -w 1",
        "-A -t [2001:db8:98::1]:80 -s rr",
        "-a -t [2001:db8:98::1]:80 -r [fd00:10::c1]:80 -m -w 1",
        "-A -t [2001:db8::1]:30001 -s rr",
        "-a -t [2001:db8::1]:30001 -r [fd00:10::c1]:80 -m -w 1",
    ]


def test_set_names_take_kube_6_cut_to_31_characters():
    """NewIPSet: "KUBE-" becomes "KUBE-6-" for the IPv6 proxier, cut to ipset's 31 characters; IPv4 keeps its."""
    assert set_name("KUBE-CLUSTER-IP", "IPv6") == "KUBE-6-CLUSTER-IP"
    assert set_name("KUBE-LOAD-BALANCER-SOURCE-CIDR", "IPv6") == "KUBE-6-LOAD-BALANCER-SOURCE-CID"
    assert set_name("KUBE-NODE-PORT-LOCAL-SCTP-HASH", "IPv6") == "KUBE-6-NODE-PORT-LOCAL-SCTP-HAS"
    assert set_name("KUBE-CLUSTER-IP", "IPv4") == "KUBE-CLUSTER-IP"
    names = [s.name for s in rules().ipsets]
    assert len(names) == len(IPSET_INFO) and all(n.startswith("KUBE-6-") and len(n) <= 31 for n in names)


def test_inet6_hash_sets_bitmaps_unchanged_and_128_addresses():
    r = rules()
    creates = [line for line in r.ipset_restore().splitlines() if line.startswith("create")]
    assert all(" family inet6 " in line for line in creates if " hash:" in line)
    assert "create KUBE-6-NODE-PORT-TCP bitmap:port range 0-65535" in creates
    text = r.ipset_restore()
    for member in (
        "add KUBE-6-CLUSTER-IP fd00:ab34::20,tcp:80",
        "add KUBE-6-LOOP-BACK fd00:10::c1,tcp:80,fd00:10::c1",
        "add KUBE-6-LOAD-BALANCER-SOURCE-CID 2001:db8:98::1,tcp:80,2001:db8::/64",
        "add KUBE-6-LOAD-BALANCER-SOURCE-IP 2001:db8:98::1,tcp:80,2001:db8:98::1",
        "add KUBE-6-IPVS-IPS fd00:ab34::20",
    ):
        assert member in text.splitlines(), member
    assert "10.0.0" not in text and "192.168" not in text
    assert r.dummy_addresses == ("fd00:ab34::20/128", "2001:db8:99::22/128", "2001:db8:98::1/128")


def test_every_rule_names_the_ipv6_sets_and_the_ipv6_loopback():
    text = rules().iptables_restore()
    named = set(re.findall(r"--match-set (\S+)", text))
    assert named and all(name.startswith("KUBE-6-") for name in named)
    assert "-A KUBE-SERVICES -s ::1/128 -j RETURN" in text.splitlines()
    assert "! -s fd00:10::/64 -j KUBE-MARK-MASQ" in text
    assert "127.0.0.0/8" not in text


@pytest.mark.parametrize(("version", "route_localnet"), [("1.19", True), ("1.20", True), ("1.21", False)])
def test_route_localnet_is_set_by_either_familys_proxier(version, route_localnet):
    """NewProxier sets route_localnet before it knows its family (S1.20): an IPv6-only node's kube-proxy up to 1.20
    sets it too."""
    assert ("net/ipv4/conf/all/route_localnet" in rules(version).sysctls) is route_localnet


def test_up_to_1_21_ipv6_node_ports_on_loopback_too():
    """The NodePort virtual servers take the node's loopback address until #101023 (1.22), ::1 as 127.0.0.1: the
    IPv6 proxier's GetLocalAddresses listed the local routes of IPv6 but link-local ones (S1.20 netlink_linux.go)."""
    assert "-A -t [::1]:30001 -s rr" in rules("1.21").ipvsadm_restore().splitlines()
    assert "[::1]" not in rules("1.22").ipvsadm_restore()
