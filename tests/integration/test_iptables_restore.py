"""The kernel accepts what render_iptables() writes, in a throw-away network namespace only.

Each case loads restore_text() with iptables-restore inside a fresh, empty netns of the test's own
(support.netns, gone with the test) and reads it back with iptables-save there. iptables-save
prints options in its own order, so the check is per chain: the same chains, the same number of
rules and the same jump targets in the same order. The host's own netns is never touched.
One case per kube-proxy layout era (lab/render/kubeproxy/versions.py) loads that version's restore_text(),
which up to 1.26 includes kubelet's KUBE-MARK-DROP / KUBE-FIREWALL rules, and 1.19-1.20's
"-m physdev" externalIP rules (needs the kernel's xt_physdev).
"""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest
from support.goldens import jump_shape
from support.netns import FreshNetns

from lab.render.kubeproxy.iptables import IptablesRules, render_iptables
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort

NODE_IPS = ("192.168.0.2", "127.0.0.1", "192.168.1.2")
# nfacct objects do not exist in a fresh netns, so nfacct_counters stays off (the default).
CONFIG = ProxyConfig(cluster_cidr="10.0.0.0/8")


def _services() -> list[ServicePort]:
    local, remote = Endpoint("10.180.0.1", 80, is_local=True), Endpoint("10.180.1.1", 80, is_local=False)
    terminating = Endpoint("10.180.0.9", 80, is_local=True, ready=False, terminating=True)
    return [
        ServicePort("ns1", "clusterip", "p80", "TCP", 80, "172.30.0.41", endpoints=(local, remote)),
        ServicePort("ns1", "dns", "udp", "UDP", 53, "172.30.0.10", endpoints=(replace(remote, port=53),)),
        ServicePort("ns1", "sctp", "", "SCTP", 9, "172.30.0.11", endpoints=(replace(remote, port=9),)),
        ServicePort("ns1", "empty", "p80", "TCP", 80, "172.30.0.42", node_port=30001, external_ips=("192.168.99.1",)),
        ServicePort(
            "ns2", "lb-local", "p80", "TCP", 80, "172.30.0.43", node_port=30002, external_ips=("192.168.99.2",),
            load_balancer_ips=("1.2.3.4",), load_balancer_source_ranges=("192.168.0.0/24", "203.0.113.0/25"),
            external_policy="Local", health_check_node_port=32000, affinity_timeout=10800,
            endpoints=(remote, terminating),
        ),
        ServicePort(
            "ns2", "itp-local", "p80", "TCP", 80, "172.30.0.44", node_port=30003, load_balancer_ips=("5.6.7.8",),
            internal_policy="Local", endpoints=(remote,),
        ),
    ]  # fmt: skip


CASES = {
    "defaults": CONFIG,
    "no detector, masquerade-all, tcp_be_liberal": replace(
        CONFIG, cluster_cidr=None, masquerade_all=True, conntrack_tcp_be_liberal=True
    ),
    "nodeport addresses, no localhost nodeports": replace(
        CONFIG, node_port_addresses=("192.168.0.0/16",), localhost_nodeports=False, random_fully=False
    ),
}


# One version per era, at the era's edge where the shapes differ most from the next one.
ERA_CASES = {
    "A 1.19": ("1.19", None),
    "B 1.22": ("1.22", None),
    "C 1.24": ("1.24", None),
    "D 1.25": ("1.25", None),
    "E 1.27, kubelet IPTablesOwnershipCleanup off": ("1.27", False),
}


@pytest.fixture(autouse=True)
def _tools():
    missing = [
        tool for tool in ("unshare", "nsenter", "iptables-restore", "iptables-save") if shutil.which(tool) is None
    ]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (util-linux, iptables)")


@pytest.mark.parametrize("config", CASES.values(), ids=CASES.keys())
def test_restore_text_loads_into_a_fresh_netns(config, fresh_netns, host_unchanged):
    rules: IptablesRules = render_iptables(_services(), config, NODE_IPS)
    text = rules.restore_text()
    assert jump_shape(_load_in_fresh_netns(fresh_netns, text)) == jump_shape(text)


@pytest.mark.parametrize(("version", "kubelet_cleanup"), ERA_CASES.values(), ids=ERA_CASES.keys())
def test_each_era_loads_into_a_fresh_netns(version, kubelet_cleanup, fresh_netns, host_unchanged):
    rules = render_iptables(_services(), CONFIG, NODE_IPS, version, kubelet_iptables_cleanup=kubelet_cleanup)
    text = rules.restore_text()
    assert jump_shape(_load_in_fresh_netns(fresh_netns, text)) == jump_shape(text)


def _load_in_fresh_netns(netns: FreshNetns, text: str) -> str:
    """iptables-restore then iptables-save, both inside the test's own network namespace."""
    done = netns.run("iptables-restore && iptables-save", input=text)
    assert done.returncode == 0, f"iptables-restore refused the rules:\n{done.stderr}\n{text}"
    return done.stdout
