"""The schema converts nothing: a boolean is true or false, a whole number a whole number (Kubernetes' API refuses
`replicas: true` too), each error at the line of the field that holds it, and an error about a scale step's count
is at that step."""

from __future__ import annotations

import pytest
from support.scenario import BASE, error_for, write

from lab.cli import main
from lab.describe.load import load_scenario

KEEP = "    keep: true\n"
CHECK = "  - name: later\n    flow: p\n    expect: {outcome: delivered}\n"
SCALE = (
    "  - name: later\n    before:\n      - {scale: Deployment/web, replicas: REPLICAS}\n    from: client\n"
    "    to: {service: web, port: http, via: nodePort, node: node2}\n    expect: {outcome: delivered}\n"
)


def edited(old: str, new: str, text: str = BASE) -> str:
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (BASE + '    keep: "yes"\n', "probes[0].keep", "expected true or false, not 'yes'"),
        (BASE + "    keep: 1\n", "probes[0].keep", "expected true or false, not 1"),
        (BASE + '    keep: "true"\n', "probes[0].keep", "not 'true' (quoted text: write it without quotes)"),
        (edited("replicas: 2", "replicas: true"), "workload[0].spec.replicas", "expected a whole number, not true"),
        (edited("replicas: 2", 'replicas: "2"'), "workload[0].spec.replicas", "not '2' (quoted text"),
        (edited("replicas: 2", "replicas: 2.0"), "workload[0].spec.replicas", "not 2.0 (a decimal number)"),
        (edited("containerPort: 8080", "containerPort: true"), "containerPort", "expected a whole number"),
        (edited("{matchLabels: {app: web}}", "{matchLabels: {app: true}}"), "matchLabels.app", "expected text"),
        (BASE + "    attempts: true\n", "probes[0].attempts", "expected a whole number, not true"),
        (BASE + "    sourcePort: true\n", "probes[0].sourcePort", "expected a whole number, not true"),
        (BASE + SCALE.replace("REPLICAS", "true"), "probes[1].before[0].replicas", "expected a whole number"),
        (
            edited("underlay: 192.168.56.0/24}", "underlay: 192.168.56.0/24, masqueradeAll: 1}"),
            "cluster.masqueradeAll",
            "expected true or false, not 1",
        ),
    ],
)
def test_values_of_the_wrong_type_are_refused_not_converted(tmp_path, text, field, message):
    error = error_for(tmp_path, text)
    assert error.field.endswith(field), str(error)
    assert message in error.message, str(error)


def test_keep_true_on_a_flow_check_is_refused(tmp_path):
    # keep: true once passed as attempts' default 1 (True == 1).
    error = error_for(tmp_path, BASE + KEEP + CHECK + KEEP)
    assert error.field == "probes[1]" and "leave out keep" in error.message, str(error)


def test_a_scale_step_beyond_the_pod_cidrs_is_named_at_the_step(tmp_path):
    text = BASE + SCALE.replace("REPLICAS", "100000")
    error = error_for(tmp_path, text)
    assert error.field == "probes[1].before[0].replicas", str(error)
    assert error.line == text.splitlines().index("      - {scale: Deployment/web, replicas: 100000}") + 1
    assert "100000 replicas of Deployment web" in error.message, str(error)


def test_a_boolean_axis_from_the_command_line_matches_when_true(tmp_path):
    text = edited(
        "    expect: {outcome: delivered, source: node2}\n",
        "    expect:\n      - {when: {masqueradeAll: true}, outcome: refused}\n      - {outcome: delivered}\n",
    )
    variants = load_scenario(write(tmp_path, text), {"masqueradeAll": ["true", "false"]}).variants
    assert [(t.cluster.masquerade_all, t.probes[0].expected.outcome) for t in variants] == [
        (True, "refused"),
        (False, "delivered"),
    ]


def test_one_variant_key_given_twice_is_refused_naming_it(tmp_path, capsys):
    path = write(tmp_path, BASE)
    with pytest.raises(SystemExit) as exited:
        main(["render", str(path), "--node", "node1", "--variant", "proxyMode=ipvs", "--variant", "proxyMode=nftables"])
    assert exited.value.code == 2
    said = capsys.readouterr().err
    assert "--variant proxyMode=ipvs --variant proxyMode=nftables: proxyMode is given twice" in said, said


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (BASE + "matrix:\n  kubeVersion: [1.30, 1.31]\n", "matrix.kubeVersion[0]"),
        (
            edited("expect: {outcome: delivered, source: node2}", "expect: {when: {kubeVersion: 1.30}}")
            + 'matrix:\n  kubeVersion: ["1.30", "1.31"]\n',
            "probes[0].expect.when.kubeVersion",
        ),
    ],
)
def test_an_unquoted_version_in_the_matrix_or_a_when_is_refused_not_read_as_another(tmp_path, text, field):
    # `when: {kubeVersion: 1.30}` was read as "1.3", matched no variant, and the expectation never applied.
    error = error_for(tmp_path, text)
    assert error.field == field, str(error)
    assert 'the number 1.3 (YAML reads 1.30 as 1.3: write it in quotes, "1.30")' in error.message, str(error)
