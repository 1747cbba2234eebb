"""kube-proxy's port opener (1.19-1.23): which sockets it holds on a node, per release, protocol and
--nodeport-addresses. What the kernel does with them is tests/integration/topologies/port-opener.yaml."""

from __future__ import annotations

import pytest
from support.builders import svc

from lab.render.kubeproxy.ports import HeldPort, held_ports
from lab.render.kubeproxy.service import ProxyConfig
from lab.render.kubeproxy.versions import Release

NODE = ("192.168.56.11", "127.0.0.1")
DEFAULTS = ProxyConfig()


def held(services, version="1.22", config=DEFAULTS, addresses=NODE):
    return held_ports(services, config, addresses, Release.of(version))


@pytest.mark.parametrize("version", ["1.19", "1.21", "1.22", "1.23"])
def test_every_node_port_is_held_on_every_address_up_to_1_23(version):
    services = [
        svc("ns", "web", "10.96.0.10", node_port=30080),
        svc("ns", "dns", "10.96.0.11", 53, "", "UDP", node_port=30053),
    ]
    assert held(services, version) == (
        HeldPort("TCP", "", 30080, "nodePort for ns/web:p80"),
        HeldPort("UDP", "", 30053, "nodePort for ns/dns"),
    )


@pytest.mark.parametrize("version", ["1.24", "1.31", "1.35"])
def test_no_port_is_held_from_1_24(version):
    assert held([svc("ns", "web", "10.96.0.10", node_port=30080)], version) == ()


def test_sctp_and_cluster_ip_only_ports_are_not_held():
    services = [svc("ns", "s", "10.96.0.10", node_port=30132, protocol="SCTP"), svc("ns", "c", "10.96.0.11")]
    assert held(services) == ()


def test_node_port_addresses_pick_the_node_addresses_inside_them():
    config = ProxyConfig(node_port_addresses=("192.168.56.0/24", "127.0.0.0/8"))
    (lan, loopback) = held([svc("ns", "web", "10.96.0.10", node_port=30080)], config=config)
    assert (lan.address, loopback.address) == ("192.168.56.11", "127.0.0.1")
    everywhere = ProxyConfig(node_port_addresses=("192.168.56.0/24", "0.0.0.0/0"))
    assert [p.address for p in held([svc("ns", "web", "10.96.0.10", node_port=30080)], config=everywhere)] == [""]


def test_an_external_ip_is_held_only_where_it_is_a_node_address():
    services = [svc("ns", "web", "10.96.0.10", 8080, external_ips=("192.168.56.11", "203.0.113.9"))]
    assert held(services) == (HeldPort("TCP", "192.168.56.11", 8080, "externalIP for ns/web:p80"),)


def test_a_wildcard_socket_covers_every_address_a_bound_one_only_its_own():
    wildcard, bound = HeldPort("UDP", "", 30053, "d"), HeldPort("UDP", "192.168.56.11", 30053, "d")
    assert wildcard.covers("UDP", "10.0.0.1", 30053) and not wildcard.covers("TCP", "10.0.0.1", 30053)
    assert bound.covers("UDP", "192.168.56.11", 30053) and not bound.covers("UDP", "127.0.0.1", 30053)
