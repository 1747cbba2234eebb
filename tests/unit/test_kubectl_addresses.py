"""`lab import` reads every address and network of a dump through the one parser (lab/describe/ip.py): a value
Kubernetes would refuse is refused at its file and line, never a traceback nor a value carried into rules; a
legacy spelling Kubernetes takes is read as it reads it, and said."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHOP = REPO / "tests" / "fixtures" / "kubectl" / "shop"


def _import(tmp_path: Path, old: str, new: str) -> subprocess.CompletedProcess:
    text = (SHOP / "dump.yaml").read_text()
    assert old in text
    dump = tmp_path / "dump.yaml"
    dump.write_text(text.replace(old, new, 1))
    files = [str(dump), str(SHOP / "kube-proxy.yaml"), str(SHOP / "version.yaml"), "-o", str(tmp_path / "s.yaml")]
    return subprocess.run(
        [sys.executable, "-m", "lab", "import", *files], capture_output=True, text=True, cwd=REPO, check=False
    )


def _line(old: str) -> int:
    text = (SHOP / "dump.yaml").read_text()
    return text[: text.index(old)].count("\n") + 1


@pytest.mark.parametrize(
    ("old", "new", "field", "words"),
    [
        ("    podIP: 100.64.1.10", "    podIP: ' 100.64.1.10'", "status.podIP", "space around"),
        ("    - ip: 100.64.1.10", "    - ip: 'fd00::a%x'", "status.podIPs[0].ip", "zone"),
        ("    clusterIP: 172.20.14.7", '    clusterIP: "fd00::1%x\\n-A INPUT -j ACCEPT"', "spec.clusterIP", "zone"),
        ("    - 172.20.14.7", "    - '172.20.14.7 '", "spec.clusterIPs[0]", "space around"),
        ("    - 203.0.113.0/24", "    - 203.0.113.0/33", "spec.loadBalancerSourceRanges[0]", "at most 32"),
        ("      - ip: 198.51.100.7", "      - ip: 198.51.100.7%x", "status.loadBalancer.ingress[0].ip", "zone"),
        ("      - ip: 198.51.100.7", "      - ip: [198.51.100.7]", "status.loadBalancer.ingress[0].ip", "expected"),
    ],
)
def test_an_address_kubernetes_refuses_is_refused_at_its_line(tmp_path, old, new, field, words):
    done = _import(tmp_path, old, new)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"dump.yaml:{_line(old)}:" in done.stderr and field in done.stderr and words in done.stderr
    assert not (tmp_path / "s.yaml").exists()


def test_legacy_spellings_are_read_as_kubernetes_reads_them_and_said(tmp_path):
    done = _import(tmp_path, "    podIP: 100.64.1.10", "    podIP: 100.064.001.010")
    assert done.returncode == 0, done.stderr
    assert "100.064.001.010 read as 100.64.1.10, as Kubernetes reads it" in done.stderr
    assert "064" not in (tmp_path / "s.yaml").read_text()


def test_a_source_range_with_space_or_host_bits_is_taken_as_the_api_server_takes_it(tmp_path):
    done = _import(tmp_path, "    - 203.0.113.0/24", "    - ' 203.0.113.9/32 '")
    assert done.returncode == 0, done.stderr
    assert "203.0.113.9/32" in (tmp_path / "s.yaml").read_text()
    done = _import(tmp_path, "    - 203.0.113.0/24", "    - 203.0.113.9/24")
    assert done.returncode == 0, done.stderr
    assert "203.0.113.9/24 read as 203.0.113.0/24" in done.stderr
