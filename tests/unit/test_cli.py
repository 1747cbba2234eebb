"""The command line as a user runs it, where no root is needed: `lab render`, and mistakes on the command
line, which are named before anything is built."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def lab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, cwd=REPO, check=False)


def lab_render(*args: str) -> subprocess.CompletedProcess:
    return lab("render", *args)


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


def said(done: subprocess.CompletedProcess) -> str:
    return " ".join(done.stderr.split())  # the terminal wraps long lines


def test_a_variant_filter_that_matches_nothing_lists_the_variants():
    done = lab("run", "topologies/hairpin.yaml", "--variant", "proxyMode=bogus")
    assert done.returncode == 2 and not done.stdout
    assert (
        "no variant matches --variant proxyMode=bogus; the variants are: proxyMode=iptables, hairpinMode=hairpin-veth; "
        in said(done)
    )


def test_a_variant_without_value_and_an_unknown_probe_are_refused():
    done = lab("run", "topologies/hairpin.yaml", "--variant", "proxyMode")
    assert done.returncode == 2 and "expected KEY=VALUE, e.g. proxyMode=ipvs, got 'proxyMode'" in said(done)
    done = lab("run", "topologies/hairpin.yaml", "--probe", "nope")
    assert done.returncode == 2
    assert "no probe named nope; the probes are: neighbour-to-service, pod-to-own-service" in said(done)


def test_bench_scale_wants_numbers():
    done = lab("bench", "--scale", "10,x")
    assert done.returncode == 2 and "expected positive numbers separated by commas" in said(done)


def test_an_ipv6_service_address_is_named():
    done = lab("validate", "tests/unit/fixtures/ipv6-external-ip.yaml")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert said(done) == (
        "error: tests/unit/fixtures/ipv6-external-ip.yaml:20: workload[1].spec.externalIPs[0]: "
        "expected an IPv4 address (the lab models IPv4 clusters only), got '2001:db8::1'"
    )
