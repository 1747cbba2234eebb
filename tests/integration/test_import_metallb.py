"""`lab import` of a MetalLB layer 2 cluster (tests/fixtures/kubectl/metallb-l2: kubectl's Nodes, Pods, Services,
EndpointSlices, kube-proxy's ConfigMap and MetalLB's IPAddressPool and L2Advertisement), then `lab run`: each
load balancer IP is answered by the node MetalLB elects among those the L2Advertisement's nodeSelectors take, and
the packet enters the cluster there, in iptables and nftables mode."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.host import REPO
from support.labrun import run_results

CLUSTER = REPO / "tests" / "fixtures" / "kubectl" / "metallb-l2"
FILES = ("dump.yaml", "kube-proxy.yaml", "version.yaml", "metallb.yaml")

# probe: (entry node, backend, source the backend sees). web (externalTrafficPolicy Cluster, on node2, VIP
# 192.168.56.241): the nodeSelectors take node3 and node4 (node1 is also labelled out of load balancers), and
# sha256("node3#192.168.56.241") sorts first: node3 answers ARP, masquerades and forwards to node2. Without the
# selectors node2 would win. api (Local, on node4, VIP 192.168.56.240): only node4 has a ready local endpoint, so
# it announces and the client's own address (the underlay's highest, 192.168.56.254) reaches api.
EXPECTED = {
    "default-web-http-load-balancer": ("node3", "web", "192.168.56.13"),
    "default-api-http-load-balancer": ("node4", "api", "192.168.56.254"),
}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    out = tmp_path_factory.mktemp("import") / "s.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "lab", "import", *FILES, "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=CLUSTER,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "MetalLB's pool lan, announced by L2Advertisement lan-l2" in done.stderr
    return out


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_the_imported_metallb_vips_enter_through_the_announcing_node(scenario, mode, host_unchanged):
    only = [arg for name in EXPECTED for arg in ("--probe", name)]
    seen = {
        r["probe"]: (r["observed"]["entry"], r["observed"]["backend"], r["observed"]["source_ip"])
        for r in run_results(str(scenario), "--matrix", f"proxyMode={mode}", *only)
    }
    assert seen == EXPECTED


def test_a_bgp_advertised_address_enters_through_a_node_announcing_it(tmp_path, host_unchanged):
    """The same pool advertised by a BGPAdvertisement: the client, standing in for the BGP peer, routes each
    address over the nodes announcing it (node3 and node4 for web; only node4, with api's local endpoint, for
    api's Local address)."""
    bgp = tmp_path / "metallb.yaml"
    bgp.write_text((CLUSTER / "metallb.yaml").read_text().replace("kind: L2Advertisement", "kind: BGPAdvertisement"))
    out = tmp_path / "s.yaml"
    files = [str(CLUSTER / f) for f in FILES[:-1]] + [str(bgp)]
    done = subprocess.run(
        [sys.executable, "-m", "lab", "import", *files, "-o", str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    only = [arg for name in EXPECTED for arg in ("--probe", name)]
    seen = {r["probe"]: r["observed"] for r in run_results(str(out), *only)}
    web, api = seen["default-web-http-load-balancer"], seen["default-api-http-load-balancer"]
    assert web["entry"] in ("node3", "node4") and web["backend"] == "web"
    assert (api["entry"], api["backend"], api["source_ip"]) == ("node4", "api", "192.168.56.254")
