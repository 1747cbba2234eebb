"""A rule's reason found where its writer writes in the other iptables backend than kube-proxy's: ip-masq-agent
in iptables-legacy (cluster.tools.host.iptablesBackend) beside kube-proxy's iptables-nft. The node's evidence
names the rule with its backend (its counters are read apart), and the probe's diagnosis names the setting the
rule was written for, on the kernel."""

from __future__ import annotations

import pytest

from lab.api import run_variant
from lab.describe.load import load_scenario

SCENARIO = """\
name: masq-agent-in-legacy
cluster: {clusterCIDR: 10.244.0.0/16, serviceCIDR: 10.96.0.0/16, underlay: 192.168.56.0/24, proxyMode: iptables,
          kubeVersion: "1.35", iptablesBackend: nft, tools: {host: {iptablesBackend: legacy}}}
nodes:
  - {name: node1, ip: 192.168.56.11, podCIDR: 10.244.1.0/24}
externalHosts:
  - {name: registry, ip: 192.168.56.100}
ipMasqAgent:
  nonMasqueradeCIDRs: [10.244.0.0/16]
workload:
  - kind: Pod
    metadata: {name: app}
    spec: {nodeName: node1, containers: [{name: app}]}
  # The outside host as a selector-less Service's endpoint: it then listens on 5000.
  - kind: Service
    metadata: {name: outside}
    spec: {ports: [{name: http, port: 80, targetPort: 5000}]}
  - apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata: {name: outside-1, labels: {kubernetes.io/service-name: outside}}
    addressType: IPv4
    ports: [{name: http, port: 5000, protocol: TCP}]
    endpoints: [{addresses: [192.168.56.100]}]
probes:
  - name: to-the-registry
    from: app
    to: {address: 192.168.56.100, port: 5000}
    expect: {outcome: delivered, backend: registry, source: node1}
"""


def test_ip_masq_agent_in_the_other_backend_is_named_with_its_reason(tmp_path, host_unchanged, own_namespaces):
    path = tmp_path / "masq-agent-in-legacy.yaml"
    path.write_text(SCENARIO)
    (topo,) = load_scenario(path).variants
    run = run_variant(topo)
    if run.skipped:
        pytest.skip(run.skipped)
    (result,) = run.results
    observed = result.observed
    assert observed.outcome == "delivered", observed
    masquerades = [step for step in observed.diagnosis.steps if step.kind == "masquerade"]
    assert [step.where for step in masquerades] == ["iptables-legacy nat IP-MASQ-AGENT"], observed.diagnosis
    assert observed.diagnosis.summary() == "masqueraded on node1: nonMasqueradeCIDRs 10.244.0.0/16"
    assert own_namespaces() == []
