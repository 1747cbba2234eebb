"""The Python API's pure parts: a variant as the matrix, a probe or step as a scenario entry, describe's errors
said as the caller wrote them, and the actors' names and addresses."""

from __future__ import annotations

import pytest

from lab.api.cluster import addresses, pod_aliases
from lab.api.requests import LabError, in_words, load_error, probe_entry, step_carrier, variant_matrix
from lab.describe.errors import ScenarioError, ScenarioErrors
from lab.describe.load import load_scenario
from lab.selection import CATALOGUE


def test_a_variant_is_one_value_per_axis_as_the_command_line_spells_it():
    assert variant_matrix({"proxyMode": "ipvs", "masqueradeAll": True, "kubeVersion": 1.31}) == {
        "proxyMode": ["ipvs"],
        "masqueradeAll": ["true"],
        "kubeVersion": ["1.31"],
    }
    with pytest.raises(LabError, match=r"variant proxyMode: expected one value .*\['ipvs'\]"):
        variant_matrix({"proxyMode": ["ipvs"]})


def test_a_probe_entry_takes_keywords_a_name_and_expects_delivery_unless_it_says():
    entry = probe_entry({"from": "a", "to": {"node": "n", "port": 1}}, {"from_": "b", "protocol": "UDP"}, "probe-3")
    assert entry == {
        "from": "b",
        "to": {"node": "n", "port": 1},
        "protocol": "UDP",
        "name": "probe-3",
        "expect": {"outcome": "delivered"},
    }
    assert probe_entry(None, {"name": "mine", "expect": {"outcome": "refused"}}, "probe-1")["name"] == "mine"


def test_a_step_travels_in_a_probe_that_describe_resolves():
    carrier = step_carrier("api-step", [{"delete": "Service/web"}], "node1")
    scenario = load_scenario(CATALOGUE / "hairpin.yaml", {"proxyMode": ["iptables"]}, (carrier,), own_probes=False)
    for topo in scenario.variants:
        (probe,) = topo.probes  # the file's own probes are left out
        (step,) = probe.before
        assert step.services is not None and "web" not in {s.name for s in step.services}


def test_errors_about_the_callers_entry_name_its_field_and_others_stay_as_they_are():
    mine = ScenarioError("s.yaml", 40, "probes[1].before[0].replicas", "expected a number")
    file = ScenarioError("s.yaml", 3, "nodes[0].ip", "not an address")
    said = str(in_words(ScenarioErrors([mine, file]), 1, "step"))
    assert said.splitlines() == ["s.yaml:3: nodes[0].ip: not an address", "step: replicas: expected a number"]
    assert str(in_words(ScenarioError("s.yaml", 9, "probes[0]", "no such pod"), 0, "probe")) == "probe: no such pod"


def test_a_refused_axis_is_named_as_the_variant_given():
    refused = ScenarioError("--matrix proxyMode=userspace", None, "", "'userspace': expected 'iptables'")
    assert str(load_error(refused)) == "variant proxyMode=userspace: 'userspace': expected 'iptables'"


def test_every_actor_has_its_address_and_pods_their_namespaced_name():
    (topo,) = load_scenario(CATALOGUE / "hairpin.yaml", {"proxyMode": ["iptables"], "hairpinMode": ["none"]}).variants
    known = addresses(topo)
    assert known["node1"] == "192.168.56.11" and known["web"] == topo.pod("web").ip
    assert pod_aliases(topo.built_pods)["default/web"] == "web"
