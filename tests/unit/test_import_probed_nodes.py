"""lab import probes a Service through one node of each kind its rules tell apart (lab/describe/kubectl/probes.py,
probed_nodes): the nodes without an endpoint are one kind, a zone or a node named by a hint another, the conditions
of a node's own endpoints another; a client pod is preferred to the node itself."""

from __future__ import annotations

from typing import Any

from lab.describe.kubectl.probes import probed_nodes
from lab.describe.kubectl.services import Endpoint, Service, Slice

READY = {"ready": True, "serving": True, "terminating": False}
TERMINATING = {"ready": False, "serving": True, "terminating": True}


def _endpoint(node: str, conditions: dict[str, bool], hinted: tuple[str, ...] = ()) -> Endpoint:
    return Endpoint(None, "10.244.0.9", conditions, node, None, [], list(hinted))  # type: ignore[arg-type]


def _service(*endpoints: Endpoint) -> Service:
    unread: Any = None
    service = Service(unread, "default", "web", "ClusterIP", ["10.96.0.10"], [], {}, [], [], [], {})
    service.slices.append(Slice(unread, "IPv4", list(endpoints), [], True))
    return service


NODES = [f"node{i}" for i in range(1, 7)]


def test_nodes_without_endpoints_are_one_kind_and_a_pod_client_is_preferred():
    chosen = probed_nodes(_service(_endpoint("node1", READY)), NODES, {}, {"node1", "node4"})
    assert chosen == ["node1", "node4"]


def test_without_a_pod_anywhere_the_first_node_of_each_kind():
    assert probed_nodes(_service(_endpoint("node3", READY)), NODES, {}, set()) == ["node1", "node3"]


def test_a_zone_is_a_kind():
    zones = {"node1": "a", "node2": "a", "node3": "b", "node4": "b", "node5": "b", "node6": "c"}
    assert probed_nodes(_service(), NODES, zones, set()) == ["node1", "node3", "node6"]


def test_the_conditions_of_a_nodes_own_endpoints_are_a_kind():
    """A node whose only endpoint is terminating serves eTP Local from it (kube-proxy's fallback); one with a ready
    and a terminating endpoint is another kind again; two ready endpoints are one ready endpoint's kind."""
    service = _service(
        _endpoint("node2", READY),
        _endpoint("node3", TERMINATING),
        _endpoint("node4", READY),
        _endpoint("node4", READY),
        _endpoint("node5", READY),
        _endpoint("node5", TERMINATING),
        _endpoint("node6", {}),  # no conditions: ready, as kube-proxy reads it
    )
    assert probed_nodes(service, NODES, {}, set()) == ["node1", "node2", "node3", "node5"]


def test_a_node_a_hint_names_is_a_kind():
    service = _service(_endpoint("node1", READY, hinted=("node5",)))
    assert probed_nodes(service, NODES, {}, set()) == ["node1", "node2", "node5"]


def test_a_thousand_nodes_give_a_probe_per_kind_not_per_node():
    nodes = [f"node{i}" for i in range(1000)]
    service = _service(*(_endpoint(f"node{i}", READY) for i in range(0, 1000, 33)))
    assert probed_nodes(service, nodes, {}, set(nodes)) == ["node0", "node1"]


def test_an_unset_serving_is_true_not_the_endpoints_ready():
    """kube-proxy reads an unset serving as true (lab/describe/resolve/workload.py cites it): a not-ready
    terminating endpoint without it is the terminating kind, not a third."""
    service = _service(_endpoint("node2", TERMINATING), _endpoint("node3", {"ready": False, "terminating": True}))
    assert probed_nodes(service, NODES, {}, set()) == ["node1", "node2"]
