"""IPv6-only and dual-stack clusters run end to end on the kernel, in iptables (nft and legacy backends) and
nftables modes: each node loads both proxiers' rules (ip6tables-restore text, the ip6 kube-proxy table), pods and
hosts hold an address and a default route per family, backends listen on each family, and the probes' evidence
names the IPv6 rules that acted and the ICMPv6 error a client got."""

from __future__ import annotations

import pytest
from support.host import REPO

from lab.api import run_variant
from lab.describe.load import load_scenario
from lab.judge.results import VariantRun

IPV6 = REPO / "tests" / "fixtures" / "ipv6" / "ipv6-nodeport-clusterip.yaml"
DUAL = REPO / "tests" / "fixtures" / "dualstack" / "dual-stack-nodeport.yaml"
ONE_FAMILY = REPO / "tests" / "fixtures" / "dualstack" / "dual-stack-one-family-endpoints.yaml"
UDP_DUAL = REPO / "tests" / "fixtures" / "dualstack" / "udp-scale-to-zero-dual-stack.yaml"
MODES = [("iptables", "nft"), ("iptables", "legacy"), ("nftables", "nft")]


def _run(path, mode: str, backend: str) -> VariantRun:
    (topo,) = load_scenario(path, {"proxyMode": [mode], "iptablesBackend": [backend]}).variants
    run = run_variant(topo)
    assert not run.skipped, run.skipped
    failed = {r.probe.name: r.verdict.reasons for r in run.results if not r.verdict.ok}
    assert not failed, failed
    return run


@pytest.mark.parametrize(("mode", "backend"), MODES)
def test_an_ipv6_only_cluster_runs(host_unchanged, mode, backend):
    run = _run(IPV6, mode, backend)
    results = {r.probe.name: r.observed for r in run.results}
    assert [r.probe.name for r in run.results] == [
        "nodeport-from-client",
        "externalip-from-client",
        "clusterip-from-pod",
        "no-endpoints-rejected",
    ]
    # The backend saw the node's and the pod's IPv6 addresses, named.
    assert (results["nodeport-from-client"].source, results["nodeport-from-client"].source_ip) == (
        "node2",
        "fd00:56::12",
    )
    assert results["clusterip-from-pod"].source_ip == "fd00:10:244:2::2"
    # The externalIP, routed to node1, masqueraded there to cni0's IPv6 address.
    assert results["externalip-from-client"].source_ip == "fd00:10:244:1::1"
    # The IPv6 proxier's DNAT, as the evidence names it.
    dnat = "[fd00:10:244:1::2]:8080"
    assert any(dnat in hit.rule for node, hit in results["clusterip-from-pod"].rules if node == "node2")
    # The reject of the Service without endpoints: the rule of the ip6 proxier, and ICMPv6 at the client.
    why = results["no-endpoints-rejected"].explanation
    assert "ICMPv6 port unreachable (type 1 code 4) from fd00:10:244:2::1 (node2/cni0)" in why, why
    rule = "icmp6-port-unreachable" if mode == "iptables" else "kube-proxy reject-chain: reject"
    assert "rejected on node2 by " in why and rule in why, why


@pytest.mark.parametrize(("mode", "backend"), MODES)
def test_a_dual_stack_cluster_runs_over_each_family(host_unchanged, mode, backend):
    run = _run(DUAL, mode, backend)
    seen = {r.probe.name: r.observed.source_ip for r in run.results}
    assert seen == {
        "nodeport-v4": "192.168.56.12",
        "nodeport-v6": "fd00:56::12",
        "clusterip-v6-only": "fd00:56::12",
        "clusterip-v4-from-pod": "10.244.2.2",
        "clusterip-v6-from-pod": "fd00:10:244:2::2",
    }
    # Each family's probe met its own proxier's rules: the DNAT to the pod's address of that family.
    rules = {r.probe.name: " ".join(hit.rule for _, hit in r.observed.rules) for r in run.results}
    assert "10.244.1.2:8080" in rules["clusterip-v4-from-pod"] and "fd00:" not in rules["clusterip-v4-from-pod"]
    assert "[fd00:10:244:1::2]:8080" in rules["clusterip-v6-from-pod"]


@pytest.mark.parametrize("version", ["1.31", "1.37"])
def test_a_dual_stack_nodes_sync_cleans_each_familys_udp_entries(host_unchanged, version):
    (topo,) = load_scenario(UDP_DUAL, {"proxyMode": ["iptables"], "kubeVersion": [version]}).variants
    run = run_variant(topo)
    outcomes = {r.probe.name: r.observed.outcome for r in run.results}
    failed = {r.probe.name: r.verdict.reasons for r in run.results if not r.verdict.ok}
    assert not failed, failed
    # Scaled to zero, the IPv6 flow's entry was deleted like the IPv4 one's: refused, not followed to the gone pod.
    assert outcomes["same-flow-after-scale-to-zero-v6"] == "refused"
    # Each family's entries were listed by the IPv6 proxier's cleanup too: what each sync said names them.
    said = " ".join(line for r in run.results for step in r.steps for line in step.said)
    assert "fd00:10:96::" in said, said


