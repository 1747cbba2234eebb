"""`when: {kernel: ...}`: an expectation for the kernels a behaviour belongs to, judged against the release the
pipeline gives describe (describe reads nothing of the machine); bad conditions refused in words, at their line."""

from __future__ import annotations

import pytest
from support.scenario import BASE, write

from lab.describe.errors import ScenarioError
from lab.describe.kernel_when import KernelConditionError, conditions, holds
from lab.describe.load import load_scenario
from lab.judge.verdict import judge
from lab.probe.observation import Observation


def by_kernel(condition: str) -> str:
    return BASE.replace(
        "    expect: {outcome: delivered, source: node2}\n",
        f"    expect:\n      - {{when: {{kernel: {condition}}}, outcome: dropped}}\n"
        "      - {outcome: delivered, source: node2}\n",
    )


@pytest.mark.parametrize(
    ("release", "written", "expected"),
    [
        ("5.10.0-32-amd64", ["<6.1"], True),
        ("6.1.0-50-amd64", ["<6.1"], False),
        ("6.1.0-50-amd64", ["==6.1"], True),
        ("6.12.117+deb13-amd64", ["==6.1"], False),
        ("6.12.117+deb13-amd64", [">=6.1", "<6.18"], True),
        ("6.18.0", [">=6.1", "<6.18"], False),
        ("6.18.0", [">6"], False),  # compared on as many numbers as the condition gives
        ("7.0.1", [">6"], True),
        ("5.10.0-32-amd64", ["<=5.10.0"], True),
    ],
)
def test_a_condition_compares_the_release_on_the_numbers_it_gives(release, written, expected):
    assert holds(release, conditions(written)) is expected


@pytest.mark.parametrize("bad", ["6.1", "~6.1", "<6.1.0.1", "<six", [], 6])
def test_anything_else_is_refused_in_words(bad):
    with pytest.raises(KernelConditionError) as info:
        conditions(bad)
    assert "condition" in str(info.value)


def test_the_expectation_follows_the_kernel_the_pipeline_gave(tmp_path):
    path = write(tmp_path, by_kernel('"<6.1"'))
    old = load_scenario(path, kernel="5.10.0-32-amd64").variants[0].probes[0].expected
    new = load_scenario(path, kernel="6.1.0-50-amd64").variants[0].probes[0].expected
    assert (old.outcome, old.kernel) == ("dropped", "5.10.0-32-amd64, which is <6.1")
    assert (new.outcome, new.kernel) == ("delivered", "6.1.0-50-amd64")
    # Described for no kernel, a kernel condition applies to none.
    assert load_scenario(path).variants[0].probes[0].expected.outcome == "delivered"


def test_a_range_is_a_list(tmp_path):
    path = write(tmp_path, by_kernel('[">=5.10", "<6.1"]'))
    expected = load_scenario(path, kernel="5.15.0").variants[0].probes[0].expected
    assert (expected.outcome, expected.kernel) == ("dropped", "5.15.0, which is >=5.10 and <6.1")
    assert load_scenario(path, kernel="5.4.0").variants[0].probes[0].expected.outcome == "delivered"


def test_a_bad_condition_is_refused_at_its_line_whichever_kernel_runs(tmp_path):
    path = write(tmp_path, by_kernel('"6.1"'))
    line = next(k for k, text in enumerate(path.read_text().splitlines(), 1) if 'kernel: "6.1"' in text)
    for kernel in ("5.10.0", None):
        with pytest.raises(ScenarioError) as info:
            load_scenario(path, kernel=kernel)
        assert info.value.field == "probes[0].expect[0].when.kernel"
        assert info.value.line == line
        assert "'6.1' is no kernel condition: expected an operator (<, <=, >=, > or ==)" in info.value.message


def test_the_verdict_names_the_kernel(tmp_path):
    expected = load_scenario(write(tmp_path, by_kernel('"<6.1"')), kernel="5.10.0-32-amd64")
    verdict = judge(expected.variants[0].probes[0].expected, Observation("delivered"))
    assert verdict.reasons == ("expected dropped on kernel 5.10.0-32-amd64, which is <6.1, got delivered",)


def test_a_list_is_for_the_kernel_only(tmp_path):
    text = BASE.replace(
        "    expect: {outcome: delivered, source: node2}\n",
        "    expect:\n      - {when: {proxyMode: [iptables, ipvs]}, outcome: dropped}\n"
        "      - {outcome: delivered, source: node2}\n"
        "matrix:\n  proxyMode: [iptables, ipvs]\n",
    )
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, text), kernel="6.1.0")
    assert info.value.field == "probes[0].expect[0].when.proxyMode"
    assert info.value.message == "one value of proxyMode expected (a list, a range, is for `kernel` only)"
