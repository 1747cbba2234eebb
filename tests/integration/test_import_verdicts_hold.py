"""An imported cluster whose Service has three endpoints gives the same verdicts run after run: each imported
probe (no `attempts`) sends until it has reached every endpoint the load balancing chose among, and says the set.
The cluster is the nodeport-source-ip one (tests/fixtures/kubectl) with openresty scaled to one pod per node, as
kubectl would print it after `kubectl scale --replicas 3`."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.host import REPO
from support.labrun import run_results

DUMP = REPO / "tests" / "fixtures" / "kubectl" / "nodeport-source-ip"
PROBE = "default-openresty-http-"
# One pod per node: every node is of one kind for openresty's rules, so the import probes through node1 alone.
PROBES = [f"{PROBE}node-port-via-node1", f"{PROBE}cluster-ip-from-node1"]
# The two pods added beside openresty (node1's): (node, its address, the pod's address).
ADDED = (("node2", "192.168.56.12", "10.244.2.7"), ("node3", "192.168.56.13", "10.244.3.7"))
RUNS = 5


def _scaled(items: list[dict[str, Any]]) -> None:
    """openresty's pod copied onto node2 and node3, and each copy an endpoint of openresty's EndpointSlice."""
    pod = next(o for o in items if o["kind"] == "Pod" and o["metadata"]["name"] == "openresty")
    slice_ = next(
        o
        for o in items
        if o["kind"] == "EndpointSlice" and o["metadata"]["labels"].get("kubernetes.io/service-name") == "openresty"
    )
    for k, (node, host_ip, pod_ip) in enumerate(ADDED, 2):
        name, uid = f"openresty-{k}", pod["metadata"]["uid"][:-2] + f"{k:02d}"
        added = copy.deepcopy(pod)
        added["metadata"].update(name=name, uid=uid)
        added["spec"]["nodeName"] = node
        added["status"].update(hostIP=host_ip, hostIPs=[{"ip": host_ip}], podIP=pod_ip, podIPs=[{"ip": pod_ip}])
        items.insert(items.index(pod) + k - 1, added)
        endpoint = copy.deepcopy(slice_["endpoints"][0])
        endpoint.update(addresses=[pod_ip], nodeName=node)
        endpoint["targetRef"].update(name=name, uid=uid)
        slice_["endpoints"].append(endpoint)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("scaled")
    dump = yaml.safe_load((DUMP / "dump.yaml").read_text())
    _scaled(dump["items"])
    (where / "dump.yaml").write_text(yaml.safe_dump(dump))
    for name in ("kube-proxy.yaml", "version.yaml"):
        (where / name).write_text((DUMP / name).read_text())
    done = subprocess.run(
        [sys.executable, "-m", "lab", "import", "dump.yaml", "kube-proxy.yaml", "version.yaml"],
        capture_output=True,
        text=True,
        cwd=where,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (where / "s.yaml").write_text(done.stdout)
    return where / "s.yaml"


def _verdicts(results: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What each probe's verdict line says: the probe, whether it passed and why not, and the endpoints it reached
    with the source each saw."""
    return [
        (
            r["probe"].removeprefix(PROBE),
            r["ok"],
            tuple(r["reasons"]),
            r["observed"]["outcome"],
            tuple((m["outcome"], m["backend"], m["source"], m["source_ip"]) for m in r["observed"]["members"]),
        )
        for r in results
    ]


def test_five_runs_give_the_same_verdict_lines(scenario, host_unchanged):
    only = [arg for name in PROBES for arg in ("--probe", name)]
    runs = []
    for _ in range(RUNS):
        runs.append(_verdicts(run_results(str(scenario), *only)))
    assert all(run == runs[0] for run in runs), runs
    said = {probe: members for probe, _, _, _, members in runs[0]}
    assert len(said) == len(PROBES), said
    for probe, members in said.items():  # every endpoint reached, each with the source it saw
        assert [backend for _, backend, _, _ in members] == ["openresty", "openresty-2", "openresty-3"], probe
    # The endpoint on the node entered sees its cni0 (masqueraded, then bridged); the others the node's address.
    assert [source for _, _, source, _ in said["node-port-via-node1"]] == ["node1/cni0", "node1", "node1"]
