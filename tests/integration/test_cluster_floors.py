"""`lab bench --cluster`'s floors (lab/bench/cluster.py): bare namespaces made the lab's way, and kube-proxy's first
sync on every node with nothing else running, each in namespaces of its own that are gone afterwards."""

from __future__ import annotations

from support.host import lab_namespaces

from lab.bench.cluster import cluster_scenario, first_sync_alone, namespaces_alone_seconds
from lab.describe.load import load_scenario


def test_the_floors_leave_no_namespace(tmp_path, host_unchanged):
    before = set(lab_namespaces())
    assert namespaces_alone_seconds(20) > 0
    assert set(lab_namespaces()) == before
    path = tmp_path / "cluster.yaml"
    path.write_text(cluster_scenario(2, 3))
    (topo,) = load_scenario(path).variants
    seconds, processor = first_sync_alone(topo)
    assert seconds > 0
    assert processor > 0  # the restores are the lab's children, waited for
    assert set(lab_namespaces()) == before
