"""kube-proxy's IPv6 ipvs proxier on the kernel, loaded and synced by install's own functions (lab.install.dataplane)
into the node of a small IPv6 network (tests/support/ipv6.py: hub is the node, a and b its pods on br0, c a client
routed over its own link). Needs ip_vs and dummy: it runs under `lab vm run` (marked `ipvs`).

What it shows: an IPv6 ClusterIP (its /128 on kube-ipvs0, an IPVS virtual server `[VIP]:80`) and a NodePort on the
node's IPv6 address answer c through IPVS from the pods, masqueraded to the node's address (c is outside the
cluster CIDR); the kernel's own listings (`ipvsadm -Ln`, `ip -o addr`, `ipset save`) read back as render wrote them,
so a sync with nothing new changes nothing; on a dual-stack node the two proxiers share kube-ipvs0 and the IPVS
table, and when the IPv6 Service goes, the IPv6 proxier's sync takes away its own address and virtual server and
leaves the IPv4 proxier's."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from support.host import REPO
from support.ipv6 import HUB_LAN, HUB_LINK, A, B, Ipv6Lab, ipv6_lab

from lab.api import run_variant
from lab.describe.load import load_scenario
from lab.doctor import kernel_has, skip_reason
from lab.install.dataplane import apply, load
from lab.install.echo import EchoServers, Listener
from lab.install.kernel_state import read_state
from lab.install.tools import run_command
from lab.probe.client import send
from lab.render.dataplane import ipvs_plane
from lab.render.kubeproxy.ipvs import render_ipvs
from lab.render.kubeproxy.kernel_state import Reads
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort
from lab.render.kubeproxy.sync import ipvs_proxier_sync

pytestmark = pytest.mark.ipvs

VIP, VIP4, NODE_PORT = "fd00:10:96::a", "10.96.0.10", 30080
NODE4 = "192.168.56.11"  # the IPv4 proxier's node IP (hub has none: its virtual servers are only listed)
CONFIG6 = ProxyConfig(family="IPv6", cluster_cidr="fd00:24:1::/64")  # a and b are the pods; c is outside
CONFIG4 = ProxyConfig(cluster_cidr="10.244.0.0/16")
NODE_IPS = (HUB_LAN, HUB_LINK, "::1")


def _web(cluster_ip: str, *endpoints: str) -> ServicePort:
    eps = tuple(Endpoint(ip, 8080, is_local=True) for ip in endpoints)
    return ServicePort("default", "web", "http", "TCP", 80, cluster_ip, node_port=NODE_PORT, endpoints=eps)


@pytest.fixture
def lab(host_unchanged) -> Iterator[Ipv6Lab]:
    for feature in ("ip_vs", "dummy"):
        if not kernel_has(feature):
            pytest.skip(skip_reason(feature))
    with ipv6_lab() as built:
        yield built


@pytest.fixture
def served(lab) -> Iterator[Ipv6Lab]:
    echo = EchoServers()
    try:
        for pod in ("a", "b"):
            echo.listen(Listener(pod, "hub", lab.namespaces[pod], 8080, "TCP", families=("IPv6",)))
        echo.start()
        yield lab
    finally:
        echo.close()


def _reached(lab: Ipv6Lab, address: str, port: int) -> set[str]:
    """The pods that answered c's connections to address:port, each answer's peer checked: the node's address on
    br0 (masqueraded: c is outside the cluster CIDR)."""
    backends = set()
    for _ in range(6):
        result = send(lab.namespaces["c"], address, port, "TCP", timeout=2.0)
        assert result.outcome == "delivered", result
        assert result.reply is not None and result.reply["peer"].startswith(f"[{HUB_LAN}]:"), result.reply
        backends.add(result.reply["backend"])
    return backends


def test_an_ipv6_cluster_ip_and_node_port_answer_through_ipvs(served):
    lab, hub = served, served.namespaces["hub"]
    rules = render_ipvs([_web(VIP, A, B)], CONFIG6, NODE_IPS, "1.31")
    assert load(hub, ipvs_plane(rules, "IPv6")) == ()
    assert _reached(lab, VIP, 80) == {"a", "b"}  # rr over both real servers
    assert _reached(lab, HUB_LINK, NODE_PORT) == {"a", "b"}
    # What the kernel lists reads back as render wrote it: a sync with nothing new changes nothing.
    state = read_state(hub, Reads(ipvs=True))
    assert state.bound_addresses == (f"{VIP}/128",)  # and not the dummy's link-local address
    assert {(s.service, s.address) for s in state.real_servers} == {
        (service, rs) for service in (f"[{VIP}]:80", f"[{HUB_LAN}]:{NODE_PORT}", f"[{HUB_LINK}]:{NODE_PORT}")
        for rs in (f"[{A}]:8080", f"[{B}]:8080")
    }  # fmt: skip
    plan = ipvs_proxier_sync(ipvs_plane(rules, "IPv6", rules), rules, rules, state)
    assert (plan.addresses_added, plan.addresses_deleted, plan.real_servers, plan.dataplane.ipvs) == ((), (), (), "")
    assert all(line.startswith("create ") for line in plan.set_changes), plan.set_changes


def test_a_dual_stack_nodes_proxiers_share_kube_ipvs0_and_each_removes_only_its_own(served):
    lab, hub = served, served.namespaces["hub"]
    v4 = render_ipvs([_web(VIP4, "10.244.1.2")], CONFIG4, (NODE4, "127.0.0.1"), "1.31")
    v6 = render_ipvs([_web(VIP, A, B)], CONFIG6, NODE_IPS, "1.31")
    assert load(hub, replace(ipvs_plane(v4, "IPv4"), other_family=ipvs_plane(v6, "IPv6"))) == ()
    state = read_state(hub, Reads(ipvs=True))
    assert set(state.bound_addresses) == {f"{VIP4}/32", f"{VIP}/128"}
    services = {s.service for s in state.real_servers}
    assert f"{VIP4}:80" in services and f"[{VIP}]:80" in services  # the second proxier did not clear the first's
    assert _reached(lab, VIP, 80) == {"a", "b"}
    # The IPv6 Service goes: each proxier syncs from what it sees; the IPv6 one unbinds its own address only.
    gone = render_ipvs([], CONFIG6, NODE_IPS, "1.31")
    plan4 = ipvs_proxier_sync(ipvs_plane(v4, "IPv4", v4), v4, v4, state)
    plan6 = ipvs_proxier_sync(ipvs_plane(gone, "IPv6", v6), v6, gone, state)
    assert (plan4.addresses_deleted, plan6.addresses_deleted) == ((), (f"{VIP}/128",))
    assert apply(hub, replace(plan4, other_family=plan6)) == ()
    after = read_state(hub, Reads(ipvs=True))
    assert after.bound_addresses == (f"{VIP4}/32",)
    assert {s.service for s in after.real_servers} == {f"{VIP4}:80", f"{NODE4}:{NODE_PORT}"}
    assert not any(line.startswith("add KUBE-6-CLUSTER-IP") for line in after.set_members)
    assert "add KUBE-CLUSTER-IP 10.96.0.10,tcp:80" in after.set_members
    listed = run_command(hub, ("ipvsadm", "-Ln"))
    assert f"[{VIP}]" not in listed and f"{VIP4}:80" in listed


def test_the_dual_stack_fixture_meets_its_expectations_in_ipvs_mode(host_unchanged):
    """tests/fixtures/dualstack/dual-stack-nodeport.yaml end to end through the pipeline in ipvs mode, every probe as
    expected (a NodePort over each family, an IPv6-only ClusterIP from a node). Until `lab run` builds IPv6
    scenarios, run_variant refuses it and this says why."""
    fixture = REPO / "tests" / "fixtures" / "dualstack" / "dual-stack-nodeport.yaml"
    (topo,) = load_scenario(fixture, {"proxyMode": ["ipvs"]}).variants
    run = run_variant(topo)
    if run.skipped:
        pytest.skip(run.skipped)
    assert [(r.probe.name, r.verdict.reasons) for r in run.results if not r.verdict.ok] == []
