"""kube-proxy 1.37's reconciler on the real kernel (#139629): the catalogue's topologies/udp-scale-to-zero.yaml
at 1.36 and 1.37. A UDP flow kept from one source port while its Service scales to zero: 1.36 leaves its conntrack
entry, so the next datagram follows it to the gone pod's address and is lost (#139628); 1.37 deletes it, so the
datagram is a new flow and meets the REJECT of a Service without endpoints. (The catalogue's own matrix stops at
1.35; this test adds the two releases instead of editing it.)"""

from __future__ import annotations

import pytest
from support.host import REPO

from lab.api import run_variant
from lab.describe.load import load_scenario

SCENARIO = REPO / "topologies" / "udp-scale-to-zero.yaml"


@pytest.mark.parametrize("mode", ["iptables", pytest.param("nftables", marks=pytest.mark.nftables)])
@pytest.mark.parametrize(("version", "outcome"), [("1.36", "dropped"), ("1.37", "refused")])
def test_same_flow_after_scale_to_zero(mode, version, outcome, host_unchanged, own_namespaces):
    (topo,) = load_scenario(SCENARIO, {"proxyMode": [mode], "kubeVersion": [version]}).variants
    results = {r.probe.name: r.observed for r in run_variant(topo).results}
    assert results["same-flow-after-scale-to-zero"].outcome == outcome, results["same-flow-after-scale-to-zero"]
    assert results["same-flow-after-scale-up"].outcome == "delivered"
    assert own_namespaces() == []
