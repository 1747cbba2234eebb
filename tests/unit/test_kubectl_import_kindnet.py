"""`lab import` of a kindnet cluster builds kindnet's masquerade (its KIND-MASQ-AGENT chain) as the scenario's
ipMasqAgent, the same rules, where it built a bridge that masqueraded nothing a pod sends out of the cluster."""

from __future__ import annotations

from test_kubectl_import import FIXTURES, NODEPORT, imported, loaded, notes_about

from lab.describe.kubectl.scenario import _masquerade_agent

FLANNEL = [str(FIXTURES / "flannel" / "dump.yaml"), *NODEPORT[1:]]


def test_kindnets_masquerade_is_built_as_ip_masq_agent(tmp_path):
    result = imported(NODEPORT)
    assert result.scenario["ipMasqAgent"] == {"nonMasqueradeCIDRs": ["10.244.0.0/16"]}
    assert notes_about(result, "kindnet masquerades what leaves the pod network 10.244.0.0/16", "KIND-MASQ-AGENT")
    agent = loaded(tmp_path, result).masq_agent
    assert agent is not None
    assert agent.non_masquerade_cidrs == ("10.244.0.0/16",) and agent.nodes == ("node1", "node2", "node3")


def test_another_cni_gets_no_agent():
    assert "ipMasqAgent" not in imported(FLANNEL).scenario


def test_an_ipv6_pod_network_is_said_not_modelled():
    notes: list[str] = []
    both = _masquerade_agent({"IPv4": "10.244.0.0/16", "IPv6": "fd00:10:244::/56"}, notes)
    assert both == {"ipMasqAgent": {"nonMasqueradeCIDRs": ["10.244.0.0/16"]}}
    assert any("IPv6 out of fd00:10:244::/56: not modelled" in n for n in notes)
    assert _masquerade_agent({"IPv6": "fd00:10:244::/56"}, []) == {}
