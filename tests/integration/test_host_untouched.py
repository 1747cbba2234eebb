"""A full scenario run must leave the host's own network namespace exactly as it was, and no namespaces."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.host import REPO, lab_namespaces, once_built, records_of, terminated_leaving_nothing

from lab.api import run_variant
from lab.describe.load import load_scenario
from lab.render.dataplane import render, setups


def test_run_leaves_host_untouched_and_no_namespaces(host_unchanged, own_namespaces):
    both_backends = {"iptablesBackend": ["nft", "legacy"]}
    for topo in load_scenario(REPO / "topologies" / "lb-local-from-pods.yaml", both_backends).variants:
        run = run_variant(topo)
        assert run.results or run.skipped, "the scenario ran no probe"
    assert own_namespaces() == []


def test_failure_while_building_leaves_nothing(host_unchanged, monkeypatch, own_namespaces):
    from lab.realize import build

    topo = load_scenario(REPO / "topologies" / "hairpin.yaml").variants[0]

    sides = []

    def explode(self, batch, pod):
        # The pods' namespaces and veths exist by now: fail at the second pod's own side.
        sides.append(pod.name)
        if len(sides) == 2:
            raise RuntimeError("boom while adding a pod")
        real(self, batch, pod)

    real = build._Builder.pod_side
    monkeypatch.setattr(build._Builder, "pod_side", explode)
    try:
        with build.realize(topo, setups(render(topo)), tunnel=""):
            raise AssertionError("realize should have failed")
    except RuntimeError as exc:
        assert "boom" in str(exc)
    assert len(sides) == 2 and own_namespaces() == []


def test_sigkilled_run_is_cleaned_by_next_down(host_unchanged):
    lab = [sys.executable, "-m", "lab", "run", "--timeout", "5", str(REPO / "topologies" / "lb-local-from-pods.yaml")]
    proc = subprocess.Popen(lab, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    # Its own namespaces, from its record (other runs may build theirs meanwhile).
    deadline, mine, prefix = time.monotonic() + 30, set(), ""
    while time.monotonic() < deadline and len(mine & set(lab_namespaces())) < 5:
        records = records_of(proc.pid)
        mine = {name for record in records for name in record["namespaces"]}
        prefix = next((name[:10] for name in mine), "")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    leftovers = mine & set(lab_namespaces())
    assert leftovers, "the killed run should have left namespaces behind for this test to mean anything"
    # Its name: `lab down` without one would take down another test's live lab if one were up.
    down = subprocess.run([sys.executable, "-m", "lab", "down", prefix], capture_output=True, text=True, cwd=REPO)
    assert down.returncode == 0, down.stderr
    assert not (mine & set(lab_namespaces())), down.stdout


def test_a_run_killed_while_probing_leaves_no_process_in_its_namespaces(host_unchanged):
    """The probe session's trace monitors run inside the nodes; SIGKILL leaves them without their parent, and
    `lab down` of the dead run must stop them, or they would keep its namespaces alive for good."""
    lab = [sys.executable, "-m", "lab", "run", "--timeout", "5", str(REPO / "topologies" / "lb-local-from-pods.yaml")]
    for _ in range(3):  # the kill must land while a variant's record stands, not just after its own teardown
        proc = subprocess.Popen(lab, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
        deadline, inodes, inside, prefix = time.monotonic() + 60, set(), [], ""
        while time.monotonic() < deadline and not inside:
            names = {name for record in records_of(proc.pid) for name in record["namespaces"]}
            prefix = next((name[:10] for name in names), prefix)
            inodes = {(s.st_dev, s.st_ino) for s in map(_stat_or_none, (f"/run/netns/{n}" for n in names)) if s}
            inside = [pid for pid in _pids() if _netns_of(pid) in inodes]
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        left = {name[:10] for record in records_of(proc.pid) for name in record["namespaces"]}
        if inside and prefix in left:
            break
        for other in left:  # killed while building the next variant: not what this test is about
            subprocess.run([sys.executable, "-m", "lab", "down", other], capture_output=True, cwd=REPO)
    assert inside, "the run never started a process in its namespaces: the test would mean nothing"
    assert prefix in left, "every kill landed after a variant's teardown: the test would mean nothing"
    down = subprocess.run([sys.executable, "-m", "lab", "down", prefix], capture_output=True, text=True, cwd=REPO)
    assert down.returncode == 0, down.stderr
    survivors = [pid for pid in _pids() if _netns_of(pid) in inodes]
    assert survivors == [], [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in survivors]


def test_a_process_left_inside_a_runs_namespace_dies_with_its_teardown(host_unchanged, own_namespaces):
    """Whatever forgot to stop a process it started in a node (a tracer whose close a SIGTERM cut short), the
    run's own teardown kills it before removing the namespaces, which it would otherwise keep alive."""
    from lab.realize.build import realize

    topo = load_scenario(REPO / "topologies" / "hairpin.yaml").variants[0]
    with realize(topo, setups(render(topo)), tunnel="") as realized:
        ns = realized.namespaces["node1"]
        netns = _netns_of_file(f"/run/netns/{ns}")
        left = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "600"], start_new_session=True)
        deadline = time.monotonic() + 10
        while _netns_of(str(left.pid)) != netns and time.monotonic() < deadline:
            time.sleep(0.01)  # until ip has entered the namespace and become sleep
        assert _netns_of(str(left.pid)) == netns, "the process never entered the node: the test would mean nothing"
    assert left.wait(timeout=10) == -signal.SIGKILL
    assert own_namespaces() == []


