"""kubelet's hairpin modes as the kernel holds them on a node: cni0 up in every mode, promiscuous and guarded by
kubelet's KUBE-DEDUP chain in promiscuous-bridge, hairpin on the pods' ports only in hairpin-veth. (What the
modes do to traffic is proven by topologies/hairpin.yaml.)"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from support.host import REPO

from lab.describe.load import load_scenario
from lab.realize.build import realize
from lab.render.dataplane import render, setups

HAIRPIN = REPO / "topologies" / "hairpin.yaml"


def _in(ns: str, *argv: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, check=True).stdout


def _link(ns: str, ifname: str) -> dict:
    (link,) = json.loads(_in(ns, "ip", "-d", "-j", "link", "show", ifname))
    return link


@pytest.mark.parametrize("mode", ["hairpin-veth", "promiscuous-bridge", "none"])
def test_each_hairpin_mode_on_the_node(host_unchanged, mode):
    (topo,) = load_scenario(HAIRPIN, {"proxyMode": ["iptables"], "hairpinMode": [mode]}).variants
    with realize(topo, setups(render(topo)), tunnel="") as realized:
        node1 = realized.namespaces["node1"]
        cni0 = _link(node1, "cni0")
        assert "UP" in cni0["flags"], cni0["flags"]
        assert ("PROMISC" in cni0["flags"]) == (mode == "promiscuous-bridge"), cni0["flags"]
        port = _link(node1, realized.pod_ports["web"])
        assert port["linkinfo"]["info_slave_data"]["hairpin"] == (mode == "hairpin-veth")
        dedup = _in(node1, "ebtables-save")
        if mode != "promiscuous-bridge":
            assert "KUBE-DEDUP" not in dedup
            return
        assert "-A OUTPUT -j KUBE-DEDUP" in dedup
        rules = re.findall(r"-A KUBE-DEDUP -p IPv4 -s (\S+) -o veth\+ --ip-src (\S+) -j (\S+)", dedup)
        assert [(source, verdict) for _, source, verdict in rules] == [
            ("10.244.1.1", "ACCEPT"),
            ("10.244.1.0/24", "DROP"),
        ]
        # The MAC cni0 has with its ports attached (a bridge takes its lowest port's), as kubelet reads it;
        # ebtables may print it without leading zeros.
        assert {_octets(mac) for mac, _, _ in rules} == {_octets(cni0["address"])}


def _octets(mac: str) -> tuple[int, ...]:
    return tuple(int(octet, 16) for octet in mac.split(":"))
