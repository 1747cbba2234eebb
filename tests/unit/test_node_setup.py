"""What render tells realize to set on each node before any rule: route_localnet where kube-proxy sets it, and
kube-proxy's conntrack sysctls."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lab.describe.load import load_scenario
from lab.render.dataplane import ROUTE_LOCALNET, render, setups

HAIRPIN = Path(__file__).resolve().parents[2] / "topologies" / "hairpin.yaml"


@pytest.mark.parametrize(
    ("mode", "version", "route_localnet"),
    [
        ("iptables", "1.20", True),  # always until 1.23
        ("iptables", "1.31", True),  # from 1.24 with localhost NodePorts, which the default addresses allow
        ("ipvs", "1.20", True),  # NewProxier up to 1.20
        ("ipvs", "1.31", False),
        ("nftables", "1.31", False),  # no localhost NodePorts in nftables mode
    ],
)
def test_route_localnet_as_kube_proxy_sets_it(mode, version, route_localnet):
    (topo,) = load_scenario(
        HAIRPIN, {"proxyMode": [mode], "kubeVersion": [version], "hairpinMode": ["hairpin-veth"]}
    ).variants
    expected = ((ROUTE_LOCALNET, "1"),) if route_localnet else ()
    assert {node: dict(setup.sysctls).get(ROUTE_LOCALNET) for node, setup in setups(render(topo)).items()} == {
        "node1": dict(expected).get(ROUTE_LOCALNET),
        "node2": dict(expected).get(ROUTE_LOCALNET),
    }


@pytest.mark.parametrize("mode", ["iptables", "ipvs", "nftables"])
def test_conntrack_sysctls_as_kube_proxy_writes_them(mode, tmp_path):
    """Its defaults always (24 h established, 1 h close-wait); tcp_be_liberal and UDP timeouts when set."""
    (topo,) = load_scenario(
        HAIRPIN, {"proxyMode": [mode], "kubeVersion": ["1.31"], "hairpinMode": ["hairpin-veth"]}
    ).variants
    sysctls = dict(setups(render(topo))["node1"].sysctls)
    assert sysctls["net.netfilter.nf_conntrack_tcp_timeout_established"] == "86400"
    assert sysctls["net.netfilter.nf_conntrack_tcp_timeout_close_wait"] == "3600"
    assert "net.netfilter.nf_conntrack_tcp_be_liberal" not in sysctls
    liberal = replace(topo, cluster=replace(topo.cluster, tcp_be_liberal=True, udp_timeout=60))
    sysctls = dict(setups(render(liberal))["node1"].sysctls)
    assert sysctls["net.netfilter.nf_conntrack_tcp_be_liberal"] == "1"
    assert sysctls["net.netfilter.nf_conntrack_udp_timeout"] == "60"
