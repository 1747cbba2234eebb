"""lab bench --cluster's generated scenario: its sizes read from the flag, and a file `lab run` loads."""

from __future__ import annotations

import pytest

from lab.bench.cluster import PROBES, cluster_scenario, parse_sizes
from lab.describe.load import load_scenario


def test_sizes_are_read_and_bad_ones_refused():
    assert parse_sizes("3x10,10x100") == [(3, 10), (10, 100)]
    for bad in ("10", "x10", "3x0", "3xa", "300x10"):
        with pytest.raises(ValueError, match="NODESxPODS|at most 250"):
            parse_sizes(bad)


def test_the_generated_cluster_loads_with_every_pod_behind_the_service(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(cluster_scenario(4, 120))
    (topo,) = load_scenario(path).variants
    assert len(topo.nodes) == 4 and len(topo.pods) == 480
    (svc,) = topo.services
    assert len(svc.ports[0].endpoints) == 480 and svc.ports[0].node_port == 30080
    assert len(topo.probes) == PROBES
