"""kube-proxy's conntrack settings on a built node: what it writes to the node's netfilter sysctls on start, and
the INVALID drop rule it leaves out when nf_conntrack_tcp_be_liberal is set (1.29+, kubernetes#120412)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from support.host import REPO

from lab.describe.load import load_scenario
from lab.install.dataplane import FirstSync
from lab.install.tools import run_command
from lab.pipeline import tunnel_kind
from lab.realize.build import realize
from lab.realize.enter import in_netns
from lab.render.dataplane import render, setups

HAIRPIN = REPO / "topologies" / "hairpin.yaml"
INVALID_DROP = "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP"


def _node1(mode: str, version: str, liberal: bool) -> tuple[str, str]:
    """(nf_conntrack_tcp_be_liberal, the filter table) of node1 once kube-proxy's rules are in."""
    (topo,) = load_scenario(
        HAIRPIN, {"proxyMode": [mode], "kubeVersion": [version], "hairpinMode": ["hairpin-veth"]}
    ).variants
    topo = replace(topo, cluster=replace(topo.cluster, tcp_be_liberal=liberal))
    planes = render(topo)
    first = FirstSync(planes, topo)
    with realize(topo, setups(planes), tunnel_kind(topo), alongside=first.alongside) as realized:
        ns = realized.namespaces["node1"]
        value = in_netns(ns, lambda: Path("/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal").read_text().strip())
        rules = run_command(ns, ("iptables-save", "-t", "filter")) if mode == "iptables" else ""
        return value, rules


@pytest.mark.parametrize(
    ("version", "liberal", "drop"), [("1.28", False, True), ("1.29", False, True), ("1.29", True, False)]
)
def test_iptables_invalid_drop_follows_tcp_be_liberal(version, liberal, drop, host_unchanged):
    value, rules = _node1("iptables", version, liberal)
    assert value == ("1" if liberal else "0")
    assert (INVALID_DROP in rules) == drop, rules


def test_nftables_sets_the_sysctl_and_never_drops_invalid(host_unchanged):
    value, _ = _node1("nftables", "1.31", True)
    assert value == "1"