def _ipv6_first(text: str) -> str:
    """A dual-stack file with each per-family value's families swapped: IPv6 the primary (pod blocks /120, as the
    IPv4 secondary block must hold as many pods)."""
    for v4, v6 in (
        ("10.244.0.0/16", "fd00:10:244::/56"),
        ("10.96.0.0/16", "fd00:10:96::/112"),
        ("192.168.56.0/24", "fd00:56::/64"),
        ("192.168.56.11", "fd00:56::11"),
        ("192.168.56.12", "fd00:56::12"),
        ("192.168.56.100", "fd00:56::100"),
    ):
        text = text.replace(f"{v4},{v6}", f"{v6},{v4}")
    for n in (1, 2):
        text = text.replace(f"10.244.{n}.0/24,fd00:10:244:{n}::/64", f"fd00:10:244:{n}::/120,10.244.{n}.0/24")
    return text.replace("family: IPv6", "family: IPv4")  # the probes that took the secondary family still do


def test_a_dual_stack_cluster_with_ipv6_primary_runs(host_unchanged, tmp_path):
    path = tmp_path / "ipv6-first.yaml"
    path.write_text(_ipv6_first(DUAL.read_text()))
    (topo,) = load_scenario(path, {"proxyMode": ["iptables"]}).variants
    assert topo.cluster.families == ("IPv6", "IPv4")
    run = run_variant(topo)
    failed = {r.probe.name: r.verdict.reasons for r in run.results if not r.verdict.ok}
    assert not failed, failed
    # Without `family:` a probe takes the Service's primary family, IPv6 here (the probes' names are the file's).
    seen = {r.probe.name: r.observed.source_ip for r in run.results}
    assert (seen["nodeport-v4"], seen["nodeport-v6"]) == ("fd00:56::12", "192.168.56.12")
    assert (seen["clusterip-v4-from-pod"], seen["clusterip-v6-from-pod"]) == ("fd00:10:244:2::2", "10.244.2.2")


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_a_dual_stack_service_is_refused_over_the_family_without_a_ready_endpoint(host_unchanged, mode):
    run = _run(ONE_FAMILY, mode, "nft")
    outcomes = {r.probe.name: r.observed.outcome for r in run.results}
    assert outcomes == {
        "v4-slice-only-over-ipv4": "delivered",
        "v4-slice-only-over-ipv6": "refused",
        "v6-not-ready-over-ipv4": "delivered",
        "v6-not-ready-over-ipv6": "refused",
    }
    for result in run.results:
        if result.observed.outcome == "refused":
            why = result.observed.explanation
            assert "rejected on node1 by " in why and "ICMPv6 port unreachable (type 1 code 4)" in why, why


LB_IPV6 = REPO / "tests" / "fixtures" / "ipv6" / "ipv6-loadbalancer.yaml"
LB_DUAL = REPO / "tests" / "fixtures" / "dualstack" / "dual-stack-loadbalancer.yaml"


@pytest.mark.parametrize(("mode", "backend"), MODES)
def test_an_ipv6_load_balancer_ingress_filters_its_source_ranges(host_unchanged, mode, backend):
    run = _run(LB_IPV6, mode, backend)
    results = {r.probe.name: r.observed for r in run.results}
    assert {name: seen.outcome for name, seen in results.items()} == {
        "lb-allowed": "delivered",
        "lb-outside-source-ranges": "dropped",
        "lb-local-keeps-source": "delivered",
    }
    # Cluster: masqueraded by node1 (the gateway's next hop) on its way to node2's pod; Local: sent to node2,
    # which holds the endpoint, and the client's own address kept.
    assert results["lb-allowed"].source_ip == "fd00:56::11"
    assert results["lb-local-keeps-source"].source_ip == "fd00:56::100"
    # The stranger died in the IPv6 proxier's firewall, on the range as the release writes it (1.30 and later:
    # parsed, host bits cleared); the IPv4 range of the list is not the IPv6 proxier's.
    why = results["lb-outside-source-ranges"].explanation
    assert why.startswith("dropped on node1 by "), why
    if mode == "iptables":
        assert "KUBE-PROXY-FIREWALL" in why and "-d fd00:203::10/128" in why, why
    else:
        assert "ip6 saddr != fd00:56::100/120 drop" in why, why
    assert "192.0.2" not in " ".join(hit.rule for _, hit in results["lb-allowed"].rules)


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_a_dual_stack_load_balancer_filters_each_family_on_its_own_ranges(host_unchanged, mode):
    run = _run(LB_DUAL, mode, "nft")
    seen = {r.probe.name: (r.observed.outcome, r.observed.source_ip) for r in run.results}
    assert seen == {
        "lb-v6-allowed": ("delivered", "fd00:56::11"),
        "lb-v6-outside-source-ranges": ("dropped", None),
        # Only an IPv6 range is listed: the IPv4 proxier keeps none and leaves its VIP open, as kube-proxy does.
        "lb-v4-no-range-of-its-family": ("delivered", "192.168.56.11"),
        "lb-local-v6-keeps-source": ("delivered", "fd00:56::100"),
        "lb-local-v4-keeps-source": ("delivered", "192.168.56.100"),
    }


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_ipv6_nodeport_addresses_narrow_the_ipv6_proxier_only(host_unchanged, mode):
    run = _run(REPO / "tests" / "fixtures" / "dualstack" / "dual-stack-nodeport-addresses.yaml", mode, "nft")
    assert {r.probe.name: r.observed.outcome for r in run.results} == {
        "nodeport-v6-underlay-address": "delivered",
        # The IPv6 pod-bridge address is outside fd00:56::/64: no NodePort there, the node's own stack resets.
        "nodeport-v6-bridge-address-not-served": "refused",
        "nodeport-v4-bridge-address-served": "delivered",
    }
