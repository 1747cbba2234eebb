"""The translation chain on the kernel (lab/probe/diagnosis.py): the catalogue's NodePort through a node without the
endpoint under externalTrafficPolicy Cluster, and its pod reaching itself through cni0, run in each proxy mode; the
run's --json must give the chain in path order with the setting behind the masquerade, -v a line per step, the
HTML report the deciding rules marked. ipvs needs ip_vs: under `lab vm` where this kernel lacks it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.host import REPO

from lab.doctor import kernel_has, skip_reason

MODES = [
    "iptables",
    "nftables",
    pytest.param("ipvs", marks=pytest.mark.skipif(not kernel_has("ip_vs"), reason=skip_reason("ip_vs"))),
]


def lab_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lab", "run", *args], capture_output=True, text=True, cwd=REPO, timeout=600
    )


def observed(scenario: str, probe: str, *variant: str) -> dict:
    argv = [f"topologies/{scenario}", "--probe", probe, "--json"]
    for axis in variant:
        argv += ["--variant", axis]
    run = lab_run(*argv)
    assert run.returncode == 0, run.stdout + run.stderr
    (record,) = json.loads(run.stdout)["results"]
    return record["observed"]


def kinds(observation: dict) -> list[tuple[str, str]]:
    return [(step["step"], step["node"]) for step in observation["diagnosis"]]


@pytest.mark.parametrize("mode", MODES)
def test_the_nodeport_through_a_node_without_the_endpoint_is_masqueraded_there_for_etp_cluster(mode):
    o = observed(
        "nodeport-source-ip.yaml", "via-node-without-pod", f"proxyMode={mode}", "externalTrafficPolicy=Cluster"
    )
    chosen = "ipvs" if mode == "ipvs" else "dnat"
    steps = kinds(o)
    assert steps[0] == (chosen, "node2"), steps
    assert ("masquerade", "node2") in steps and steps[-1] == ("un-nat", "node2"), steps
    assert steps.index((chosen, "node2")) < steps.index(("masquerade", "node2")), steps
    masquerade = next(step for step in o["diagnosis"] if step["step"] == "masquerade")
    assert masquerade["setting"]["name"] == "externalTrafficPolicy" and masquerade["setting"]["value"] == "Cluster"
    assert "source 192.168.56.100 (client) became 192.168.56.12 (node2)" in masquerade["said"]


@pytest.mark.parametrize("mode", MODES)
def test_etp_local_keeps_the_client_address_and_no_step_rewrites_it(mode):
    o = observed("nodeport-source-ip.yaml", "via-node-with-pod", f"proxyMode={mode}", "externalTrafficPolicy=Local")
    assert o["source_ip"] == "192.168.56.100"
    assert "masquerade" not in [step["step"] for step in o["diagnosis"]], o["diagnosis"]


@pytest.mark.parametrize("mode", MODES)
def test_a_pod_reaching_itself_is_masqueraded_and_hairpinned_through_cni0(mode):
    o = observed("hairpin.yaml", "pod-to-own-service", f"proxyMode={mode}", "hairpinMode=hairpin-veth")
    steps = {step["step"]: step for step in o["diagnosis"]}
    assert steps["masquerade"]["node"] == "node1"
    assert steps["masquerade"]["setting"]["name"] == "kube-proxy's hairpin masquerade"
    assert "became 10.244.1.1 (node1/cni0)" in steps["masquerade"]["said"]
    hairpin = steps["hairpin"]
    assert (hairpin["node"], hairpin["where"]) == ("node1", "cni0")
    assert (hairpin["setting"]["name"], hairpin["setting"]["value"]) == ("hairpinMode", "hairpin-veth")


def test_verbose_says_each_step_and_the_report_marks_the_deciding_rules(tmp_path):
    variant = ("--variant", "proxyMode=iptables", "--variant", "externalTrafficPolicy=Cluster")
    run = lab_run("topologies/nodeport-source-ip.yaml", "--probe", "via-node-without-pod", *variant, "-v")
    assert run.returncode == 0, run.stdout + run.stderr
    steps = [line.strip() for line in run.stdout.splitlines() if line.strip().startswith("step  ")]
    assert [line.split(":", 1)[0] for line in steps] == ["step  node2"] * 4, steps
    assert "masqueraded by nat KUBE-POSTROUTING" in steps[2] and "externalTrafficPolicy Cluster" in steps[2]
    html = lab_run(
        "topologies/nodeport-source-ip.yaml", "--probe", "via-node-without-pod", *variant, "--html", str(tmp_path)
    )
    assert html.returncode == 0, html.stdout + html.stderr
    page = (tmp_path / "index.html").read_text()
    assert "masqueraded on node2: externalTrafficPolicy Cluster" in page
    assert page.count('class="decider"') == 3  # the DNAT, the mark, the masquerade
