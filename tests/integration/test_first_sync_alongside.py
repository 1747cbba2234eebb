"""kube-proxy's first sync runs on each node while the rest of the cluster is built (lab.install.dataplane
FirstSync): a build that fails, or a run stopped by SIGTERM, in the middle of it still leaves nothing behind, and
no load outlives its namespace."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest
from support.host import lab_namespaces, records_of

from lab.bench.cluster import cluster_scenario
from lab.describe.load import load_scenario
from lab.pipeline import standing


@pytest.fixture
def cluster_file(tmp_path):
    def write(nodes: int, pods: int):
        path = tmp_path / f"cluster-{nodes}x{pods}.yaml"
        path.write_text(cluster_scenario(nodes, pods))
        return path

    return write


def test_a_pod_failing_while_the_first_syncs_run_leaves_nothing(
    host_unchanged, monkeypatch, own_namespaces, cluster_file
):
    from lab.install import dataplane
    from lab.realize import build

    (topo,) = load_scenario(cluster_file(8, 5)).variants
    loads, sides = [], []
    real_load, real_side = dataplane.load, build._Builder.pod_side

    def counted_load(*args):
        loads.append(args[0])
        return real_load(*args)

    def explode(self, batch, pod):
        sides.append(pod.name)
        if len(sides) == 12:  # the third node's pods: every node is built, its first sync started
            raise RuntimeError("boom while adding a pod")
        real_side(self, batch, pod)

    monkeypatch.setattr(dataplane, "load", counted_load)
    monkeypatch.setattr(build._Builder, "pod_side", explode)
    with pytest.raises(RuntimeError, match="boom"), standing(topo):
        raise AssertionError("the build should have failed")
    assert loads, "no first sync ran alongside the build: the test would mean nothing"
    assert own_namespaces() == []
    assert not [t.name for t in threading.enumerate() if t.name.startswith("install")]


def test_sigterm_while_the_first_syncs_run_exits_143_and_removes_everything(host_unchanged, cluster_file):
    path = cluster_file(40, 5)
    proc = subprocess.Popen(
        [sys.executable, "-m", "lab", "run", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    # The nodes are recorded one by one as they are built: stop it once a few are (the syncs have begun).
    deadline, mine = time.monotonic() + 120, set()
    while time.monotonic() < deadline and len(mine) < 10:
        mine = {name for record in records_of(proc.pid) for name in record["namespaces"]}
        time.sleep(0.005)
    assert len(mine) >= 10, "the run never started building"
    assert len(mine) < 1 + 40 + 1 + 40 * 5, "the build was over before the signal: the test would mean nothing"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    assert not (mine & set(lab_namespaces())) and not records_of(proc.pid)
    leftover = subprocess.run(["pgrep", "-f", "iptables-nft-restore"], capture_output=True, text=True).stdout
    assert not leftover.strip(), f"a first sync outlived the run: {leftover}"
