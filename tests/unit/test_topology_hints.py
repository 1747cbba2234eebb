"""Topology-aware routing: the endpoints a node's kube-proxy balances over by their zone and node hints, per
release (the cases of kube-proxy's TestCategorizeEndpoints that concern topology, restated), and the hints the
EndpointSlice controller writes for spec.trafficDistribution. The kernel's side: the topology scenario in
tests/integration/topologies/topology-hints.yaml."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from support.builders import ep, svc
from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario
from lab.describe.topology import EndpointSpec, Hints, ServiceSpec
from lab.render.kubeproxy.adapter import controller_hints, hints_annotation, service_ports
from lab.render.kubeproxy.endpoints import categorize, topology_mode
from lab.render.kubeproxy.service import NodeTopology
from lab.render.kubeproxy.versions import Release
from lab.render.kubeproxy.view import ServiceView

REPO = Path(__file__).resolve().parents[2]
NODE = NodeTopology("node1", "zone-a")
A1 = ep("10.0.1.2", local=True, zone_hints=frozenset({"zone-a"}))
A2 = ep("10.0.2.2", zone_hints=frozenset({"zone-a"}))
B1 = ep("10.0.3.2", zone_hints=frozenset({"zone-b"}))
BARE = ep("10.0.4.2")
UNREADY_BARE = ep("10.0.5.2", ready=False)


def chosen(version: str, *endpoints, annotation: str = "", node: NodeTopology = NODE):
    view = ServiceView.build(
        svc("ns", "web", "172.30.0.10", endpoints=endpoints, hints_annotation=annotation, node=node),
        Release.of(version),
    )
    assert view is not None
    return categorize(view, Release.of(version)).cluster


@pytest.mark.parametrize(
    ("version", "annotation", "endpoints", "cluster"),
    [
        # Up to 1.23 the TopologyAwareHints gate is off: hints are ignored.
        ("1.23", "Auto", (A1, A2, B1), (A1, A2, B1)),
        # 1.24-1.26: only topology-aware-hints "auto"/"Auto" turns them on.
        ("1.24", "", (A1, A2, B1), (A1, A2, B1)),
        ("1.24", "auto", (A1, A2, B1), (A1, A2)),
        ("1.26", "PreferZone", (A1, A2, B1), (A1, A2, B1)),
        # 1.27-1.30: any value but "", disabled, Disabled.
        ("1.27", "PreferZone", (A1, A2, B1), (A1, A2)),
        ("1.30", "Disabled", (A1, A2, B1), (A1, A2, B1)),
        # 1.31+: the annotation is no longer asked; the hints alone decide.
        ("1.31", "", (A1, A2, B1), (A1, A2)),
        ("1.35", "", (A1, A2, B1), (A1, A2)),
        # One ready endpoint without a hint: every endpoint (a half-hinted Service is not trusted).
        ("1.31", "", (A1, B1, BARE), (A1, B1, BARE)),
        # A not-ready endpoint's missing hint does not count.
        ("1.31", "", (A1, B1, UNREADY_BARE), (A1,)),
        # No endpoint hinted for this zone: every endpoint, rather than none.
        ("1.31", "", (B1,), (B1,)),
    ],
)
def test_zone_hints_by_release(version, annotation, endpoints, cluster):
    assert chosen(version, *endpoints, annotation=annotation) == cluster


def test_a_node_without_a_zone_label_uses_every_endpoint():
    assert chosen("1.31", A1, A2, B1, node=NodeTopology("node1", "")) == (A1, A2, B1)


def test_node_hints_win_from_1_34_and_fall_back_to_zone_hints():
    here = ep("10.0.1.2", local=True, zone_hints=frozenset({"zone-a"}), node_hints=frozenset({"node1"}))
    near = ep("10.0.2.2", zone_hints=frozenset({"zone-a"}), node_hints=frozenset({"node2"}))
    far = ep("10.0.3.2", zone_hints=frozenset({"zone-b"}), node_hints=frozenset({"node3"}))
    assert chosen("1.33", here, near, far) == (here, near)
    assert chosen("1.34", here, near, far) == (here,)
    # No endpoint on this node: its zone's.
    assert chosen("1.34", near, far) == (near,)


def test_topology_is_skipped_for_the_terminating_fallback():
    """When no endpoint is ready, serving terminating ones stand in without topology."""
    leaving = ep("10.0.3.2", ready=False, serving=True, terminating=True, zone_hints=frozenset({"zone-b"}))
    view = ServiceView.build(svc("ns", "web", "172.30.0.10", endpoints=(leaving,), node=NODE), Release.of("1.31"))
    assert view is not None
    assert topology_mode(view, Release.of("1.31")) == ""
    assert categorize(view, Release.of("1.31")).cluster == (leaving,)


@pytest.mark.parametrize(
    ("version", "distribution", "ready", "hints"),
    [
        ("1.30", "PreferClose", True, Hints()),  # alpha, off: the API server drops the field
        ("1.31", "PreferClose", True, Hints(("zone-a",))),
        ("1.31", "PreferClose", False, Hints()),  # only ready endpoints are hinted
        ("1.33", "PreferSameNode", True, Hints()),  # gate off (INFERRED)
        ("1.34", "PreferSameZone", True, Hints(("zone-a",))),
        ("1.34", "PreferSameNode", True, Hints(("zone-a",), ("node1",))),
        ("1.35", "", True, Hints()),
    ],
)
def test_the_controller_hints_each_ready_endpoint_for_its_own_zone_and_node(version, distribution, ready, hints):
    service = ServiceSpec("web", "default", "ClusterIP", "10.96.0.10", (), traffic_distribution=distribution)
    endpoint = EndpointSpec("web-0", "node1", "10.244.1.2", 8080, ready, zone="zone-a")
    assert controller_hints(service, endpoint, Release.of(version)) == hints


def test_a_hand_written_slice_keeps_its_hints_and_an_endpoint_without_a_zone_gets_none():
    service = ServiceSpec("web", "default", "ClusterIP", "10.96.0.10", (), traffic_distribution="PreferClose")
    written = EndpointSpec("web-0", "node1", "10.244.1.2", 8080, True, hints=Hints(("zone-c",)))
    assert controller_hints(service, written, Release.of("1.31")) == Hints(("zone-c",))
    zoneless = EndpointSpec("web-0", "node1", "10.244.1.2", 8080, True)
    assert controller_hints(service, zoneless, Release.of("1.31")) == Hints()


@pytest.mark.parametrize(
    ("version", "annotations", "read"),
    [
        ("1.26", {"service.kubernetes.io/topology-mode": "Auto"}, ""),
        ("1.27", {"service.kubernetes.io/topology-mode": "Auto"}, "Auto"),
        (
            "1.27",
            {"service.kubernetes.io/topology-mode": "Auto", "service.kubernetes.io/topology-aware-hints": "disabled"},
            "disabled",
        ),
        ("1.26", {"service.kubernetes.io/topology-aware-hints": "auto"}, "auto"),
    ],
)
def test_which_annotation_kube_proxy_reads(version, annotations, read):
    service = ServiceSpec(
        "web", "default", "ClusterIP", "10.96.0.10", (), topology_annotations=tuple(annotations.items())
    )
    assert hints_annotation(service, Release.of(version)) == read


def test_the_topology_annotation_on_a_service_with_a_selector_is_refused(tmp_path):
    """Its hints would be the controller's share-of-CPU allocation, which the lab does not model."""
    text = BASE.replace(
        "    metadata: {name: web}\n    spec:\n      type: NodePort",
        "    metadata: {name: web, annotations: {service.kubernetes.io/topology-mode: Auto}}\n"
        "    spec:\n      type: NodePort",
    )
    error = error_for(tmp_path, text)
    assert error.field == "workload[1].metadata.annotations.service.kubernetes.io/topology-mode", str(error)
    assert "trafficDistribution: PreferClose" in error.message
    disabled = text.replace("topology-mode: Auto", "topology-mode: Disabled")
    (topo,) = load_scenario(write(tmp_path, disabled)).variants
    assert dict(topo.services[0].topology_annotations) == {"service.kubernetes.io/topology-mode": "Disabled"}


