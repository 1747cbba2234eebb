"""kube-proxy's AllowServiceExternalIPs gate on the real kernel (KEP-5707, kubernetes#137293; 1.36+, on by default):
a client on the LAN reaches a Service through its external IP, node1's own address, port 80. With the gate on
kube-proxy DNATs it to the pod on node2; turned off, kube-proxy writes nothing for the external IP, so node1 takes
the connection itself and, with nothing listening on its port 80, refuses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.api import run_variant
from lab.describe.load import load_scenario

GATE = "AllowServiceExternalIPs"
SCENARIO = """\
name: external-ips-gate
cluster: {kubeVersion: "1.38", clusterCIDR: 10.244.0.0/16}
nodes:
  - {name: node1, ip: 192.168.56.11, podCIDR: 10.244.1.0/24}
  - {name: node2, ip: 192.168.56.12, podCIDR: 10.244.2.0/24}
externalHosts:
  - {name: client, ip: 192.168.56.100}
workload:
  - kind: Pod
    metadata: {name: nginx, labels: {app: nginx}}
    spec: {nodeName: node2, containers: [{name: nginx, ports: [{name: http, containerPort: 80}]}]}
  - kind: Service
    metadata: {name: nginx}
    spec:
      selector: {app: nginx}
      externalIPs: [192.168.56.11]
      ports: [{name: http, port: 80, targetPort: http}]
probes:
  - name: external-ip-from-client
    from: client
    to: {service: nginx, port: 80, via: externalIP}
    expect: {outcome: delivered, backend: nginx}
"""


@pytest.mark.parametrize("mode", ["iptables", pytest.param("nftables", marks=pytest.mark.nftables)])
@pytest.mark.parametrize(("gate", "outcome"), [(True, "delivered"), (False, "refused")])
def test_the_external_ip_is_served_only_with_the_gate_on(
    mode, gate, outcome, tmp_path: Path, host_unchanged, own_namespaces
):
    path = tmp_path / "external-ips-gate.yaml"
    path.write_text(SCENARIO)
    (topo,) = load_scenario(path, {"proxyMode": [mode], GATE: [gate]}).variants
    (result,) = run_variant(topo).results
    assert result.observed.outcome == outcome, result.observed
    assert own_namespaces() == []
