"""`lab validate` reports every error of a file in one pass: every field the schema refuses (one per field, in
the form of a union the value meant), then what the resolve steps refuse in the probes the schema read; each at
its file:line and field, the exit status 2 as for one error."""

from __future__ import annotations

import pytest
from support.scenario import BASE, write

from lab.cli import main
from lab.describe.errors import ScenarioError, ScenarioErrors
from lab.describe.load import load_scenario

PROBE = """\
  - name: NAME
    from: client
    to: {service: web, port: http, via: nodePort, node: node2}
    expect: {outcome: delivered}
"""


def errors_of(tmp_path, text: str) -> list[tuple[int | None, str, str]]:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, text))
    found = info.value.errors if isinstance(info.value, ScenarioErrors) else [info.value]
    return [(e.line, e.field, e.message) for e in found]


def line_of(text: str, start: str, after: str = "") -> int:
    lines = text.splitlines()
    return lines.index(start, lines.index(after) if after else 0) + 1


def test_every_schema_error_of_a_file_at_its_line(tmp_path):
    text = (
        BASE.replace("replicas: 2", "replicas: true")
        .replace("underlay: 192.168.56.0/24}", "underlay: 192.168.56.0/24, masqueradeAll: 1}")
        .replace("expect: {outcome: delivered, source: node2}", "expect: {outcom: delivered}\n    keep: yes please")
    )
    found = errors_of(tmp_path, text)
    assert [(line, field) for line, field, _ in found] == [
        (2, "cluster.masqueradeAll"),
        (line_of(text, "      replicas: true"), "workload[0].spec.replicas"),
        (line_of(text, "    expect: {outcom: delivered}"), "probes[0].expect.outcom"),
        (line_of(text, "    keep: yes please"), "probes[0].keep"),
    ], found
    # The misspelt field, not also "outcome is missing" nor the list form of `expect` failing.
    assert "did you mean outcome?" in found[2][2]


WEBB = "    to: {service: webb, port: http, via: nodePort, node: node2}"
FLOW_OF_A = "  - name: c\n    flow: a\n    expect: {outcome: delivered}\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            BASE
            + PROBE.replace("NAME", "a").replace("from: client", "from: nobody")
            + PROBE.replace("NAME", "b").replace("service: web", "service: webb")
            + FLOW_OF_A
            + PROBE.replace("NAME", "d").replace("{outcome: delivered}", "{outcome: delivered, backend: nginx}"),
            [
                ("    from: nobody", "probes[1].from"),
                (WEBB, "probes[2].to.service"),
                ("    expect: {outcome: delivered, backend: nginx}", "probes[4].expect.backend"),
            ],
            id="resolve-errors-of-several-probes-none-for-a-flow-of-a-refused-one",
        ),
        pytest.param(
            BASE
            + PROBE.replace("NAME", "a").replace("{outcome: delivered}", "{outcome: delivered}\n    attempts: lots")
            + FLOW_OF_A
            + PROBE.replace("NAME", "d").replace("service: web", "service: webb"),
            [("    attempts: lots", "probes[1].attempts"), (WEBB, "probes[3].to.service")],
            id="with-schema-errors-in-probes-the-other-probes-are-still-resolved",
        ),
    ],
)
def test_every_probe_is_checked(tmp_path, text, expected):
    found = errors_of(tmp_path, text)
    assert [(line, field) for line, field, _ in found] == [(line_of(text, at), field) for at, field in expected], found


def test_lab_validate_prints_each_error_on_a_line_and_exits_2(tmp_path, capsys):
    bad = write(tmp_path, BASE.replace("replicas: 2", "replicas: true") + PROBE.replace("NAME", "x") + "    keep: 1\n")
    good = tmp_path / "good.yaml"
    good.write_text(BASE)
    with pytest.raises(SystemExit) as exited:
        main(["validate", str(bad), str(good)])
    assert exited.value.code == 2
    said = capsys.readouterr()
    errors = said.err.strip().splitlines()
    assert len(errors) == 2 and all(line.startswith(f"error: {bad}:") for line in errors), said.err
    assert "workload[0].spec.replicas" in errors[0] and "probes[1].keep" in errors[1], said.err
    assert f"{good}: ok" in said.out
