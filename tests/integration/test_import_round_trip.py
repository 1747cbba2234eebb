"""The round trip a user makes: `lab import dump.yaml kube-proxy.yaml version.yaml > s.yaml && lab run s.yaml`, on
the nodeport-source-ip cluster (docs/reports.md, report 3) as kubectl prints it. The imported probes only observe;
what they observe on the kernel must be what the catalogue's topologies/nodeport-source-ip.yaml expects, for
externalTrafficPolicy Cluster (as the dump has it) and Local (the matrix axis on the imported file)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.host import REPO
from support.labrun import run_results

DUMP = REPO / "tests" / "fixtures" / "kubectl" / "nodeport-source-ip"
PROBE = "default-openresty-http-"
# The import probes through one node of each kind openresty's rules tell apart: node1 (its endpoint's) and node2
# (no endpoint; node3 is of its kind), the cluster IP from a pod on each.
PROBES = [f"{PROBE}node-port-via-node{i}" for i in (1, 2)] + [f"{PROBE}cluster-ip-from-node{i}" for i in (1, 2)]

# What topologies/nodeport-source-ip.yaml expects, per policy: (outcome, backend, source address).
EXPECTED = {
    "Cluster": {
        "node-port-via-node1": ("delivered", "openresty", "10.244.1.1"),  # node1/cni0
        "node-port-via-node2": ("delivered", "openresty", "192.168.56.12"),  # node2
        "cluster-ip-from-node1": ("delivered", "openresty", "10.244.1.1"),  # openresty to itself: masqueraded, cni0
        "cluster-ip-from-node2": ("delivered", "openresty", "10.244.2.2"),  # coredns on node2, not NATed
    },
    "Local": {
        "node-port-via-node1": ("delivered", "openresty", "192.168.56.254"),  # the client's own address
        "node-port-via-node2": ("dropped", None, None),
        "cluster-ip-from-node1": ("delivered", "openresty", "10.244.1.1"),
        "cluster-ip-from-node2": ("delivered", "openresty", "10.244.2.2"),
    },
}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    out = tmp_path_factory.mktemp("import") / "s.yaml"
    with out.open("w") as handle:
        done = subprocess.run(
            [sys.executable, "-m", "lab", "import", "dump.yaml", "kube-proxy.yaml", "version.yaml"],
            stdout=handle,
            stderr=subprocess.PIPE,
            text=True,
            cwd=DUMP,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize("policy", ["Cluster", "Local"])
def test_imported_cluster_runs_as_the_catalogue_expects(scenario, policy, host_unchanged):
    only = [arg for name in PROBES for arg in ("--probe", name)]
    done = subprocess.run(
        [sys.executable, "-m", "lab", "run", str(scenario), "--json", "--matrix", f"externalTrafficPolicy={policy}"]
        + only,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr  # every probe only observes: a failure is a run that broke
    seen = {
        r["probe"].removeprefix(PROBE): (r["observed"]["outcome"], r["observed"]["backend"], r["observed"]["source_ip"])
        for r in json.loads(done.stdout)["results"]
    }
    assert seen == EXPECTED[policy]


def test_pytest_runs_the_imported_file_as_tests(scenario):
    """`sudo pytest s.yaml`: every imported probe a test item, each passing (they only observe)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(scenario)],
        capture_output=True,
        text=True,
        cwd=scenario.parent,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "10 passed" in done.stdout


SHOP = REPO / "tests" / "fixtures" / "kubectl" / "shop"
NODE3 = "ip-10-0-1-48-eu-west-1-compute-internal"  # runs web's only terminating endpoint, and no ready one


@pytest.mark.parametrize("mode", ["iptables", "nftables"])
def test_imported_endpoint_conditions_hold_on_the_kernel(mode, tmp_path, host_unchanged):
    """The EKS-like cluster's slices as kube-proxy read them: through the node whose only web endpoint is
    terminating (externalTrafficPolicy Local) that endpoint answers, the client's address kept (kube-proxy's
    fallback to serving terminating endpoints); the not-ready api endpoint never answers; the ipMode Proxy address
    reaches a backend through the lab's load balancer."""
    out = tmp_path / "s.yaml"
    files = [str(SHOP / f) for f in ("dump.yaml", "kube-proxy.yaml", "version.yaml")]
    done = subprocess.run(
        [sys.executable, "-m", "lab", "import", *files, "-o", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    seen = {r["probe"]: r["observed"] for r in run_results(str(out), "--matrix", f"proxyMode={mode}")}
    terminating = seen[f"shop-web-http-node-port-via-{NODE3}"]
    assert (terminating["backend"], terminating["source_ip"]) == ("web-6d4cf56db6-qq7tz", "10.0.3.254")
    assert {o["backend"] for p, o in seen.items() if p.startswith("payments-api-")} == {"api-5b9f7c8d4-kx8wq"}
    ready_web = {"web-6d4cf56db6-2xkqp", "web-6d4cf56db6-8vbnm"}
    # Each probe says every endpoint it reached, joined with "|" (docs/scenarios.md, Every endpoint the draw can give).
    reached = {b for p, o in seen.items() if p.startswith("shop-web-http-cluster-ip-") for b in o["backend"].split("|")}
    assert reached <= ready_web
    assert seen["shop-web-http-load-balancer"]["outcome"] == "delivered"


KUBECTL = REPO / "tests" / "fixtures" / "kubectl"


@pytest.mark.parametrize(("cluster", "probes"), [("dual-stack", 5), ("ipv6-only", 3)])
def test_imported_dual_stack_and_ipv6_clusters_run(cluster, probes, tmp_path, host_unchanged):
    """`lab import` of a dual-stack and an IPv6-only kind cluster, then `lab run`: every probe delivered by a web pod,
    each in its family (a `-ipv6` probe, and every probe of the IPv6-only Service web6 or cluster, from an IPv6
    source; the dual-stack Service's other probes from an IPv4 one)."""
    out = tmp_path / "s.yaml"
    files = [str(KUBECTL / cluster / f) for f in ("dump.yaml", "kube-proxy.yaml", "version.yaml")]
    done = subprocess.run(
        [sys.executable, "-m", "lab", "import", *files, "-o", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "lab", "run", str(out), "--json"], capture_output=True, text=True, cwd=REPO, timeout=600
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    assert len(results) == probes
    for r in results:
        observed = r["observed"]
        assert (observed["outcome"], observed["backend"][:4]) == ("delivered", "web-"), r
        ipv6 = cluster == "ipv6-only" or r["probe"].endswith("-ipv6") or "-web6-" in r["probe"]
        assert (":" in observed["source_ip"]) == ipv6, r
