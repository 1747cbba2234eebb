"""A run that tested nothing says so by its exit status, a skipped probe's --json record reads like a run one's,
and a skipped variant is not said to have built nodes or to have had its backend chosen.

nftables mode of kube-proxy 1.20 is skipped on every machine (kube-proxy had no nftables mode before 1.29), and so
is kube-proxy 1.33 with a feature gate added in 1.36 (it refuses to start)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.host import REPO

SCENARIO = str(REPO / "topologies" / "externalip-node-ip.yaml")
SLICED = REPO / "tests" / "integration" / "topologies" / "stand-ins.yaml"


def lab_run(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "lab", "run", SCENARIO, "--variant", "kubeVersion=1.20", *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=300)


# Mappings keyed by data (the variant's axes, each actor's counters that moved), not by the record's fields.
DATA_KEYED = {"variant", "counters"}


def shape(value: object) -> object:
    """The keys of a record, nested, without the values (a mapping keyed by data is one value)."""
    if not isinstance(value, dict):
        return None
    return {k: None if k in DATA_KEYED else shape(v) for k, v in value.items()}


def test_a_run_whose_every_probe_was_skipped_exits_3_unless_allow_skips(host_unchanged):
    skipped = lab_run("--variant", "proxyMode=nftables")
    assert skipped.returncode == 3, skipped.stdout + skipped.stderr
    assert "every probe was skipped (8): nothing was tested on this machine (exit 3" in skipped.stderr
    allowed = lab_run("--variant", "proxyMode=nftables", "--allow-skips")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr


def test_skipped_records_have_the_shape_of_run_ones(host_unchanged):
    done = lab_run("--matrix", "proxyMode=iptables,nftables", "--probe", "apiserver-from-node2", "--json")
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)["results"]
    ran = [r for r in records if r["skipped"] is None]
    skipped = [r for r in records if r["skipped"]]
    assert ran and skipped and all(r["ok"] is None for r in skipped)
    assert {json.dumps(shape(r)) for r in records} == {json.dumps(shape(ran[0]))}


def test_a_skipped_sliced_wrapper_variant_names_no_built_node_and_no_wrapper_choice(tmp_path: Path, host_unchanged):
    # stand-ins.yaml's sliced cluster, its backend chosen by iptables-wrapper, with a gate 1.33 does not know.
    text = SLICED.read_text().replace(
        'kubeVersion: "1.33"',
        'kubeVersion: "1.33"\n  iptablesBackend: wrapper\n  featureGates: {AllowServiceExternalIPs: true}',
    )
    scenario = tmp_path / "skipped.yaml"
    scenario.write_text(text)
    argv = [sys.executable, "-m", "lab", "run", str(scenario), "--allow-skips", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert {r["skipped"] for r in document["results"]} == {
        "kube-proxy 1.33 has no feature gate AllowServiceExternalIPs (added in 1.36, kubernetes#137293): it refuses "
        "to start with a gate it does not know"
    }
    assert "sliced:" not in done.stderr and "iptables-wrapper" not in done.stderr, done.stderr
    assert "sliced" not in document and {r["iptables_wrapper"] for r in document["results"]} == {None}
