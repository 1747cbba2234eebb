"""`lab render` as a user runs it: no root needed, a mode/version pair kube-proxy never had is a clear error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def lab_render(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "lab", "render", *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO, check=False)


def test_nftables_render_prints_the_transaction():
    done = lab_render(
        "topologies/lb-local-from-pods.yaml", "--node", "node2",
        "--variant", "proxyMode=nftables", "--variant", "kubeVersion=1.34", "--variant", "kubeProxyClusterCIDR=true",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('add table ip kube-proxy { comment "rules for kube-proxy" ; }\n')


def test_nftables_for_a_version_without_it_names_the_supported_ones():
    done = lab_render("topologies/externalip-node-ip.yaml", "--node", "node2", "--variant", "proxyMode=nftables")
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and not done.stdout
    assert "externalip-node-ip.yaml: kube-proxy 1.20's nftables mode is not reproduced" in said
    assert "supported: 1.30, 1.31" in said and "Traceback" not in said
