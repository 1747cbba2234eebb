"""`lab run --what-if`'s pure parts (lab/judge/whatif.py, lab/describe/resolve/whatif.py): which changes a probe's
translation chain calls for, and how a change's results compare with the run as written."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lab.describe.errors import ScenarioError
from lab.describe.load import load_scenario
from lab.describe.resolve.whatif import ServiceField
from lab.describe.topology import Topology
from lab.judge.results import ProbeResult
from lab.judge.verdict import Verdict
from lab.judge.whatif import RESYNC, VARIANT, Tried, choose, differences, settings_of
from lab.probe.diagnosis import DNAT, HAIRPIN, MARKED, MASQUERADE, Diagnosis, Step
from lab.probe.observation import Observation
from lab.render.kubeproxy.because import (
    Setting,
    external_policy,
    hairpin_masquerade,
    kubelet_hairpin_mode,
    local_detector,
    masquerade_all,
    session_affinity,
    topology_hints,
)

REPO = Path(__file__).resolve().parents[2]
NODEPORT = REPO / "topologies" / "nodeport-source-ip.yaml"


def variant(**values: str) -> Topology:
    scenario = load_scenario(NODEPORT, {k: [v] for k, v in values.items()})
    (topo,) = scenario.variants
    return topo


@pytest.fixture(scope="module")
def cluster() -> Topology:
    return variant(proxyMode="iptables", externalTrafficPolicy="Cluster")


def probe(topo: Topology, name: str = "via-node-without-pod"):
    return next(p for p in topo.probes if p.name == name)


def chain(*steps: Step) -> Diagnosis:
    return Diagnosis(tuple(steps))


def step(kind: str, setting=None, where: str = "nat KUBE-POSTROUTING") -> Step:
    return Step(kind, "node2", where, "said", setting=setting)


def tried(topo: Topology, *steps: Step):
    return choose([chain(*steps)], topo, probe(topo))


def test_etp_cluster_behind_the_masquerade_is_tried_as_local_on_its_service_by_a_resync(cluster):
    setting = external_policy("default/openresty:http", "Cluster")
    changes, untried = tried(cluster, step(DNAT), step(MARKED, setting), step(MASQUERADE, setting))
    etp = changes[0]
    assert (etp.name, etp.value, etp.how) == ("externalTrafficPolicy", "Local", RESYNC)
    assert etp.service == ServiceField("default", "openresty", "externalTrafficPolicy", "Local")
    assert str(etp) == "externalTrafficPolicy: Local on Service default/openresty"
    assert [(c.name, c.value, c.how) for c in changes[1:]] == [
        ("proxyMode", "ipvs", VARIANT),
        ("proxyMode", "nftables", VARIANT),
    ]
    assert untried == ()


def test_a_rule_written_for_several_services_names_the_service_the_probe_reaches(cluster):
    # ipvs' ipset rules mark every Service's NodePorts at once: the Service is the one the probe is addressed to.
    setting = external_policy("", "Cluster", "the Services in ipset KUBE-NODE-PORT-TCP")
    changes, _ = tried(cluster, step(MASQUERADE, setting))
    assert changes[0].service == ServiceField("default", "openresty", "externalTrafficPolicy", "Local")


def test_kube_proxys_flags_are_tried_as_a_variant(cluster):
    changes, _ = tried(cluster, step(MARKED, masquerade_all()), step(MARKED, local_detector("10.244.0.0/16")))
    assert [(c.name, c.value, c.how) for c in changes[:2]] == [
        ("masqueradeAll", False, VARIANT),
        ("kubeProxyClusterCIDR", False, VARIANT),
    ]
    assert str(changes[0]) == "masqueradeAll: false"


def test_a_hairpin_through_the_bridge_tries_the_other_hairpin_modes_and_not_the_proxy_mode(cluster):
    changes, _ = tried(cluster, step(HAIRPIN, kubelet_hairpin_mode("hairpin-veth"), "cni0"))
    assert [(c.name, c.value) for c in changes] == [("hairpinMode", "promiscuous-bridge"), ("hairpinMode", "none")]


def test_session_affinity_is_tried_without(cluster):
    changes, _ = tried(cluster, step(DNAT, session_affinity("default/openresty:http", 10800)))
    assert (changes[0].name, changes[0].value, changes[0].how) == ("sessionAffinity", "None", RESYNC)


def test_what_nothing_the_lab_sets_changes_is_said_untried(cluster):
    hints = topology_hints("default/openresty:http", "zone", "a")
    changes, untried = tried(
        cluster,
        step(MARKED, hairpin_masquerade("default/openresty:http")),
        step(DNAT, hints),
        step(MASQUERADE, None, "nat FLANNEL-POSTRTG"),
    )
    assert [c.name for c in changes] == ["proxyMode", "proxyMode"]
    assert untried == (
        "kube-proxy's hairpin masquerade (always written) (Service default/openresty): nothing the lab sets changes it",
        "topology hints (zone) a (Service default/openresty): nothing the lab sets changes it",
        "the masquerade by nat FLANNEL-POSTRTG on node2: a rule no setting the lab knows wrote",
    )


def test_ip_masq_agents_masquerade_is_no_rule_of_kube_proxys(cluster):
    agent = Setting("nonMasqueradeCIDRs", "10.0.0.0/8", "ip-masq-agent", "what it leaves unmasqueraded")
    changes, untried = tried(cluster, step(MASQUERADE, agent, "nat IP-MASQ-AGENT"))
    assert changes == ()
    assert untried == ("nonMasqueradeCIDRs 10.0.0.0/8 (ip-masq-agent): nothing the lab sets changes it",)


def test_a_chain_without_steps_tries_nothing(cluster):
    assert tried(cluster) == ((), ())
    assert settings_of([Diagnosis()], cluster) == ()


def test_settings_of_every_connection_are_each_named_once(cluster):
    setting = external_policy("default/openresty:http", "Cluster")
    both = [chain(step(MASQUERADE, setting)), chain(step(MASQUERADE, setting))]
    assert [s.name for s in settings_of(both, cluster)] == ["externalTrafficPolicy", "proxyMode"]


def result(topo: Topology, name: str, outcome: str, source: str | None) -> ProbeResult:
    observed = Observation(outcome, backend="openresty" if source else None, source=source)
    return ProbeResult(topo, probe(topo, name), observed, Verdict(True))


def test_differences_name_the_outcome_flipped_and_the_sender_kept(cluster):
    baseline = (
        result(cluster, "via-node-without-pod", "delivered", "node2"),
        result(cluster, "via-node-with-pod", "delivered", "node1/cni0"),
        result(cluster, "cluster-ip-from-node3", "delivered", "node3"),
    )
    after = (
        result(cluster, "via-node-without-pod", "dropped", None),
        result(cluster, "via-node-with-pod", "delivered", "client"),
        result(cluster, "cluster-ip-from-node3", "delivered", "node3"),
    )
    changes, _ = tried(cluster, step(MASQUERADE, external_policy("default/openresty:http", "Cluster")))
    found = differences(baseline, Tried(changes[0], after))
    assert [(d.before.probe.name, d.what, d.kept) for d in found] == [
        ("via-node-without-pod", "outcome", False),
        ("via-node-with-pod", "source", True),
    ]


def test_a_source_changed_to_another_node_is_no_sender_kept(cluster):
    baseline = (result(cluster, "via-node-with-pod", "delivered", "node1/cni0"),)
    after = (
        replace(
            baseline[0],
            observed=Observation("delivered", backend="openresty", source="node1"),
        ),
    )
    changes, _ = tried(cluster, step(DNAT))
    (found,) = differences(baseline, Tried(changes[0], after))
    assert (found.what, found.kept) == ("source", False)


def test_a_service_field_is_set_in_the_variant_after_its_matrix():
    # The matrix sets externalTrafficPolicy Cluster on every NodePort Service; the what-if's field comes after it.
    changed = ServiceField("default", "openresty", "externalTrafficPolicy", "Local")
    matrix = {"proxyMode": ["iptables"], "externalTrafficPolicy": ["Cluster"]}
    scenario = load_scenario(NODEPORT, matrix, service_fields=(changed,))
    (topo,) = scenario.variants
    assert [s.external_policy for s in topo.services] == ["Local"]


def test_a_service_the_file_does_not_hold_is_refused_in_words():
    missing = ServiceField("default", "web", "externalTrafficPolicy", "Local")
    with pytest.raises(ScenarioError, match="no Service default/web to set externalTrafficPolicy on"):
        load_scenario(NODEPORT, {"externalTrafficPolicy": ["Cluster"]}, service_fields=(missing,))
