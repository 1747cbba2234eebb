"""cni: flannel on a node whose iptables are legacy: flanneld's rules are written with iptables-legacy, as flannel's
image writes them where the node's rules are legacy, and stand after kube-proxy's sync (the catalogue's
topologies/flannel-source-ip.yaml runs the nft flavour)."""

from __future__ import annotations

from support.host import REPO

from lab.api import run_variant
from lab.describe.load import load_scenario

SCENARIO = REPO / "topologies" / "flannel-source-ip.yaml"


def test_flannels_rules_in_legacy_iptables_masquerade_before_and_after_a_sync():
    matrix = {"proxyMode": ["iptables"], "iptablesBackend": ["legacy"]}
    (topo,) = load_scenario(SCENARIO, matrix).variants
    run = run_variant(topo, only={"pod-to-other-node", "pod-to-other-node-after-a-sync"})
    seen = {r.probe.name: r.observed for r in run.results}
    for name in ("pod-to-other-node", "pod-to-other-node-after-a-sync"):
        assert (seen[name].outcome, seen[name].source) == ("delivered", "node3"), seen[name].explanation
