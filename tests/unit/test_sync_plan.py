"""kube-proxy's sync as one pure plan (lab/render/kubeproxy/sync.py), table-driven per release era like
kube-proxy's proxier tests: a topology before and after a change, what install read of the node's kernel, and
what the plan writes, deletes and keeps, with kube-proxy's reasons. No root, no kernel: the plan is data."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lab.describe.load import load_scenario
from lab.describe.topology import Topology
from lab.render.kubeproxy.kernel_state import ConntrackEntry, KernelState, Reads, RealServerState
from lab.render.kubeproxy.sync import SyncPlan, listed_after_rules, reads, sync

REPO = Path(__file__).resolve().parents[2]
TOPOLOGIES = REPO / "topologies"
CLIENT, STATSD_0, STATSD_1, CLUSTER_IP = "10.244.1.2", "10.244.2.2", "10.244.2.3", "10.96.0.10"


def variant(name: str, mode: str, version: str) -> Topology:
    (topo,) = load_scenario(TOPOLOGIES / name, {"proxyMode": [mode], "kubeVersion": [version]}).variants
    return topo


def stepped(topo: Topology, probe: int, step: int = 0) -> Topology:
    """The topology a probe's `before:` step leaves (its workload change)."""
    change = topo.probes[probe].before[step]
    return replace(topo, pods=change.pods, services=change.services)


def udp_entry(reply_src: str, dst: str = CLUSTER_IP) -> ConntrackEntry:
    text = f"udp 17 29 src={CLIENT} dst={dst} sport=40125 dport=8125 src={reply_src} dst={CLIENT} sport=8125"
    return ConntrackEntry(text, CLIENT, dst, 8125, reply_src)


def statsd_sync(version: str, replicas: tuple[int, int], entries: tuple[ConntrackEntry, ...]) -> SyncPlan:
    """udp-scale-to-zero's statsd on node1 (the client's node), scaled from one replica count to another."""
    topo = variant("udp-scale-to-zero.yaml", "iptables", version)
    zero, two = stepped(topo, 1), stepped(topo, 3)  # scaled to 0; back up (statsd-1 then)
    scaled = {0: zero, 1: topo, 2: two}
    return sync(scaled[replicas[0]], scaled[replicas[1]], "node1", KernelState(conntrack=entries))


# (release, replicas before → after, the UDP entries node1 holds, the deletions' arguments, kube-proxy's why)
CONNTRACK_CASES = [
    pytest.param(
        "1.31",
        (1, 0),
        (),
        [
            ("-D", "--orig-dst", CLUSTER_IP, "--dst-nat", STATSD_0, "-p", "udp"),
        ],
        ["Deleted endpoint may have stale conntrack entries: default/statsd 10.244.2.2"],
        id="events<=1.31: the endpoint that left, by its DNAT (#59368); no listing",
    ),
    pytest.param(
        "1.31",
        (0, 2),
        (),
        [("-D", "--orig-dst", CLUSTER_IP, "-p", "udp")],
        ["Newly-active UDP service may have stale conntrack entries: default/statsd"],
        id="events<=1.31: a Service from none to some endpoints flushes its frontend (#48370)",
    ),
    pytest.param(
        "1.32",
        (1, 0),
        (udp_entry(STATSD_0),),
        [],
        ["default/statsd has no serving endpoint: its entries are left alone (#139628)"],
        id="reconciler 1.32: a Service scaled to zero is skipped, the entry stays (#139628)",
    ),
    pytest.param(
        "1.37",
        (1, 0),
        (udp_entry(STATSD_0),),
        [("-D", "-p", "udp", "--orig-dst", CLUSTER_IP, "--orig-port-dst", "8125", "--reply-src", STATSD_0)],
        ["default/statsd has no serving endpoint: its Service IPs' entries go (#139629)"],
        id="reconciler 1.37: scaled to zero, the ClusterIP's entries go (#139629)",
    ),
    pytest.param(
        "1.35",
        (0, 2),
        (udp_entry(STATSD_0), udp_entry(STATSD_1), udp_entry(STATSD_0, dst="10.96.0.99")),
        [("-D", "-p", "udp", "--orig-dst", CLUSTER_IP, "--orig-port-dst", "8125", "--reply-src", STATSD_0)],
        [],
        id="reconciler 1.35: an entry answered by no serving endpoint goes; a serving one's and another IP's stay",
    ),
]


@pytest.mark.parametrize(("version", "replicas", "entries", "deleted", "why"), CONNTRACK_CASES)
def test_conntrack_cleanup_per_era(version, replicas, entries, deleted, why):
    plan = statsd_sync(version, replicas, entries)
    assert [d.args for d in plan.conntrack] == deleted
    assert list(plan.cleanup.why) == why
    assert all(d.reason for d in plan.conntrack)


def test_the_reconciler_reads_conntrack_and_ipvs_its_servers():
    assert reads(variant("udp-scale-to-zero.yaml", "iptables", "1.31")) == Reads()
    assert reads(variant("udp-scale-to-zero.yaml", "nftables", "1.32")) == Reads(conntrack=True)
    assert reads(variant("udp-scale-to-zero.yaml", "ipvs", "1.31")) == Reads(ipvs=True)


