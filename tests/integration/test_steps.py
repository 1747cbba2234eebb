"""Probe steps on the real kernel: a failing command stops the run with an error that names it, and the
run's namespaces go. (What steps change is proven by topologies/steps.yaml and externalip-node-ip.yaml.)"""

from __future__ import annotations

import pytest
from support.host import REPO

from lab.describe.load import load_scenario
from lab.install.tools import InstallError
from lab.pipeline import run_variant

STEPS = REPO / "tests" / "integration" / "topologies" / "steps.yaml"


def test_a_failing_step_names_file_probe_step_and_output(host_unchanged, tmp_path, own_namespaces):
    text = STEPS.read_text().replace("ip addr flush dev eth0", "ip addr del 10.9.9.9/32 dev eth0")
    scenario = tmp_path / "steps.yaml"
    scenario.write_text(text)
    (topo,) = load_scenario(scenario, {"proxyMode": ["iptables"]}).variants
    with pytest.raises(InstallError) as info:
        run_variant(topo)
    said = str(info.value)
    assert said.startswith(
        f"{scenario}: probe node-address-removed, before: on node1: ip addr del 10.9.9.9/32 dev eth0"
    )
    assert "exited with 2" in said and "Address not found" in said, said
    assert own_namespaces() == []