def test_selector_endpoints_carry_their_nodes_zone(tmp_path):
    text = BASE.replace("labels: {role: web}}", "labels: {role: web, topology.kubernetes.io/zone: zone-a}}")
    (topo,) = load_scenario(write(tmp_path, text)).variants
    assert {e.zone for p in topo.services[0].ports for e in p.endpoints} == {"zone-a"}


@pytest.mark.parametrize("version", ["1.30", "1.31", "1.34"])
def test_each_nodes_endpoints_carry_the_hints_the_controller_writes(version):
    """service_ports asks once per Service whether its endpoints are hinted (render's speed at 10 000 endpoints):
    every endpoint it gives every node still carries exactly controller_hints' answer."""
    path = REPO / "tests" / "integration" / "topologies" / "topology-hints.yaml"
    (topo,) = load_scenario(path, {"proxyMode": ["iptables"], "kubeVersion": [version]}).variants
    release = Release.of(version)
    expected = [
        (frozenset((hints := controller_hints(spec, e, release)).zones), frozenset(hints.nodes))
        for spec in topo.services
        for port in spec.ports
        for e in port.endpoints
    ]
    assert any(zones for zones, _ in expected) == (version != "1.30")
    for node in topo.nodes:
        given = [(e.zone_hints, e.node_hints) for port in service_ports(topo, node.name) for e in port.endpoints]
        assert given == expected


def test_hand_written_hints_reach_every_node_without_a_traffic_distribution():
    path = REPO / "tests" / "integration" / "topologies" / "topology-hints.yaml"
    (topo,) = load_scenario(path, {"proxyMode": ["iptables"], "kubeVersion": ["1.34"]}).variants
    written = Hints(("zone-c",), ("node2",))
    services = tuple(
        replace(
            spec,
            traffic_distribution="",
            ports=tuple(
                replace(port, endpoints=tuple(replace(e, hints=written) for e in port.endpoints)) for port in spec.ports
            ),
        )
        for spec in topo.services
    )
    hinted = replace(topo, services=services)
    given = {(e.zone_hints, e.node_hints) for port in service_ports(hinted, "node1") for e in port.endpoints}
    assert given == {(frozenset({"zone-c"}), frozenset({"node2"}))}
