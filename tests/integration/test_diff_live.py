"""lab diff against a real node: a live lab's node1 holds the rules lab installed with the real tools; its own
iptables-save / nft list ruleset diffs as identical with the scenario, and a rule edited in the kernel afterwards
is reported, in its chain, as the edit it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.host import REPO

SCENARIO = REPO / "topologies" / "nodeport-source-ip.yaml"


def lab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lab", *args], capture_output=True, text=True, cwd=REPO, timeout=timeout
    )


def on_node1(prefix: str, *command: str) -> str:
    done = lab("exec", "--run", prefix, "node1", "--", *command)
    assert done.returncode == 0, done.stderr
    return done.stdout


def diff(dump: Path, option: str, *more: str) -> tuple[int, dict]:
    done = lab(
        "diff",
        str(SCENARIO),
        "--node",
        "node1",
        option,
        str(dump),
        *more,
        "--variant",
        "externalTrafficPolicy=Cluster",
        "--json",
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.fixture
def live(host_unchanged, request):
    if request.param == "ipvs":
        from lab.doctor import kernel_has

        if not (kernel_has("ip_vs") and kernel_has("dummy")):
            pytest.skip("kernel has no ip_vs or dummy: run under `lab vm run`")
    done = lab(
        "up", str(SCENARIO), "--variant", f"proxyMode={request.param}", "--variant", "externalTrafficPolicy=Cluster"
    )
    assert done.returncode == 0, done.stderr
    prefix = done.stdout.split(":", 1)[0]
    try:
        yield prefix
    finally:
        lab("down", prefix)


@pytest.mark.parametrize("live", ["iptables"], indirect=True)
def test_iptables_node_is_identical_then_an_edit_is_reported(live, tmp_path):
    dump = tmp_path / "node1.iptables-save"
    dump.write_text(on_node1(live, "iptables-save"))
    status, report = diff(dump, "--rules")
    assert status == 0 and report["identical"], report
    assert report["replay"].startswith(f"lab replay --rules {dump} --node-ip 192.168.56.11 --pod-cidr 10.244.1.0/24")

    # Someone sets another mark in kube-proxy's KUBE-MARK-MASQ (rule 1) in the kernel.
    on_node1(live, "iptables", "-t", "nat", "-R", "KUBE-MARK-MASQ", "1", "-j", "MARK", "--or-mark", "0x8000")
    dump.write_text(on_node1(live, "iptables-save"))
    status, report = diff(dump, "--rules")
    assert status == 1 and report["differences"] == 1
    [part] = report["parts"]
    assert (part["table"], part["name"]) == ("nat", "KUBE-MARK-MASQ")
    assert part["changed"][0]["expected"] == "-j MARK --set-xmark 0x4000/0x4000"
    assert part["changed"][0]["found"] == "-j MARK --set-xmark 0x8000/0x8000"


@pytest.mark.parametrize("live", ["nftables"], indirect=True)
def test_nftables_node_is_identical_then_an_edit_is_reported(live, tmp_path):
    dump = tmp_path / "node1.nft"
    dump.write_text(on_node1(live, "nft", "list", "ruleset"))
    status, report = diff(dump, "--nft")
    assert status == 0 and report["identical"], report

    # Someone drops a source in kube-proxy's masquerading chain.
    on_node1(live, "nft", "insert", "rule", "ip", "kube-proxy", "masquerading", "ip", "saddr", "10.9.9.9", "drop")
    dump.write_text(on_node1(live, "nft", "list", "ruleset"))
    status, report = diff(dump, "--nft")
    assert status == 1
    [part] = report["parts"]
    assert part["name"] == "masquerading" and [e["entry"] for e in part["extra"]] == ["ip saddr 10.9.9.9 drop"]
    assert part["order"] == []  # kube-proxy's three rules keep their order; the extra one is only extra


@pytest.mark.ipvs
@pytest.mark.parametrize("live", ["ipvs"], indirect=True)
def test_ipvs_node_is_identical_then_an_edit_is_reported(live, tmp_path):
    """ipvs mode's three dumps; ipvsadm -Ln reads as -Sn does. Needs ip_vs and dummy (lab vm run)."""
    rules, sets, saved, listed = (tmp_path / name for name in ("iptables-save", "ipset", "ipvs-S", "ipvs-L"))
    rules.write_text(on_node1(live, "iptables-save"))
    sets.write_text(on_node1(live, "ipset", "save"))
    saved.write_text(on_node1(live, "ipvsadm", "-Sn"))
    listed.write_text(on_node1(live, "ipvsadm", "-Ln"))
    for servers in (saved, listed):
        status, report = diff(rules, "--rules", "--ipsets", str(sets), "--ipvs", str(servers))
        assert status == 0 and report["identical"], report

    # Someone gives the ClusterIP's real server weight 5.
    on_node1(live, "ipvsadm", "-e", "-t", "10.96.0.10:80", "-r", "10.244.1.2:8080", "-m", "-w", "5")
    saved.write_text(on_node1(live, "ipvsadm", "-Sn"))
    status, report = diff(rules, "--rules", "--ipsets", str(sets), "--ipvs", str(saved))
    assert status == 1
    [part] = report["parts"]
    assert part["name"] == "TCP 10.96.0.10:80 rr"
    assert part["changed"][0]["expected"] == "10.244.1.2:8080 masq weight 1"
    assert part["changed"][0]["found"] == "10.244.1.2:8080 masq weight 5"
