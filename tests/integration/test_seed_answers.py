"""The five field reports' questions (docs/reports.md), answered by the run's one-line summary of the catalogue
probe that reproduces each: its `question:` answered from the kernel's evidence (lab/report/answer.py), checked
here against the report's own conclusion (the node, the rule, the setting it names). The probes run one by one
(--probe, --variant) to keep it cheap. The native modes are proven here; ipvs needs ip_vs (lab vm on a kernel
without it): report 3's answer is checked in ipvs where the kernel has it."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from support.host import REPO

from lab.doctor import kernel_has, skip_reason

IPVS = pytest.mark.skipif(not kernel_has("ip_vs"), reason=skip_reason("ip_vs"))


def answer(scenario: str, probe: str, *variant: str) -> str:
    """The --json answer of one probe in one variant, which must be the table's line too."""
    argv = [f"topologies/{scenario}", "--probe", probe]
    for axis in variant:
        argv += ["--variant", axis]
    run = subprocess.run(
        [sys.executable, "-m", "lab", "run", *argv, "--json"], capture_output=True, text=True, cwd=REPO, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (record,) = json.loads(run.stdout)["results"]
    said = record["observed"]["answer"]
    assert said, record
    return said


# Report 1: why does a pod on a node without an ingress pod lose the LoadBalancer? kube-proxy captures the LB IP on
# every node and sends it to the local endpoints, none there ("has no local endpoints"), unless it knows the
# cluster CIDR and sends pod traffic to the cluster-wide chain.
@pytest.mark.parametrize(
    ("mode", "dropped_by"),
    [("iptables", "has no local endpoints"), ("nftables", "@no-endpoint-services")],
)
def test_report1_a_pod_without_a_local_ingress_is_dropped_on_its_node_for_want_of_a_local_endpoint(mode, dropped_by):
    said = answer(
        "lb-local-from-pods.yaml",
        "pod-on-node-without-ingress",
        f"proxyMode={mode}",
        "kubeVersion=1.34",
        "kubeProxyClusterCIDR=false",
    )
    assert said.startswith("dropped on node2 by ") and dropped_by in said, said


@pytest.mark.parametrize(("mode", "cluster_wide"), [("iptables", "nat KUBE-SVC-"), ("nftables", "kube-proxy service-")])
def test_report1_with_the_cluster_cidr_the_pod_is_sent_cluster_wide_to_the_ingress_node(mode, cluster_wide):
    said = answer(
        "lb-local-from-pods.yaml",
        "pod-on-node-without-ingress",
        f"proxyMode={mode}",
        "kubeVersion=1.34",
        "kubeProxyClusterCIDR=true",
    )
    assert said.startswith("delivered by ingress-nginx-0 on node1; node2: DNATed"), said
    assert f"chosen the only endpoint by {cluster_wide}" in said, said


# Report 2: with node1's IP as an externalIP, can node2 still reach node1? In iptables mode only :80 is captured:
# node1's apiserver answers node2, and the Service's port on node1's IP is masqueraded on node1 to nginx.
def test_report2_iptables_node1_stays_reachable_and_only_port_80_is_the_service():
    said = answer("externalip-node-ip.yaml", "apiserver-from-node2", "proxyMode=iptables", "kubeVersion=1.20")
    assert said == "delivered by kube-apiserver on node1", said
    said = answer(
        "externalip-node-ip.yaml", "external-ip-port-80-from-client", "proxyMode=iptables", "kubeVersion=1.20"
    )
    assert said.startswith("nginx saw node1 (192.168.56.11): masqueraded on node1: externalTrafficPolicy Cluster"), said


# Report 3: which source does the backend see through each node? Cluster: the receiving node's (node2's address;
# node1's bridge address for the local pod), masqueraded there; Local: the client's own, and a drop on node2.
@pytest.mark.parametrize("mode", ["iptables", "nftables", pytest.param("ipvs", marks=IPVS)])
def test_report3_the_backend_sees_the_receiving_node_masqueraded_there_for_etp_cluster(mode):
    cluster = (f"proxyMode={mode}", "externalTrafficPolicy=Cluster")
    said = answer("nodeport-source-ip.yaml", "via-node-without-pod", *cluster)
    assert said == "openresty saw node2 (192.168.56.12): masqueraded on node2: externalTrafficPolicy Cluster", said
    said = answer("nodeport-source-ip.yaml", "via-node-with-pod", *cluster)
    assert said.startswith("openresty saw node1/cni0 (10.244.1.1): masqueraded on node1: externalTrafficPolicy"), said


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_report3_etp_local_keeps_the_client_and_drops_on_the_node_without_the_pod(mode):
    local = (f"proxyMode={mode}", "externalTrafficPolicy=Local")
    said = answer("nodeport-source-ip.yaml", "via-node-with-pod", *local)
    assert said == "openresty saw client (192.168.56.100): the client's own address, no step on the way rewrote it"
    assert answer("nodeport-source-ip.yaml", "via-node-without-pod", *local).startswith("dropped on node2 by ")


# Report 4: why does a pod on the ingress node fail through the internal LB with Local? The LB sends the connection
# back to the client's own node, and the answer comes back without passing the LB's NAT.
@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_report4_the_internal_lb_loops_back_to_the_clients_node_and_the_answer_bypasses_it(mode):
    said = answer("lb-loopback-internal-lb.yaml", "local-from-ingress-node", f"proxyMode={mode}", "kubeVersion=1.31")
    assert said.startswith("dropped: the answer reached the client from 172.18.32.11:30000, not 172.18.96.4:80"), said
    assert "without passing the NAT" in said, said
    assert 'DNATed by nat LOAD-BALANCER ("clb-internal default/ingress-local: health node1 200' in said, said
    assert said.endswith("to 172.18.32.11:30000 (node1)"), said


# Report 5: where does the source go? Cluster through a node without nginx: that node's tunnel address; Local: the
# client's real address; a pod reaching itself through its Service: masqueraded on its node (the hairpin).
def test_report5_cluster_through_the_router_shows_the_entry_node_or_its_tunnel_address():
    said = answer("metallb-bgp-ipip.yaml", "client-via-router", "proxyMode=iptables", "externalTrafficPolicy=Cluster")
    # A connection whose backend is on its entry node sees that node (entry), one sent on the tunnel's address;
    # 12 or more connections over three pods give a local one but in one run of about 130.
    assert re.search(r" saw (entry\|)?entry/tunl0 \(", said), said
    assert "; the connection shown: masqueraded on cy01-ceph14" in said, said
    assert said.endswith(": externalTrafficPolicy Cluster"), said


def test_report5_cluster_shows_the_receiving_nodes_tunnel_address():
    said = answer(
        "metallb-bgp-ipip.yaml", "nodeport-on-node-without-nginx", "proxyMode=iptables", "externalTrafficPolicy=Cluster"
    )
    assert said.startswith("ng-test-rs-0, ng-test-rs-1, ng-test-rs-2 saw cy01-ceph144/tunl0 (10.233.100.0): "), said
    assert said.endswith("masqueraded on cy01-ceph144: externalTrafficPolicy Cluster"), said


def test_report5_local_shows_the_clients_address_and_a_pod_reaching_itself_is_masqueraded_on_its_node():
    local = ("proxyMode=iptables", "externalTrafficPolicy=Local")
    said = answer("metallb-bgp-ipip.yaml", "client-via-router", *local)
    assert "saw openstack91 (10.10.6.91): the client's own address" in said and "masqueraded" not in said, said
    said = answer("metallb-bgp-ipip.yaml", "pod-to-own-service", *local)
    assert said == (
        "debug saw cy01-ceph144 (10.10.4.144): masqueraded on cy01-ceph144: kube-proxy's hairpin masquerade "
        "(always written)"
    ), said
