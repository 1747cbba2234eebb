"""kube-proxy's IPv6 iptables proxier (ip6tables-restore text) against kube-proxy's own IPv6 tests.

TestDisableLocalhostNodePortsIPv6 and TestEnableLocalhostNodePortsIPv6 of pkg/proxy/iptables/proxier_test.go,
built with iptablestest.NewIPv6Fake(), a no-op local detector and localhost NodePorts off (on), read through the
code index in a copy of the file from the 1.27-1.30 era (its KUBE-FORWARD INVALID drop has no nfacct match: before
kubernetes#122812); the index holds kubernetes/kubernetes' own file only at an old commit, so the copy's
repository and commit are not named. Their golden payload is tests/golden/iptables/disable_localhost_nodeports_ipv6.txt,
compared as assertIPTablesRulesEqual compares.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.builders import ep, svc
from support.cases import FAKE
from support.goldens import assert_rules_equal, check_rule_jumps, golden

from lab.render.kubeproxy.iptables import render_iptables

V6_FAKE = replace(FAKE, family="IPv6", cluster_cidr=None, localhost_nodeports=False, nfacct_counters=False)
# An IPv6 fake node's interfaces: every address of both families, as GetNodeIPs reads them; the proxier takes its own.
NODE_IPS = ("2001:db8::1", "::1", "192.168.0.2", "127.0.0.1")


def v6_nodeport_service():
    return svc(
        "ns1",
        "svc1",
        "fd00:ab34::20",
        node_port=30001,
        external_policy="Local",
        endpoints=(ep("ff06::c1"), ep("ff06::c2", local=True)),
    )


@pytest.mark.parametrize("localhost_nodeports", [False, True])
def test_enable_and_disable_localhost_nodeports_ipv6(localhost_nodeports):
    """TestDisableLocalhostNodePortsIPv6 and TestEnableLocalhostNodePortsIPv6 expect the same payload: the flag
    changes nothing in the IPv6 proxier."""
    config = replace(V6_FAKE, localhost_nodeports=localhost_nodeports)
    rules = render_iptables([v6_nodeport_service()], config, NODE_IPS, "1.30")
    assert_rules_equal(golden("disable_localhost_nodeports_ipv6.txt"), rules.kube_proxy_payload)
    check_rule_jumps(rules.kube_proxy_payload)
    assert not rules.route_localnet


@pytest.mark.parametrize("version", ["1.20", "1.24", "1.26", "1.30", "1.31", "1.37"])
@pytest.mark.parametrize("localhost_nodeports", [True, False])
def test_the_ipv6_proxier_never_serves_nodeports_on_loopback(version, localhost_nodeports):
    """No route_localnet for IPv6: whatever the flag says, the NodePorts jump leaves ::1 out and nothing names
    127.0.0.0/8 (KUBE-FIREWALL's localnet rule, the 127/8 masquerade) in ip6tables."""
    config = replace(V6_FAKE, localhost_nodeports=localhost_nodeports, cluster_cidr="fd00:10::/64")
    rules = render_iptables([v6_nodeport_service()], config, NODE_IPS, version)
    text = rules.restore_text()
    assert "! -d ::1/128 -j KUBE-NODEPORTS" in text
    assert "127.0.0.0/8" not in text and not rules.route_localnet


def test_the_ipv6_proxier_takes_its_own_family_only():
    """A dual-stack Service's ServicePort as each proxier gets it: the IPv4 proxier programs none of the IPv6
    addresses, the IPv6 one none of the IPv4 ones; the local detector is the family's clusterCIDR."""
    both = svc(
        "ns1",
        "svc1",
        "fd00:ab34::20",
        node_port=30001,
        external_ips=("192.168.99.22", "2001:db8:99::22"),
        endpoints=(ep("10.180.0.1"), ep("ff06::c1")),
    )
    v6 = render_iptables([both], replace(V6_FAKE, cluster_cidr="fd00:10::/64"), NODE_IPS).restore_text()
    assert "2001:db8:99::22" in v6 and "192.168.99.22" not in v6
    assert "[ff06::c1]:80" in v6 and "10.180.0.1" not in v6
    assert "! -s fd00:10::/64 -j KUBE-MARK-MASQ" in v6
    v4 = render_iptables([replace(both, cluster_ip="172.30.0.41")], FAKE, NODE_IPS).restore_text()
    assert "2001:db8" not in v4 and "ff06::c1" not in v4
