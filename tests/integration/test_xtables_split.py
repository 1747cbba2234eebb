"""The legacy/nft split on this kernel with Debian's binaries (topologies/iptables-legacy-nft-split.yaml): the host's
iptables-legacy FORWARD policy DROP (bullseye's iptables) drops what kube-proxy's iptables-nft (bookworm's) accepts,
and the evidence names the rule and its backend; with kube-proxy in legacy too, the host's policy still stands (a
pod's unaccepted connection is dropped by it) and kube-proxy's ACCEPT before it delivers the NodePort."""

from __future__ import annotations

from pathlib import Path

import pytest

import lab
from lab.api import run_variant, to_json
from lab.describe.load import load_scenario
from lab.describe.resolve.iptables_wrapper import choose_backend
from lab.describe.resolve.node_tables import restore_tables

SCENARIO = Path(__file__).parents[2] / "topologies" / "iptables-legacy-nft-split.yaml"


@pytest.mark.parametrize(
    ("backend", "node_port", "from_a_pod"),
    [
        ("nft", "dropped on node1 by iptables-legacy filter FORWARD: policy DROP", "iptables-legacy filter FORWARD"),
        ("legacy", "", "filter FORWARD"),
    ],
)
def test_the_other_backends_policy_decides(backend: str, node_port: str, from_a_pod: str) -> None:
    (topo,) = [v for v in load_scenario(SCENARIO).variants if dict(v.variant)["iptablesBackend"] == backend]
    run = run_variant(topo)
    if run.skipped:
        pytest.skip(run.skipped)
    said = {result.probe.name: result.observed for result in run.results}
    met = [(rule["table"], rule["chain"], rule["rule"]) for rule in to_json(run.results[0])["observed"]["rules"]]
    # kube-proxy's ACCEPT of the marked packet, in its own backend, in both variants.
    assert any(chain == "KUBE-FORWARD" and rule.endswith("--mark 0x4000/0x4000 -j ACCEPT") for _, chain, rule in met)
    assert said["node-port"].outcome == ("dropped" if node_port else "delivered")
    assert said["node-port"].explanation == node_port
    assert said["cluster-ip-from-a-pod"].outcome == "dropped"
    assert said["cluster-ip-from-a-pod"].explanation == f"dropped on node1 by {from_a_pod}: policy DROP"


def test_the_wrappers_reading_is_what_the_kernels_tables_print() -> None:
    """iptables-wrapper v2 runs `iptables-nft-save -t mangle` and `iptables-legacy-save` (and ip6tables' of each);
    their output on the node, read as the lab reads restore input, gives the choice the lab made from the scenario
    (kube-proxy's rules, loaded since, write no kubelet chain). This machine's iptables is bookworm's 1.8.9, as in
    kube-proxy 1.31's image."""
    (topo,) = [v for v in load_scenario(SCENARIO).variants if dict(v.variant)["iptablesBackend"] == "wrapper"]
    with lab.up(SCENARIO, variant={"iptablesBackend": "wrapper"}) as cluster:
        node = cluster["node1"]
        nft = "".join(node.exec([f"{t}-nft-save", "-t", "mangle"]).stdout for t in ("iptables", "ip6tables"))
        legacy = "".join(node.exec([f"{t}-legacy-save"]).stdout for t in ("iptables", "ip6tables"))
    assert any(line.startswith(":KUBE-KUBELET-CANARY ") for line in nft.splitlines()), nft
    seen = choose_backend(topo.cluster.kube_version, restore_tables(legacy), restore_tables(nft))
    assert (seen.backend, seen.why) == (topo.cluster.iptables_backend, topo.cluster.iptables_backend_why)
