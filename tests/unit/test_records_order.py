"""--json lists several connections' backends and sources in one order whatever order they came in."""

from __future__ import annotations

from itertools import permutations

from support.scenario import BASE, ScriptedSession, write

from lab.describe.load import load_scenario
from lab.judge.attempts import run_probe
from lab.judge.results import ProbeResult
from lab.probe.observation import Observation
from lab.report.records import observed_text, to_record

JOINED = ("backend", "node", "source", "source_ip", "source_by_entry")  # (each connection's own lines keep their order)
SEEN = [
    Observation("delivered", backend="web-1", node="node1", source_ip="192.168.56.12", source="node2", entry="node2"),
    Observation("delivered", backend="web-0", node="node1", source_ip="192.168.56.11", source="node1", entry="node1"),
    Observation("delivered", backend="web-1", node="node1", source_ip="192.168.56.12", source="node2", entry="node2"),
]


def test_several_connections_are_listed_in_a_stable_order(tmp_path):
    text = BASE.replace(
        "    expect: {outcome: delivered, source: node2}\n", "    attempts: 3\n    expect: {outcome: delivered}\n"
    )
    (topo,) = load_scenario(write(tmp_path, text)).variants
    probe = topo.probes[0]
    records = []
    for order in permutations(SEEN):
        observed, verdict = run_probe(ScriptedSession(list(order)), probe, topo)  # type: ignore[arg-type]
        result = ProbeResult(topo, probe, observed, verdict)
        observed_record = to_record(result)["observed"]
        records.append(({key: observed_record[key] for key in JOINED}, observed_text(result)))
    (record, text), *others = records
    assert all(other == (record, text) for other in others), records
    assert (record["backend"], record["source"], record["source_ip"]) == (
        "web-0|web-1",
        "node1|node2",
        "192.168.56.11|192.168.56.12",
    )
    assert record["source_by_entry"] == "entry"


def test_the_kernel_counters_of_every_connection_are_summed(tmp_path):
    text = BASE.replace(
        "    expect: {outcome: delivered, source: node2}\n", "    attempts: 3\n    expect: {outcome: refused}\n"
    )
    (topo,) = load_scenario(write(tmp_path, text)).variants
    refused = Observation("refused", counters=(("node2", (("IcmpOutDestUnreachs", 1),)),))
    limited = Observation("dropped", counters=(("node2", (("IcmpOutRateLimitHost", 1),)),))
    observed, _ = run_probe(ScriptedSession([refused, refused, limited]), topo.probes[0], topo)  # type: ignore[arg-type]
    assert observed.counters == (("node2", (("IcmpOutDestUnreachs", 2), ("IcmpOutRateLimitHost", 1))),)
