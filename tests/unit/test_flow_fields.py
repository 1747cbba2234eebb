"""Kept flows: the probe fields that keep a flow and check it, what a check inherits, and how a flow's history
reads. The flows themselves run on the kernel in tests/integration/test_kept_flows.py."""

from __future__ import annotations

import pytest
from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario
from lab.probe.flows import Exchange, history_lines

KEEP = "    keep: true\n"
CHECK = """\
  - name: later
    flow: p
    expect: {outcome: delivered}
"""


def test_a_check_takes_the_kept_probes_source_and_target(tmp_path):
    text = BASE + KEEP + "    every: 50\n" + CHECK
    probes = load_scenario(write(tmp_path, text)).variants[0].probes
    kept, check = probes
    assert (kept.keep_every, kept.flow) == (50, "")
    assert (check.keep_every, check.flow) == (0, "p")
    assert (check.source, check.dst_ip, check.dst_port, check.protocol) == (
        kept.source,
        kept.dst_ip,
        kept.dst_port,
        kept.protocol,
    )
    assert check.expected.outcome == "delivered" and check.expected.source is None


def test_every_defaults_to_200_ms(tmp_path):
    assert load_scenario(write(tmp_path, BASE + KEEP)).variants[0].probes[0].keep_every == 200


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (BASE + CHECK, "probes[1].flow", "no earlier probe named 'p' keeps its flow"),
        (BASE + KEEP + CHECK.replace("flow: p", "flow: q"), "probes[1].flow", "the kept ones are p"),
        (BASE + KEEP + CHECK + "    from: client\n", "probes[1]", "leave out from"),
        (BASE + KEEP + CHECK + "    attempts: 3\n", "probes[1]", "leave out attempts"),
        (BASE + "    every: 100\n", "probes[0]", "`every` goes with `keep: true`"),
        (BASE + KEEP + "    attempts: 2\n", "probes[0]", "keeps one connection"),
        (BASE + KEEP + "    every: 5\n", "probes[0].every", "a number of at least 20"),
        (BASE + KEEP + "    craft: outOfWindow\n", "probes[0]", "cannot be kept"),
        (BASE.replace("    from: client\n", ""), "probes[0]", "needs `from:` and `to:`"),
    ],
)
def test_flow_fields_are_checked_at_their_line(tmp_path, text, field, message):
    error = error_for(tmp_path, text)
    assert error.field == field, str(error)
    assert message in error.message, str(error)


def test_a_check_of_a_flow_from_a_deleted_pod_is_refused(tmp_path):
    text = (
        BASE.replace("from: client", "from: web-0")
        + KEEP
        + CHECK.replace("    flow: p\n", "    before: [{delete: Pod/web-0}]\n    flow: p\n")
    )
    error = error_for(tmp_path, text)
    assert error.field == "probes[1].flow" and "pod web-0, is deleted at line" in error.message, str(error)


def test_history_reads_as_runs_between_notes():
    events = [
        Exchange(10.0, "delivered", "web-0"),
        Exchange(10.1, "delivered", "web-0"),
        Exchange(10.25, note="steps before x"),
        Exchange(10.3, "delivered", "web-0"),
        Exchange(10.4, "dropped"),
        Exchange(10.9, "dropped"),
        Exchange(11.0, "delivered", "web-1"),
    ]
    assert history_lines(events, 10.0) == [
        "+0.0 s 2× delivered by web-0",
        "+0.2 s (steps before x)",
        "+0.3 s 1× delivered by web-0",
        "+0.4 s 2× dropped",
        "+1.0 s 1× delivered by web-1",
    ]
    assert history_lines([], 0.0) == []


PORT = "    sourcePort: 40000\n"
AGAIN = """\
  - name: again
    from: client
    to: {service: web, port: http, via: nodePort, node: node2}
    expect: {outcome: delivered}
"""


@pytest.mark.parametrize("second", [AGAIN + PORT, AGAIN + PORT + KEEP], ids=["probe", "kept-flow"])
def test_a_tcp_connection_from_a_kept_connections_port_is_refused_naming_both(tmp_path, second):
    # The kernel refuses the second connect() (EADDRNOTAVAIL): it crashed the run once validation had passed it.
    text = BASE + KEEP + PORT + second
    error = error_for(tmp_path, text)
    assert error.field == "probes[1].sourcePort", str(error)
    lines = text.splitlines()
    assert error.line == lines.index("    sourcePort: 40000", lines.index("  - name: again")) + 1, str(error)
    first = text.splitlines().index("  - name: p") + 1
    assert f"the connection probe 'p' (line {first}) keeps open" in error.message, str(error)
    assert "`flow: p`" in error.message, str(error)


@pytest.mark.parametrize(
    "second",
    [
        AGAIN + "    sourcePort: 40001\n",  # another port
        AGAIN.replace("node: node2", "node: node1") + PORT,  # another destination: another connection
        AGAIN.replace("from: client", "from: node1") + PORT,  # another source
    ],
)
def test_a_connection_the_kernel_can_open_beside_a_kept_one_is_accepted(tmp_path, second):
    assert len(load_scenario(write(tmp_path, BASE + KEEP + PORT + second)).variants[0].probes) == 2
