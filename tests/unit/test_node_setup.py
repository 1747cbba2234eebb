"""What render tells realize to set on each node before any rule: route_localnet where kube-proxy sets it."""

from __future__ import annotations

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
    assert {node: setup.sysctls for node, setup in setups(render(topo)).items()} == {
        "node1": expected,
        "node2": expected,
    }
