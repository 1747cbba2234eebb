"""kube-proxy's IPv6 ipvs proxier, render only (describe refuses ipvs with IPv6 until it is wired and built): IPv6
virtual servers, inet6 ipsets, /128 addresses on kube-ipvs0, and nothing of IPv4's loopback or route_localnet.
No IPv6 ipvs golden of kube-proxy is in the index: these are the formats ipvsadm and ipset take (docs/
kubeproxy-versions.md, "The IPv6 proxiers")."""

from __future__ import annotations

from lab.render.kubeproxy.ipvs import render_ipvs
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort

NODE_IPS = ("2001:db8::1", "::1", "192.168.0.2", "127.0.0.1")


def rules(version: str = "1.31"):
    port = ServicePort(
        "ns1",
        "svc1",
        "p80",
        "TCP",
        80,
        "fd00:ab34::20",
        node_port=30001,
        external_ips=("2001:db8:99::22", "192.168.99.22"),
        endpoints=(Endpoint("ff06::c1", 80, False), Endpoint("10.0.0.1", 80, True)),
    )
    return render_ipvs([port], ProxyConfig(family="IPv6", cluster_cidr="fd00:10::/64"), NODE_IPS, version)


def test_ipv6_virtual_servers_in_brackets_with_ipv6_real_servers_only():
    assert rules().ipvsadm_restore().splitlines() == [
        "-A -t [fd00:ab34::20]:80 -s rr",
        "-a -t [fd00:ab34::20]:80 -r [ff06::c1]:80 -m -w 1",
        "-A -t [2001:db8:99::22]:80 -s rr",
        "-a -t [2001:db8:99::22]:80 -r [ff06::c1]:80 -m -w 1",
        "-A -t [2001:db8::1]:30001 -s rr",
        "-a -t [2001:db8::1]:30001 -r [ff06::c1]:80 -m -w 1",
    ]


def test_inet6_sets_and_128_addresses():
    r = rules()
    creates = [line for line in r.ipset_restore().splitlines() if line.startswith("create") and "hash:" in line]
    assert creates and all(" family inet6 " in line for line in creates)
    assert "add KUBE-CLUSTER-IP fd00:ab34::20,tcp:80" in r.ipset_restore()
    assert r.dummy_addresses == ("fd00:ab34::20/128", "2001:db8:99::22/128")


def test_nothing_of_ipv4s_loopback():
    for version in ("1.20", "1.26", "1.31"):
        r = rules(version)
        assert "127.0.0.0/8" not in r.iptables_restore()
        assert "net/ipv4/conf/all/route_localnet" not in r.sysctls
        assert "192.168" not in r.ipvsadm_restore() and "10.0.0.1" not in r.ipvsadm_restore()
