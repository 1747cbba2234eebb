"""Packets the kernel drops on input without a rule are explained by its own input route lookup, asked in the
namespace the packet was last seen arriving in (topologies/martians.yaml)."""

from __future__ import annotations

import pytest
from support.host import REPO

from lab.api import run_variant
from lab.describe.load import load_scenario

MARTIANS = REPO / "tests" / "integration" / "topologies" / "martians.yaml"


@pytest.fixture(scope="module", params=["iptables", "nftables"])
def why(request) -> dict[str, str]:
    (topo,) = load_scenario(MARTIANS, {"proxyMode": [request.param]}).variants
    return {r.probe.name: r.observed.explanation for r in run_variant(topo).results}


def test_the_reverse_path_filter_is_named_with_the_route_back(why):
    said = why["reverse-path-filter"]
    assert said.startswith("last seen node1/eth0 in (192.168.56.100:"), said
    assert "node1's kernel refuses it on input: reverse-path filter (rp_filter=1 on eth0): " in said, said
    assert (
        "the route back to 192.168.56.100 leaves by cni0 (ip route get 192.168.56.11 from 192.168.56.100 iif eth0:"
        in said
    )


def test_a_packet_from_the_pods_own_address_is_a_martian_in_the_pod(why):
    said = why["own-address-as-source"]
    assert said.startswith("last seen node1/veth-web out (10.244.1.2:"), said
    assert "web's kernel refuses it on input: martian source: 10.244.1.2 is its own address" in said, said
    assert "without a rule dropping it" not in said
