"""`lab run --what-if` on the kernel: the catalogue's NodePort through a node without the endpoint under
externalTrafficPolicy Cluster (masqueraded there). Its chain names externalTrafficPolicy Cluster, so the what-if
sets the Service's Local and kube-proxy resyncs: the probe is then dropped on that node (it has no local
endpoint), and the probe through the endpoint's own node keeps the client's address; both from the kernel runs,
in --json and in the lines. ipvs needs ip_vs: under `lab vm` where this kernel lacks it."""

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
PROBE = "via-node-without-pod"


def lab_run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lab", "run", *argv], capture_output=True, text=True, cwd=REPO, timeout=600
    )


def what_if(mode: str, *extra: str) -> subprocess.CompletedProcess[str]:
    variant = ["--variant", f"proxyMode={mode}", "--variant", "externalTrafficPolicy=Cluster"]
    return lab_run("topologies/nodeport-source-ip.yaml", "--what-if", PROBE, *variant, *extra)


@pytest.mark.parametrize("mode", MODES)
def test_etp_local_keeps_the_client_address_and_drops_through_the_node_without_an_endpoint(mode):
    run = what_if(mode, "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    (record,) = json.loads(run.stdout)
    assert record["observed"] == "delivered by openresty from node2 (192.168.56.12)"
    assert ("externalTrafficPolicy", "Cluster") in [(s["name"], s["value"]) for s in record["settings"]]
    local = next(c for c in record["changes"] if c["change"].startswith("externalTrafficPolicy"))
    assert local["change"] == "externalTrafficPolicy: Local on Service default/openresty"
    assert (local["how"], local["ran"]) == ("resync", "the lab as built, kube-proxy resynced")
    # Through node2, which has no endpoint of its own: dropped there.
    assert (local["flips"], local["observed"]) == ("outcome", "dropped"), local
    if mode != "ipvs":  # the rule that drops it on node2, which has no local endpoint
        assert "node2" in local["why"], local
    else:  # ipvs balances it to node1 unmarked: the pod answers the client straight back, and the client resets it
        assert "without passing the NAT" in local["why"], local
    # Through node1, the endpoint's own node: the client's own address reaches the backend.
    (kept,) = [d for d in local["elsewhere"] if d["probe"] == "via-node-with-pod"]
    assert kept["keeps_sender"] is True, kept
    assert kept["before"] == "delivered by openresty from node1/cni0 (10.244.1.1)"
    assert kept["after"] == "delivered by openresty from client (192.168.56.100)"
    # The other modes write the same translation for this probe.
    modes = [c for c in record["changes"] if c["name"] == "proxyMode"]
    assert sorted(c["value"] for c in modes) == sorted({"iptables", "ipvs", "nftables"} - {mode})
    assert all(c["flips"] is None for c in modes if not c["skipped"]), modes


def test_the_lines_name_the_change_and_its_cost():
    run = what_if("iptables")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith(
        f"what-if {PROBE} (nodeport-source-ip, proxyMode=iptables, externalTrafficPolicy=Cluster)"
    )
    (local,) = [i for i, line in enumerate(lines) if line.lstrip().startswith("externalTrafficPolicy: Local")]
    assert "flips the outcome: delivered by openresty from node2 (192.168.56.12) → dropped" in lines[local]
    assert lines[local + 1].strip().startswith("via-node-with-pod: keeps the sender's address:"), lines


def test_an_unknown_probe_is_refused_naming_the_probes():
    run = lab_run("topologies/nodeport-source-ip.yaml", "--what-if", "nope")
    assert run.returncode == 2
    assert "--what-if: no probe named nope; the probes are: cluster-ip-from-node3, via-node-with-pod" in run.stderr


@pytest.mark.parametrize("flag", [["--html", "out"], ["--probe", "via-node-with-pod"]])
def test_flags_the_what_if_does_not_take_are_refused_naming_them(flag):
    run = lab_run("topologies/nodeport-source-ip.yaml", "--what-if", PROBE, *flag)
    assert run.returncode == 2
    assert f"--what-if runs every probe under each change and prints its own lines: not {flag[0]}" in run.stderr


def test_a_hairpin_through_cni0_tries_kubelets_other_hairpin_modes():
    variant = ["--variant", "proxyMode=iptables", "--variant", "hairpinMode=hairpin-veth"]
    run = lab_run("topologies/hairpin.yaml", "--what-if", "pod-to-own-service", *variant, "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    (record,) = json.loads(run.stdout)
    modes = {c["value"]: c for c in record["changes"] if c["name"] == "hairpinMode"}
    assert set(modes) == {"promiscuous-bridge", "none"}
    # Without hairpin mode the bridge does not send the DNATed frame back out of the port it came in by.
    assert (modes["none"]["flips"], modes["none"]["observed"]) == ("outcome", "dropped"), modes["none"]
    assert any("hairpin masquerade" in why for why in record["untried"]), record["untried"]
