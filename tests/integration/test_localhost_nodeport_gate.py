"""kube-proxy 1.37's KubeProxyNFTablesLocalhostNodePorts gate on the real kernel, beyond what the catalogue's
localhost-nodeport.yaml judges (both answers there are `refused`; who refused differs).

Without a loopback CIDR in nodePortAddresses (`primary`, nftables mode's default) the gate makes kube-proxy reject
every localhost NodePort itself (`localhost-nodeport-reject-tcp`: ICMP port unreachable, and its named counter
counts it), where without the gate node1's kernel resets the SYN. With `primary, localhost` its userspace proxy is a
real listener on node1's 127.0.0.1:NODEPORT for as long as the variant stands, and UDP is counted as rejected.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lab.api import run_variant
from lab.describe.load import load_scenario
from lab.describe.topology import Topology
from lab.pipeline import standing

pytestmark = pytest.mark.nftables

SCENARIO = """\
name: localhost-nodeport-gate
cluster:
  clusterCIDR: 10.244.0.0/16
  serviceCIDR: 10.96.0.0/16
  proxyMode: nftables
  kubeVersion: "1.37"
  nodePortAddresses: ADDRESSES
nodes:
  - {name: node1, ip: 192.168.56.11, podCIDR: 10.244.1.0/24}
workload:
  - {kind: Pod, metadata: {name: registry, labels: {app: registry}},
     spec: {nodeName: node1, containers: [{name: registry, ports: [{containerPort: 5000}]}]}}
  - kind: Service
    metadata: {name: registry}
    spec: {type: NodePort, selector: {app: registry}, ports: [{port: 5000, targetPort: 5000, nodePort: 30500}]}
  - kind: Service
    metadata: {name: registry-udp}
    spec:
      type: NodePort
      selector: {app: registry}
      ports: [{port: 5000, targetPort: 5000, nodePort: 30501, protocol: UDP}]
probes:
  - name: tcp
    from: node1
    to: {address: 127.0.0.1, port: 30500}
    protocol: TCP
    expect: {outcome: refused}
"""
GATE = "KubeProxyNFTablesLocalhostNodePorts"


def variant(tmp_path: Path, addresses: str, gate: bool) -> Topology:
    path = tmp_path / "localhost-nodeport-gate.yaml"
    path.write_text(SCENARIO.replace("ADDRESSES", addresses))
    (topo,) = load_scenario(path, {GATE: [gate]}).variants
    return topo


def in_node(netns: str, *argv: str) -> str:
    return subprocess.run(["ip", "netns", "exec", netns, *argv], check=True, capture_output=True, text=True).stdout


def test_the_gate_without_a_loopback_cidr_rejects_what_the_kernel_would_reset(host_unchanged, tmp_path, own_namespaces):
    (without,) = run_variant(variant(tmp_path, "[primary]", False)).results
    (rejected,) = run_variant(variant(tmp_path, "[primary]", True)).results
    assert without.verdict.ok and rejected.verdict.ok, (without.observed, rejected.observed)
    assert "RST" in without.observed.explanation, without.observed.explanation
    assert "ICMP port unreachable" in rejected.observed.explanation, rejected.observed.explanation
    assert own_namespaces() == []


def test_the_proxy_listens_on_the_nodes_loopback_while_the_variant_stands(host_unchanged, tmp_path, own_namespaces):
    topo = variant(tmp_path, "[primary, localhost]", True)
    with standing(topo) as stood:
        netns = stood.realized.namespaces["node1"]
        assert "127.0.0.1:30500" in in_node(netns, "ss", "-Hltn")
        assert "30501" not in in_node(netns, "ss", "-Hlun")  # the proxy is TCP only
        subprocess.run(
            ["ip", "netns", "exec", netns, "python3", "-c",
             "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', 30501))"],
            check=True,
        )  # fmt: skip
        counter = in_node(netns, "nft", "list", "counter", "ip", "kube-proxy", "localhost-nodeport-rejected-udp")
        assert "packets 1 " in counter, counter
    assert own_namespaces() == []
