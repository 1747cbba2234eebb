"""The cross-mode table shows the backend where a probe's expectation names one (which pod a flow reaches), and
leaves it out where it is the kernel's random pick, so that modes differ only where they do."""

from __future__ import annotations

from support.scenario import BASE, write

from lab.describe.load import load_scenario
from lab.judge.results import ProbeResult, Timing, VariantRun
from lab.judge.verdict import Verdict
from lab.probe.observation import Observation
from lab.report.compare import compare_rows

NAMED = BASE.replace(
    "expect: {outcome: delivered, source: node2}", "expect: {outcome: delivered, backend: [web-0, web-1]}"
)


def rows(tmp_path, text: str, backends: dict[str, str]) -> list[list[str]]:
    runs = []
    for topo in load_scenario(write(tmp_path, text), {"proxyMode": ["iptables", "nftables"]}).variants:
        seen = Observation("delivered", backend=backends[dict(topo.variant)["proxyMode"]])
        result = ProbeResult(topo, topo.probes[0], seen, Verdict(True))
        runs.append(VariantRun(topo, [result], Timing(0, 0, 0, 0)))
    return compare_rows(runs, "proxyMode")[1]


def test_a_named_backend_is_compared(tmp_path):
    (row,) = rows(tmp_path, NAMED, {"iptables": "web-0", "nftables": "web-1"})
    assert row[2:] == ["delivered by web-0 PASS", "delivered by web-1 PASS", "≠"]


def test_a_backend_the_scenario_leaves_open_is_not(tmp_path):
    text = NAMED.replace("backend: [web-0, web-1]", "outcome: delivered").replace(
        "{outcome: delivered, outcome", "{outcome"
    )
    (row,) = rows(tmp_path, text, {"iptables": "web-0", "nftables": "web-1"})
    assert row[2:] == ["delivered PASS", "delivered PASS", ""]