def test_the_reconciler_decides_from_the_entries_listed_after_the_rules():
    # A datagram that slipped through un-NATed while the rules changed: listed only once they are written, and
    # deleted by the same sync, as kube-proxy's cleanup ends its syncProxyRules.
    planned = statsd_sync("1.35", (0, 2), ())
    assert planned.conntrack == ()
    stale = udp_entry(CLUSTER_IP)  # un-NATed: the reply would come from the ClusterIP itself
    listed = listed_after_rules(planned, KernelState(conntrack=(stale, udp_entry(STATSD_1))))
    assert [d.args for d in listed.conntrack] == [
        ("-D", "-p", "udp", "--orig-dst", CLUSTER_IP, "--orig-port-dst", "8125", "--reply-src", CLUSTER_IP)
    ]
    assert listed.dataplane == planned.dataplane and listed.cleanup == planned.cleanup


WEB = "10.96.0.10:80"
WEB_0, WEB_1 = "10.244.2.2:80", "10.244.2.3:80"


def server(address: str, weight: int, active: int, inactive: int, protocol: str = "TCP") -> RealServerState:
    return RealServerState(protocol, WEB, address, weight, active, inactive)


def web_sync(probe: int, servers: tuple[RealServerState, ...], version: str = "1.35") -> SyncPlan:
    """tcp-endpoint-terminating's web in ipvs mode on node1, from the topology before `probe`'s steps to after."""
    topo = variant("tcp-endpoint-terminating.yaml", "ipvs", version)
    terminating = stepped(topo, 1, 1)  # web-1 ready again, web-0 terminating
    before, after = {1: (stepped(topo, 1, 0), terminating), 3: (terminating, stepped(topo, 3))}[probe]
    return sync(before, after, "node1", KernelState(real_servers=servers))


# (probe whose steps sync, real servers ipvsadm -Ln listed, what graceful termination decides: address → delete?)
GRACEFUL_CASES = [
    pytest.param(
        1,
        (server(WEB_0, 1, 1, 0), server(WEB_1, 1, 0, 0)),
        {WEB_0: False},
        id="web-0 terminating with a connection: kept at weight 0",
    ),
    pytest.param(
        1,
        (server(WEB_0, 1, 0, 0), server(WEB_1, 1, 0, 0)),
        {WEB_0: True},
        id="web-0 terminating without connections: deleted",
    ),
    pytest.param(
        1,
        (server(WEB_0, 1, 0, 2), server(WEB_1, 1, 0, 0)),
        {WEB_0: False},
        id="inactive connections keep it too (ActiveConn + InActConn)",
    ),
    pytest.param(
        3,
        (server(WEB_0, 0, 0, 0), server(WEB_1, 1, 0, 0)),
        {WEB_0: True},
        id="left at weight 0 by an earlier sync, its connections gone: deleted at the next sync",
    ),
    pytest.param(
        3,
        (server(WEB_0, 0, 1, 0), server(WEB_1, 1, 3, 0)),
        {WEB_0: False},
        id="still connected at the next sync: kept; a serving real server is never touched",
    ),
]


@pytest.mark.parametrize(("probe", "servers", "decided"), GRACEFUL_CASES)
def test_ipvs_graceful_termination(probe, servers, decided):
    plan = web_sync(probe, servers)
    assert {d.server.address: d.delete for d in plan.real_servers} == decided
    for decision in plan.real_servers:
        assert decision.reason.startswith(f"ipvs graceful termination: real server {decision.server.address} of")
        if decision.delete:
            assert decision.ipvsadm_args == ("-d", "-t", WEB, "-r", decision.server.address)


def test_udp_real_servers_are_no_graceful_termination():
    """A UDP real server that leaves is deleted by the sync itself (sync_lines' `-d`), never left at weight 0."""
    topo = variant("udp-scale-to-zero.yaml", "ipvs", "1.31")
    listed = (RealServerState("UDP", f"{CLUSTER_IP}:8125", f"{STATSD_0}:8125", 1, 0, 1),)
    plan = sync(topo, stepped(topo, 1), "node1", KernelState(real_servers=listed))
    assert plan.real_servers == ()
    assert f"-d -u {CLUSTER_IP}:8125 -r {STATSD_0}:8125" in plan.dataplane.ipvs.splitlines()


def test_ipvs_addresses_and_set_members_by_their_differences():
    """kube-ipvs0: the missing address bound, a stale one unbound, a kept one untouched; the sets: a stale member
    of kube-proxy's set deleted, another set's member left, the missing ones added."""
    topo = variant("udp-scale-to-zero.yaml", "ipvs", "1.31")
    stale_member = "add KUBE-CLUSTER-IP 10.96.0.99,udp:53"
    state = KernelState(
        bound_addresses=("10.96.0.99/32",),
        set_members=(stale_member, "add SOMEONE-ELSES 10.0.0.1"),
    )
    plan = sync(topo, topo, "node1", state)
    assert plan.addresses_added == (f"{CLUSTER_IP}/32",)
    assert plan.addresses_deleted == ("10.96.0.99/32",)
    assert "del KUBE-CLUSTER-IP 10.96.0.99,udp:53" in plan.set_changes
    assert not any("SOMEONE-ELSES" in line for line in plan.set_changes)
    assert f"add KUBE-CLUSTER-IP {CLUSTER_IP},udp:8125" in plan.set_changes
    kept = sync(topo, topo, "node1", replace(state, bound_addresses=(f"{CLUSTER_IP}/32",)))
    assert kept.addresses_added == () and kept.addresses_deleted == ()


