"""Actors named as the lab's own parts (tests/integration/topologies/lab-own-names.yaml): a pod `fabric`, a node
`lo`, an external host `br0` and a host `lan0` behind it are each built in namespaces and on ports of their own,
beside the fabric and the devices of those names, and probed; so is a pod named as its node (default/lo)."""

from __future__ import annotations

from support.host import REPO

from lab.api import run_variant
from lab.describe.load import load_scenario
from lab.realize.build import FABRIC

SCENARIO = REPO / "tests" / "integration" / "topologies" / "lab-own-names.yaml"


def test_a_pod_named_fabric_is_built_beside_the_fabric_and_answers(host_unchanged):
    (topo,) = load_scenario(SCENARIO).variants
    results = {r.probe.name: r for r in run_variant(topo).results}
    through_lb = results["from-the-host-behind-the-router"]
    assert through_lb.verdict.ok, through_lb.verdict.reasons
    assert through_lb.observed.backend == "fabric"
    # The load balancer's DNAT is the fabric's rule, told apart from the pod's name.
    assert FABRIC in {actor for actor, _ in through_lb.observed.rules}, through_lb.observed.rules
    for name in ("from-the-pod-named-fabric", "from-the-pod-named-as-its-node"):
        assert results[name].verdict.ok, (name, results[name].verdict.reasons)
    assert results["from-the-pod-named-as-its-node"].observed.backend == "fabric"
