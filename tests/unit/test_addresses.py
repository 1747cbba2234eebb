"""Addresses as Kubernetes parses them (lab/describe/ip.py), and every address field of a scenario parsed by it:
nothing but an address's characters reaches the rules lab loads as root."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from lab.describe.errors import ScenarioError
from lab.describe.ip import AddressError, canonical_ip, canonical_network, host_problem, parse_ip
from lab.describe.load import load_scenario

REPO = Path(__file__).resolve().parents[2]
# What reached rule text before: Python's ipaddress keeps anything after % in the address and in its str().
HOSTILE_ZONES = ["%eth0", "%x\n-A INPUT -j ACCEPT", '%x";include "/etc/shadow', "%$(id)", "%"]


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("10.96.0.1", "10.96.0.1"),
        ("010.096.000.001", "10.96.0.1"),  # ParseIPSloppy: leading zeros are decimal, never octal
        ("::ffff:10.96.0.1", "10.96.0.1"),  # IPv4-mapped: the IPv4 address (Go's To4)
        ("::ffff:010.1.1.1", "10.1.1.1"),
        ("FD00:10:96:0:0::A", "fd00:10:96::a"),
    ],
)
def test_an_address_kubernetes_takes_comes_back_canonical(text, canonical):
    assert canonical_ip(text) == canonical


@pytest.mark.parametrize(
    ("text", "words"),
    [
        *[(f"fd00::1{zone}", "zone") for zone in HOSTILE_ZONES],
        (" 10.0.0.1", "space around"),
        ("10.0.0.1\n", "space around"),
        ("١٠.0.0.1", "expected an IP address"),  # Arabic-Indic digits: str.isdigit() says yes, Go says no
        ("１0.0.0.1", "expected an IP address"),  # a fullwidth digit
        ("10.0.0.256", "expected an IP address"),
        ("10.0.0", "expected an IP address"),
        ("+10.0.0.1", "expected an IP address"),
        ("", "expected an IP address"),
    ],
)
def test_an_address_kubernetes_refuses_is_refused_in_words(text, words):
    with pytest.raises(AddressError, match=words):
        canonical_ip(text)


@pytest.mark.parametrize(
    ("text", "exact", "result"),
    [
        ("10.244.0.0/16", True, "10.244.0.0/16"),
        ("10.244.1.5/16", False, "10.244.0.0/16"),  # ParseCIDRSloppy's network: the host bits masked
        ("010.244.0.0/016", True, "10.244.0.0/16"),
        ("fd00::%eth0/64", False, "zone"),
        ("fd00::/64%eth0", False, "expected a network"),
        ("10.0.0.0/33", False, "at most 32"),
        ("10.0.0.0/-1", False, "expected a network"),
        ("10.0.0.0", False, "expected a network"),
        ("10.244.1.5/16", True, "host bits set: did you mean 10.244.0.0/16"),
        ("::ffff:10.0.0.0/104", False, "IPv4-mapped"),
    ],
)
def test_networks_as_parse_cidr_sloppy_reads_them(text, exact, result):
    if result[0].isdigit():
        assert canonical_network(text, exact) == result
    else:
        with pytest.raises(AddressError, match=result):
            canonical_network(text, exact)


@pytest.mark.parametrize(
    ("address", "kubernetes_words"),
    [
        ("0.0.0.0", "may not be unspecified (0.0.0.0)"),
        ("::", "may not be unspecified (::)"),
        ("127.0.0.1", "may not be in the loopback range"),
        ("::1", "may not be in the loopback range"),
        ("169.254.169.254", "may not be in the link-local range"),
        ("fe80::1", "may not be in the link-local range"),
        ("224.0.0.18", "may not be in the link-local multicast range"),
        ("ff02::1", "may not be in the link-local multicast range"),
        ("239.1.2.3", "multicast address: the lab models unicast hosts only"),  # the API server takes it
        ("255.255.255.255", "broadcast"),  # so does the API server
    ],
)
def test_special_addresses_in_the_api_servers_words_where_it_refuses_them(address, kubernetes_words):
    assert kubernetes_words in (host_problem(parse_ip(address), kubernetes_checks=True) or "")
    assert host_problem(parse_ip(address), kubernetes_checks=False) is not None
    assert host_problem(parse_ip("203.0.113.7"), kubernetes_checks=True) is None


def _leaves(data: object, path: tuple = ()) -> Iterator[tuple[tuple, str]]:
    """Every text value of a scenario that is, or holds, an address or a network (not expectations or prose)."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key not in ("expect", "why", "description", "name", "from"):
                yield from _leaves(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _leaves(value, (*path, i))
    elif isinstance(data, str) and any(_is_address(part.split("/")[0]) for part in data.split(",")):
        yield path, data


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip())
    except ValueError:
        return False
    return True


