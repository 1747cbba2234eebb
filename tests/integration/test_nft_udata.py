"""kubernetes#136786 on this kernel with Debian's binaries: topologies/nft-udata-crash.yaml shows bookworm's nft
(kube-proxy's) crashing on the host's set written by trixie's nft; here the same node with trixie's nft for
kube-proxy too serves the Service, so the crash, not the host's rules, is what cuts it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.api import run_variant, to_json
from lab.describe.load import load_scenario

SCENARIO = Path(__file__).parents[2] / "topologies" / "nft-udata-crash.yaml"


def _run(tmp_path: Path, kube_proxy_nft: str) -> tuple[str, str]:
    """The probe's outcome, and the result as `lab run --json` gives it (what kube-proxy's sync said included)."""
    text = SCENARIO.read_text().replace("kubeProxy: {nft: bookworm}", f"kubeProxy: {{nft: {kube_proxy_nft}}}")
    path = tmp_path / "s.yaml"
    path.write_text(text)
    run = run_variant(load_scenario(path).variants[0])
    if run.skipped:
        pytest.skip(run.skipped)
    (result,) = run.results
    return result.observed.outcome, json.dumps(to_json(result))


@pytest.mark.parametrize(
    ("release", "outcome", "crashed"), [("bookworm", "unreachable", True), ("trixie", "delivered", False)]
)
def test_kube_proxys_nft_release_decides(tmp_path: Path, release: str, outcome: str, crashed: bool) -> None:
    observed, said = _run(tmp_path, release)
    assert observed == outcome
    assert ("nftables sync failed on node1: nft crashed on the nftables script: killed by SIGSEGV" in said) == crashed
