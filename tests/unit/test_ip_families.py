"""A Service's IP families as the API server decides them (lab/describe/families.py), case by case, and what a
scenario's Service gets or is refused for in the lab's IPv4 clusters."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.scenario import NODES, SERVICE_AND_PROBE
from test_model_input import edited, error_for, write

from lab.describe.families import Problem, ServiceFamilies, family_of, service_families, slice_address_problem
from lab.describe.load import load_scenario

V4: tuple = ("IPv4",)
V6: tuple = ("IPv6",)
DUAL: tuple = ("IPv4", "IPv6")
DUAL6: tuple = ("IPv6", "IPv4")


@pytest.mark.parametrize(
    ("policy", "families", "cluster_ip", "cluster_ips", "configured", "expected"),
    [
        # Nothing written: SingleStack, the cluster's first family.
        (None, [], None, [], V4, ServiceFamilies("SingleStack", V4)),
        (None, [], None, [], DUAL6, ServiceFamilies("SingleStack", V6)),
        # PreferDualStack takes both where the cluster has both, one where it has one.
        ("PreferDualStack", [], None, [], V4, ServiceFamilies("PreferDualStack", V4)),
        ("PreferDualStack", [], None, [], DUAL, ServiceFamilies("PreferDualStack", DUAL)),
        ("PreferDualStack", ["IPv6"], None, [], DUAL, ServiceFamilies("PreferDualStack", DUAL6)),
        ("RequireDualStack", [], None, [], DUAL6, ServiceFamilies("RequireDualStack", DUAL6)),
        # Families follow the clusterIPs written.
        (
            "RequireDualStack",
            [],
            "fd00::10",
            ["fd00::10", "10.96.0.1"],
            DUAL,
            ServiceFamilies("RequireDualStack", DUAL6),
        ),
        (None, [], "fd00::10", [], DUAL, ServiceFamilies("SingleStack", V6)),
        (None, ["IPv4"], "10.96.0.10", ["10.96.0.10"], V4, ServiceFamilies("SingleStack", V4)),
    ],
)
def test_families_the_api_server_gives(policy, families, cluster_ip, cluster_ips, configured, expected):
    assert service_families(policy, families, cluster_ip, cluster_ips, configured) == expected


@pytest.mark.parametrize(
    ("policy", "families", "cluster_ip", "cluster_ips", "configured", "field", "words"),
    [
        ("RequireDualStack", [], None, [], V4, ("ipFamilyPolicy",), "this cluster is not configured for dual-stack"),
        (None, ["IPv6"], None, [], V4, ("ipFamilies", 0), "IPv6 is not configured on this cluster"),
        ("PreferDualStack", ["IPv4", "IPv6"], None, [], V4, ("ipFamilies", 1), "IPv6 is not configured"),
        (None, [], "fd00::10", [], V4, ("clusterIPs", 0), "IPv6 is not configured on this cluster"),
        (None, ["IPv4", "IPv6"], None, [], DUAL, ("ipFamilyPolicy",), "when multiple IP families are specified"),
        (None, [], "10.96.0.10", ["10.96.0.10", "fd00::10"], DUAL, ("ipFamilyPolicy",), "multiple cluster IPs"),
        (None, [], "10.96.0.10", ["10.96.0.11"], V4, ("clusterIPs",), "first value must match `clusterIP`"),
        (None, [], None, ["10.96.0.11"], V4, ("clusterIPs",), "must be empty when `clusterIP` is not specified"),
        (None, ["IPv6"], "10.96.0.10", [], DUAL, ("clusterIPs", 0), "expected an IPv6 value as indicated by"),
        (None, ["IPv4"], "fd00::10", [], DUAL, ("clusterIPs", 0), "expected an IPv4 value as indicated by"),
        ("RequireDualStack", [], "10.96.0.10", ["10.96.0.10", "10.96.0.11"], DUAL, ("clusterIPs",), "one IP for each"),
        (None, ["IPv4", "IPv4"], None, [], DUAL, ("ipFamilies", 1), "duplicate value 'IPv4'"),
        (None, ["IPv5"], None, [], DUAL, ("ipFamilies", 0), "supported values are IPv4, IPv6"),
        (None, [], "10.96.0.10", ["10.96.0.10", "not-an-ip"], DUAL, ("clusterIPs", 1), "must be a valid IP address"),
    ],
)
def test_what_the_api_server_refuses(policy, families, cluster_ip, cluster_ips, configured, field, words):
    problem = service_families(policy, families, cluster_ip, cluster_ips, configured)
    assert isinstance(problem, Problem)
    assert problem.field == field
    assert words in problem.message


@pytest.mark.parametrize(
    ("address_type", "address", "words"),
    [
        ("IPv4", "10.244.1.5", None),
        ("IPv6", "fd00:10:244:1::5", None),
        ("IPv4", "fd00:10:244:1::5", "is an IPv6 address: a slice of addressType IPv4 holds IPv4 ones"),
        ("IPv6", "10.244.1.5", "is an IPv4 address: a slice of addressType IPv6 holds IPv6 ones"),
        ("IPv4", "10.244.1.0/24", "must be a valid IP address"),
    ],
)
def test_a_slice_holds_addresses_of_its_type(address_type, address, words):
    problem = slice_address_problem(address_type, address)
    assert problem is None if words is None else words in problem


def test_family_of_addresses_and_networks():
    texts = ("10.0.0.1", "fd00::/64", "::ffff:10.0.0.1", " 2001:db8::1 ", "fd00::1%eth0", "x")
    assert [family_of(t) for t in texts] == ["IPv4", "IPv6", "IPv4", None, None, None]


SERVICE = "name: t\n" + NODES + "workload:\n" + SERVICE_AND_PROBE + "    expect: [{outcome: refused}]\n"
SPEC = "      type: NodePort\n"


def test_a_prefer_dual_stack_service_is_single_stack_in_an_ipv4_cluster(tmp_path):
    text = edited(SPEC, SPEC + "      ipFamilyPolicy: PreferDualStack\n", SERVICE)
    (topo,) = load_scenario(write(tmp_path, text)).variants
    (svc,) = topo.services
    assert (svc.ip_family_policy, svc.ip_families) == ("PreferDualStack", ("IPv4",))


def test_an_ipv4_service_is_as_it_was(tmp_path):
    (topo,) = load_scenario(write(tmp_path, SERVICE)).variants
    (svc,) = topo.services
    assert (svc.ip_family_policy, svc.ip_families) == ("SingleStack", ("IPv4",))


@pytest.mark.parametrize(
    ("added", "field", "words"),
    [
        ("ipFamilyPolicy: RequireDualStack", "ipFamilyPolicy", "this cluster is not configured for dual-stack"),
        ("ipFamilies: [IPv6]", "ipFamilies[0]", "IPv6 is not configured on this cluster"),
        ("{clusterIP: 10.96.0.50, clusterIPs: [10.96.0.51]}", "clusterIPs", "first value must match `clusterIP`"),
    ],
)
def test_a_service_the_api_server_refuses_is_refused_at_its_field(tmp_path, added, field, words):
    if added.startswith("{"):
        text = edited(SPEC, SPEC + "".join(f"      {kv.strip()}\n" for kv in added[1:-1].split(",")), SERVICE)
        text = text.replace("clusterIP: 10", "clusterIP: '10").replace(".50\n", ".50'\n")
    else:
        text = edited(SPEC, SPEC + f"      {added}\n", SERVICE)
    error = error_for(tmp_path, text)
    assert field in str(error) and words in str(error)


DUAL_FILE = "tests/fixtures/dualstack/dual-stack-nodeport.yaml"
# One variant: the file's matrix (proxyMode) left out, as describe sees each variant alike.
DUAL_TEXT = Path(DUAL_FILE).read_text().replace("matrix:\n  proxyMode: [iptables, nftables]\n", "")


def test_a_dual_stack_cluster_gives_every_object_an_address_per_family():
    (topo,) = load_scenario(DUAL_FILE, {"proxyMode": ["iptables"]}).variants
    assert topo.cluster.families == DUAL
    node1 = topo.node("node1")
    assert (node1.ip_of("IPv6"), node1.pod_cidr_of("IPv6"), node1.secondary_bridge_ip) == (
        "fd00:56::11",
        "fd00:10:244:1::/64",
        "fd00:10:244:1::1",
    )
    assert topo.pod("web").ips == ("10.244.1.2", "fd00:10:244:1::2")
    web, web6 = topo.services
    assert (web.ip_families, web.cluster_ips) == (DUAL, ("10.96.0.10", "fd00:10:96::a"))
    assert [e.ip for e in web.ports[0].endpoints] == ["10.244.1.2", "fd00:10:244:1::2"]
    assert (web6.ip_families, web6.cluster_ips, [e.ip for e in web6.ports[0].endpoints]) == (
        V6,
        ("fd00:10:96::b",),
        ["fd00:10:244:1::2"],
    )
    assert {p.name: (p.dst_ip, p.family) for p in topo.probes} == {
        "nodeport-v4": ("192.168.56.12", "IPv4"),
        "nodeport-v6": ("fd00:56::12", "IPv6"),
        "clusterip-v4-from-pod": ("10.96.0.10", "IPv4"),
        "clusterip-v6-from-pod": ("fd00:10:96::a", "IPv6"),
        "clusterip-v6-only": ("fd00:10:96::b", "IPv6"),
    }
    # An expected source is the name's address of the probe's family.
    by_name = {p.name: p.expected.source_ip for p in topo.probes}
    assert (by_name["nodeport-v4"], by_name["nodeport-v6"]) == ("192.168.56.12", "fd00:56::12")
    assert (by_name["clusterip-v4-from-pod"], by_name["clusterip-v6-from-pod"]) == ("10.244.2.2", "fd00:10:244:2::2")
    assert topo.address_of("node1/eth0", "IPv6") == "fd00:56::11" and topo.address_of("node1/eth0") == "192.168.56.11"
    assert topo.address_of("node1") == "192.168.56.11" and topo.address_names()["fd00:56::11"] == "node1"
    assert topo.not_yet_built == ""  # lab run builds it (iptables and nftables modes)


def test_promiscuous_bridge_with_ipv6_is_refused_at_run_in_words(tmp_path):
    text = DUAL_TEXT.replace("  underlay:", "  hairpinMode: promiscuous-bridge\n  underlay:", 1)
    (topo,) = load_scenario(write(tmp_path, text)).variants
    assert "hairpinMode promiscuous-bridge with IPv6 is not built on the kernel yet" in topo.not_yet_built
    assert "IPv4 frames only" in topo.not_yet_built


def test_an_ipv6_only_cluster_describes(tmp_path):
    text = (
        DUAL_TEXT.replace("10.244.0.0/16,", "")
        .replace("10.96.0.0/16,", "")
        .replace("192.168.56.0/24,", "")
        .replace('"192.168.56.11,', '"')
        .replace('"192.168.56.12,', '"')
        .replace('"192.168.56.100,', '"')
        .replace('"10.244.1.0/24,', '"')
        .replace('"10.244.2.0/24,', '"')
        .replace("      ipFamilyPolicy: PreferDualStack\n", "")
    )
    text = (
        text[: text.index("probes:")]
        + "probes:\n  - {name: p, from: client, to: {service: web, port: http}, expect: {outcome: delivered}}\n"
    )
    (topo,) = load_scenario(write(tmp_path, text)).variants
    assert topo.cluster.families == V6
    assert (topo.services[0].cluster_ips, topo.probes[0].dst_ip) == (("fd00:10:96::a",), "fd00:10:96::a")
    assert topo.pod("web").ips == ("fd00:10:244:1::2",)


@pytest.mark.parametrize(
    ("old", "new", "field", "words"),
    [
        # The three networks give the same families in the same order.
        (
            "  serviceCIDR: 10.96.0.0/16,fd00:10:96::/112",
            "  serviceCIDR: 10.96.0.0/16",
            "cluster.serviceCIDR",
            "in that order",
        ),
        (
            "  underlay: 192.168.56.0/24,fd00:56::/64",
            "  underlay: fd00:56::/64,192.168.56.0/24",
            "cluster.underlay",
            "primary family first",
        ),
        (
            "  serviceCIDR: 10.96.0.0/16,fd00:10:96::/112",
            "  serviceCIDR: 10.96.0.0/16,fd00:10:244::/112",
            "cluster.serviceCIDR",
            "overlaps clusterCIDR",
        ),
        (
            "10.244.0.0/16,fd00:10:244::/56",
            "10.244.0.0/16,fd00:10:244::/56,fd00:11::/56",
            "cluster.clusterCIDR",
            "one value per family",
        ),
        (
            "10.244.0.0/16,fd00:10:244::/56",
            "10.244.0.0/16,10.245.0.0/16",
            "cluster.clusterCIDR",
            "one value per family",
        ),
        # A node gives an address and a pod block per family, each inside its family's network.
        ('ip: "192.168.56.11,fd00:56::11"', "ip: 192.168.56.11", "nodes[0].ip", "one value per family of the cluster"),
        (
            '"10.244.1.0/24,fd00:10:244:1::/64"',
            '"10.244.1.0/24,fd00:10:245:1::/64"',
            "nodes[0].podCIDR",
            "not inside clusterCIDR fd00:10:244::/56",
        ),
        (
            '"10.244.2.0/24,fd00:10:244:2::/64"',
            '"10.244.2.0/24,fd00:10:244:1::/64"',
            "nodes[1].podCIDR",
            "overlaps node1's",
        ),
        (
            '"10.244.1.0/24,fd00:10:244:1::/64"',
            '"10.244.1.0/24,fd00:10:244:1::/121"',
            "nodes[0].podCIDR",
            "at least as large",
        ),
        (
            '"192.168.56.11,fd00:56::11"',
            '"192.168.56.11,fd00:57::11"',
            "nodes[0].ip",
            "outside the underlay fd00:56::/64",
        ),
        ('"192.168.56.11,fd00:56::11"', '"192.168.56.11,fd00:56::1"', "nodes[0].ip", "reserved in fd00:56::/64"),
        ('"192.168.56.100,fd00:56::100"', '"192.168.56.100,fd00:56::12"', "externalHosts[0].ip", "already used"),
        # Services as the API server takes them in this cluster.
        (
            "      ipFamilies: [IPv6]\n",
            "      ipFamilies: [IPv6, IPv4]\n",
            "workload[2].spec.ipFamilyPolicy",
            "multiple IP families",
        ),
        (
            "      ipFamilies: [IPv6]\n",
            "      clusterIP: 10.0.0.5\n",
            "workload[2].spec.clusterIP",
            "outside serviceCIDR 10.96.0.0/16",
        ),
        # A probe in a family its target or source lacks.
        (
            "    to: {service: web6, port: http}",
            "    family: IPv4\n    to: {service: web6, port: http}",
            "probes[2].to",
            "no IPv4 clusterIP: its ipFamilies are IPv6",
        ),
        (
            '{name: client, ip: "192.168.56.100,fd00:56::100"}',
            "{name: client, ip: 192.168.56.100}",
            "probes[1].from",
            "client has no IPv6 address",
        ),
    ],
)
def test_dual_stack_mistakes_are_named(tmp_path, old, new, field, words):
    error = error_for(tmp_path, edited(old, new, DUAL_TEXT))
    assert field in str(error) and words in str(error), str(error)


def test_what_ipv6_cannot_build_yet_is_refused_by_lab_run_in_words(tmp_path, capsys):
    from lab import cli

    path = write(tmp_path, DUAL_TEXT.replace("  underlay:", "  hairpinMode: promiscuous-bridge\n  underlay:", 1))
    with pytest.raises(SystemExit) as done:
        cli.main(["run", str(path)])
    assert done.value.code == 2
    assert "promiscuous-bridge with IPv6 is not built on the kernel yet" in capsys.readouterr().err.replace("\n", " ")


def test_a_link_below_ipv6s_minimum_mtu_is_refused_in_a_cluster_with_ipv6(tmp_path):
    small = DUAL_TEXT.replace(
        'podCIDR: "10.244.2.0/24,fd00:10:244:2::/64"}', 'podCIDR: "10.244.2.0/24,fd00:10:244:2::/64", mtu: 1200}'
    )
    assert small != DUAL_TEXT
    error = error_for(tmp_path, small)
    assert error.field == "nodes[1].mtu" and "below IPv6's minimum link MTU, 1280" in error.message, str(error)