def _netns_of_file(path: str) -> tuple[int, int] | None:
    found = _stat_or_none(path)
    return (found.st_dev, found.st_ino) if found else None


def _pids() -> list[str]:
    return [pid for pid in os.listdir("/proc") if pid.isdigit()]


def _stat_or_none(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _netns_of(pid: str) -> tuple[int, int] | None:
    return _netns_of_file(f"/proc/{pid}/ns/net")


def test_sigterm_exits_143_removes_everything_and_json_keeps_what_finished(host_unchanged):
    lab = [sys.executable, "-m", "lab", "run", "--json", str(REPO / "topologies" / "lb-local-from-pods.yaml")]
    proc = subprocess.Popen(lab, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    # Wait for its second run's record: the first variant has then finished all its probes. Only this process's
    # records count (other runs may build theirs meanwhile).
    prefixes: set[str] = set()
    mine: set[str] = set()
    deadline = time.monotonic() + 180  # generous: the machine may be busy
    while time.monotonic() < deadline and len(prefixes) < 2:
        records = records_of(proc.pid)
        prefixes |= {name[:10] for record in records for name in record["namespaces"]}
        mine |= {name for record in records for name in record["namespaces"]}
        time.sleep(0.02)
    assert len(prefixes) >= 2, "the run never reached its second variant"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated; what it built was taken down" in err and "Traceback" not in err
    document = json.loads(out)
    assert document["summary"]["interrupted"] is True
    assert sum(r["ok"] is not None for r in document["results"]) >= 4
    assert not (mine & set(lab_namespaces())) and not records_of(proc.pid)


def test_sigterm_to_pytest_removes_the_variant_it_was_running(host_unchanged):
    """The pytest plugin takes SIGTERM as Ctrl-C: the variant being built or probed tears its namespaces down."""
    pytest_argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "topologies/lb-local-from-pods.yaml"]
    proc = subprocess.Popen(pytest_argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    mine = once_built(proc, 5)
    assert mine & set(lab_namespaces()), "pytest never built a variant"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert not (mine & set(lab_namespaces())), out[-2000:]
    assert not records_of(proc.pid), "the run's record stayed"


def test_sigterm_to_lab_bench_removes_the_cluster_it_was_timing(host_unchanged):
    """lab bench builds whole clusters; killed, it tears down what it built, as lab run does (it used to leave
    every namespace of the cluster it was timing)."""
    bench = [sys.executable, "-m", "lab", "bench", "--cluster", "3x10", "--repeat", "1"]
    proc = subprocess.Popen(bench, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    mine = once_built(proc, 10)
    assert mine & set(lab_namespaces()), "the bench never built its cluster"
    terminated_leaving_nothing(proc, mine)