def _set(data: object, path: tuple, value: str) -> None:
    for key in path[:-1]:
        data = data[key]  # type: ignore[index]
    data[path[-1]] = value  # type: ignore[index]


def _hostile(value: str) -> str:
    """The value with a zone after its IPv6 address (or, for IPv4, a newline and a rule after it)."""
    address, slash, prefix = value.split(",")[-1].strip().partition("/")
    tail = "%x\n-A INPUT -j ACCEPT" if ":" in address else "\n-A INPUT -j ACCEPT"
    return value.replace(address + slash + prefix, address + tail + slash + prefix)


# Between them, every address field a scenario has: nodes, networks, hosts, routes, load balancers, the egress
# gateway, ip-masq-agent, clusterIP(s), externalIPs, ingress IPs, source ranges, slices, pods, nodePortAddresses,
# probes' addresses and spoofed sources.
SCENARIOS = [
    "topologies/dual-stack-service-paths.yaml",
    "topologies/lb-loopback-internal-lb.yaml",
    "topologies/metallb-bgp-ipip.yaml",
    "topologies/ipv6-crafts-icmpv6.yaml",
    "topologies/endpoint-shared-ip.yaml",
    "tests/fixtures/dualstack/dual-stack-nodeport-addresses.yaml",
    "tests/fixtures/dualstack/dual-stack-loadbalancer.yaml",
    "tests/fixtures/diff/many-features.yaml",
]


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_address_field_of_a_scenario_refuses_a_value_with_more_than_an_address(tmp_path, name):
    original = yaml.safe_load((REPO / name).read_text())
    leaves = list(_leaves(original))
    assert len(leaves) > 5  # the scenario has addresses to try
    for path, value in leaves:
        data = yaml.safe_load((REPO / name).read_text())
        _set(data, path, _hostile(value))
        file = tmp_path / Path(name).name
        file.write_text(yaml.safe_dump(data))
        with pytest.raises(ScenarioError) as info:
            load_scenario(file)
        assert "INPUT" not in str(info.value).split(": ", 1)[0], path  # the field is named, the value quoted after


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("externalIPs", "['127.0.0.1']", "may not be in the loopback range"),
        ("externalIPs", "['0.0.0.0']", "may not be unspecified"),
        ("externalIPs", "['010.020.030.040']", None),  # legacy leading zeros: taken, read as decimal
        ("clusterIP", "10.96.0.0", "first address, which the API server never allocates"),
        ("clusterIP", "10.96.255.255", "broadcast address, which the API server never allocates"),
        ("clusterIP", "'010.096.000.050'", None),
        ("loadBalancerSourceRanges", "[' 10.0.0.0/8 ']", None),  # ValidateService trims space here only
    ],
)
def test_service_address_fields_follow_the_api_servers_rules(tmp_path, field, value, words):
    from support.scenario import BASE, write

    text = BASE.replace("      type: NodePort\n", f"      type: NodePort\n      {field}: {value}\n", 1)
    if words is None:
        (topo,) = load_scenario(write(tmp_path, text)).variants
        (svc,) = topo.services
        assert "0" not in (svc.cluster_ip[0], *(ip[0] for ip in svc.external_ips))  # canonical: no leading zero
        assert all(r == r.strip() for r in svc.load_balancer_source_ranges)
    else:
        with pytest.raises(ScenarioError, match=words):
            load_scenario(write(tmp_path, text))
