"""Probe steps on the real kernel: a failing command stops the run with an error that names it, and the
run's namespaces go. (What steps change is proven by topologies/steps.yaml and externalip-node-ip.yaml.)"""

from __future__ import annotations

import subprocess
import time

import pytest
from support.host import REPO

from lab.api import run_variant
from lab.describe.load import load_scenario
from lab.install.bounded import run_bounded
from lab.install.tools import InstallError
from lab.realize import runs

STEPS = REPO / "tests" / "integration" / "topologies" / "steps.yaml"


def test_a_failing_step_names_file_probe_step_and_output(host_unchanged, tmp_path, own_namespaces):
    text = STEPS.read_text().replace("ip addr flush dev eth0", "ip addr del 10.9.9.9/32 dev eth0")
    scenario = tmp_path / "steps.yaml"
    scenario.write_text(text)
    (topo,) = load_scenario(scenario, {"proxyMode": ["iptables"]}).variants
    with pytest.raises(InstallError) as info:
        run_variant(topo)
    said = str(info.value)
    line = text.splitlines().index("      - {run: ip addr del 10.9.9.9/32 dev eth0, nodes: [node1]}") + 1
    assert said.startswith(
        f"{scenario}:{line}: probe node-address-removed, before: on node1: ip addr del 10.9.9.9/32 dev eth0"
    ), said
    assert "exited with 2" in said and "Address not found" in said, said
    assert own_namespaces() == []


def test_a_step_past_its_timeout_stops_the_run_naming_it(host_unchanged, tmp_path, own_namespaces):
    # `sleep 400` once held the run for 400 s.
    step = "{run: sleep 400, nodes: [node1], timeout: 1}"
    text = STEPS.read_text().replace("{run: ip addr flush dev eth0, nodes: [node1]}", step)
    scenario = tmp_path / "steps.yaml"
    scenario.write_text(text)
    (topo,) = load_scenario(scenario, {"proxyMode": ["iptables"]}).variants
    started = time.monotonic()
    with pytest.raises(InstallError) as info:
        run_variant(topo)
    assert time.monotonic() - started < 60
    said = str(info.value)
    line = text.splitlines().index(f"      - {step}") + 1
    assert said.startswith(f"{scenario}:{line}: probe node-address-removed, before: on node1: sleep 400: "), said
    assert "`sleep 400` on node1 did not finish within 1 s, and was killed" in said, said
    assert own_namespaces() == []


def test_what_a_step_started_is_killed_with_it(host_unchanged, tmp_path):
    # The shell's background job is in the step's process group: killed at the timeout with the shell, it never
    # gets to leave its mark (the run's teardown would kill it too, but only later).
    prefix = runs.new_prefix()
    netns = f"{prefix}-node1"
    runs.record(prefix, netns)
    subprocess.run(["ip", "netns", "add", netns], check=True)
    mark = tmp_path / "still-running"
    try:
        with pytest.raises(InstallError, match="did not finish within 1 s"):
            run_bounded(netns, "node1", ("sh", "-c", f"(sleep 1.5; touch {mark}) & sleep 400"), 1)
        time.sleep(1.5)
        assert not mark.exists()
    finally:
        runs.release(prefix)