DUAL = Path(__file__).resolve().parents[1] / "fixtures" / "dualstack" / "dual-stack-nodeport.yaml"


def _dual_udp(version: str, endpoints: bool) -> Topology:
    """The dual-stack fixture's PreferDualStack Service `web` served over UDP, with its endpoints or without."""
    (topo,) = load_scenario(DUAL, {"proxyMode": ["iptables"], "kubeVersion": [version]}).variants
    web, *rest = topo.services
    ports = tuple(replace(p, protocol="UDP", endpoints=p.endpoints if endpoints else ()) for p in web.ports)
    return replace(topo, services=(replace(web, ports=ports), *rest))


def test_a_dual_stack_nodes_cleanup_is_each_proxiers_the_ipv6_one_with_its_family():
    plan = sync(_dual_udp("1.31", True), _dual_udp("1.31", False), "node2", KernelState())
    assert plan.cleanup.commands == (
        ("-D", "--orig-dst", "10.96.0.10", "--dst-nat", "10.244.1.2", "-p", "udp"),
        ("-D", "-p", "udp", "--dport", "30000", "--dst-nat", "10.244.1.2"),
        ("-D", "--orig-dst", "fd00:10:96::a", "--dst-nat", "fd00:10:244:1::2", "-p", "udp", "-f", "ipv6"),
        ("-D", "-p", "udp", "--dport", "30000", "--dst-nat", "fd00:10:244:1::2", "-f", "ipv6"),
    )
    # The reconciler (1.37, scaled to zero) deletes an IPv6 entry to the ClusterIP within its family.
    entry = ConntrackEntry("udp ...", "fd00:10:244:2::2", "fd00:10:96::a", 80, "fd00:10:244:1::2")
    plan = sync(_dual_udp("1.37", True), _dual_udp("1.37", False), "node2", KernelState(conntrack=(entry,)))
    assert [d.args for d in plan.conntrack] == [
        ("-D", "-p", "udp", "--orig-dst", "fd00:10:96::a", "--orig-port-dst", "80", "--reply-src", "fd00:10:244:1::2")
        + ("-f", "ipv6")
    ]


def test_each_ipvs_proxier_of_a_dual_stack_node_changes_only_its_own_family():
    """Dual-stack ipvs: the node's one kube-ipvs0 and one IPVS table hold both families'; each proxier unbinds only
    its own family's stale addresses (GetLocalAddresses keeps its family, S1.30), checks only its own family's real
    servers and changes only its own sets (KUBE-6-... for IPv6); link-local addresses are never read (install reads
    global ones)."""
    (topo,) = load_scenario(
        REPO / "tests/fixtures/dualstack/dual-stack-nodeport.yaml", {"proxyMode": ["ipvs"]}
    ).variants
    state = KernelState(
        bound_addresses=("10.96.0.99/32", "fd00:10:96::99/128", "fd00:10:96::a/128"),
        set_members=("add KUBE-CLUSTER-IP 10.96.0.99,tcp:80", "add KUBE-6-CLUSTER-IP fd00:10:96::99,tcp:80"),
        real_servers=(
            RealServerState("TCP", "10.96.0.10:80", "10.244.9.9:8080", 0, 0, 0),
            RealServerState("TCP", "[fd00:10:96::a]:80", "[fd00:10:244:9::9]:8080", 0, 0, 1),
        ),
    )
    plan = sync(topo, topo, "node2", state)
    v6 = plan.other_family
    assert v6 is not None and plan.dataplane.other_family == v6.dataplane and v6.dataplane.family == "IPv6"
    assert (plan.addresses_added, plan.addresses_deleted) == (("10.96.0.10/32",), ("10.96.0.99/32",))
    assert (v6.addresses_added, v6.addresses_deleted) == (("fd00:10:96::b/128",), ("fd00:10:96::99/128",))
    assert "del KUBE-CLUSTER-IP 10.96.0.99,tcp:80" in plan.set_changes
    assert not any("KUBE-6-" in line for line in plan.set_changes)
    assert "del KUBE-6-CLUSTER-IP fd00:10:96::99,tcp:80" in v6.set_changes
    assert [d.server.service for d in plan.real_servers] == ["10.96.0.10:80"]
    assert [(d.server.service, d.delete) for d in v6.real_servers] == [("[fd00:10:96::a]:80", False)]
    assert v6.conntrack == () and not v6.cleanup.why  # the conntrack cleanup is the plan's own, once
