"""The Python API's arguments, each class of wrong type or value a LabError in words (the argument, what was given,
what is expected) before anything is read, built or run: lab.up's file, variant and timeout, a probe, a step, an
actor's name, exec's argv, input and timeout, and what the runners hand to run_variant and to_json."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

import lab
from lab.api import Actor, Cluster, LabError, run_variant, to_json
from lab.api.arguments import given
from lab.api.cluster import hold, up_arguments
from lab.api.requests import variant_matrix
from lab.pytest_plugin import lab_up
from lab.selection import CATALOGUE

HAIRPIN = CATALOGUE / "hairpin.yaml"
SECONDS = r"expected seconds, a number above 0 and at most 60"


class BytesPath:
    def __fspath__(self) -> bytes:
        return b"hairpin.yaml"


class NoPath:
    def __fspath__(self) -> int:
        return 5


@pytest.mark.parametrize("file", [123, b"hairpin.yaml", BytesPath(), NoPath(), "", "a\0b.yaml", None])
def test_a_scenario_is_a_path_or_a_name(file):
    with pytest.raises(
        LabError, match=r"^file: expected a scenario file's path .* or a catalogue scenario's name, got"
    ):
        up_arguments(file, None, 0.5)


def test_a_name_alone_is_the_catalogues_scenario_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hairpin").write_text("a file here is never what a name means")  # a scenario runs commands as root
    assert up_arguments("hairpin", None, 0.5)[0] == HAIRPIN
    assert up_arguments("mine.yaml", None, 0.5)[0] == Path("mine.yaml")  # a path, relative to the caller
    assert up_arguments(Path("hairpin"), None, 0.5)[0] == Path("hairpin")
    with pytest.raises(LabError, match=r"^file: no catalogue scenario is named 'hairpn' \(the catalogue's: .*hairpin"):
        up_arguments("hairpn", None, 0.5)


@pytest.mark.parametrize(
    ("variant", "said"),
    [
        ("proxyMode=nftables", r"^variant: expected None or a mapping .*, got 'proxyMode=nftables' \(str\)"),
        ([("proxyMode", "ipvs")], r"^variant: expected None or a mapping .*, got \[\('proxyMode', 'ipvs'\)\] \(list\)"),
        ({1: "ipvs"}, r"^variant: expected .*axis named \(a string\).*, got \{1: 'ipvs'\} \(dict\)"),
        ({"proxyMode": ["ipvs"]}, r"^variant proxyMode: expected one value .*, got \['ipvs'\] \(list\)"),
        ({"proxyMode": None}, r"^variant proxyMode: expected one value .*, got None \(NoneType\)"),
    ],
)
def test_a_variant_is_a_mapping_of_axis_to_one_value(variant, said):
    with pytest.raises(LabError, match=said):
        up_arguments("hairpin", variant, 0.5)


def test_a_variant_as_the_command_line_spells_it():
    assert variant_matrix(None) == {}
    assert variant_matrix({"proxyMode": "ipvs", "masqueradeAll": False, "kubeVersion": 1.31}) == {
        "proxyMode": ["ipvs"],
        "masqueradeAll": ["false"],
        "kubeVersion": ["1.31"],
    }


@pytest.mark.parametrize(
    "timeout", ["x", -1, 0, math.nan, math.inf, 1e12, 61, pytest.param(10**5000, id="huge"), True, None, [1]]
)
def test_a_probes_timeout_is_seconds_within_a_minute(timeout):
    with pytest.raises(LabError, match=rf"^timeout: {SECONDS}, got .+ \(\w+\)$"):
        up_arguments("hairpin", None, timeout)


def test_a_timeout_in_range_is_taken_as_seconds():
    assert up_arguments("hairpin", None, 60)[2] == 60.0
    assert up_arguments("hairpin", None, 0.001)[2] == 0.001


def test_lab_up_refuses_its_arguments_before_anything_else(monkeypatch):
    # Not root: what lab.up checks first is what it says. Its arguments come before the root check, so before
    # anything is read or built.
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(LabError, match=rf"^timeout: {SECONDS}, got 'x'"), lab.up("hairpin", timeout="x"):
        pass
    with pytest.raises(LabError, match=r"^file: expected"), lab.up(123):
        pass
    with pytest.raises(LabError, match=r"needs root"), lab.up("hairpin"):
        pass


def test_the_fixture_checks_its_arguments_even_when_not_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    build = next(lab_up.__wrapped__())  # the factory the fixture yields
    with pytest.raises(pytest.fail.Exception, match=r"^lab_up: variant: expected None or a mapping"):
        build("hairpin", variant="proxyMode=ipvs")
    with pytest.raises(pytest.skip.Exception, match=r"needs root"):
        build("hairpin")


def unbuilt() -> Cluster:
    """A Cluster object never built: its methods check their arguments before they use the cluster."""
    return Cluster.__new__(Cluster)


@pytest.mark.parametrize(
    ("probe", "said"),
    [
        (123, r"got 123 \(int\)"),
        ([{"from": "web"}], r"got \[\{'from': 'web'\}\] \(list\)"),
        ({1: "web"}, r"got \{1: 'web'\} \(dict\)"),
    ],
)
def test_a_probe_is_a_mapping_of_fields_or_a_probes_name(probe, said):
    with pytest.raises(LabError, match=rf"^probe: expected a probe as a mapping of its fields .*, {said}$"):
        unbuilt().probe(probe)


def test_a_probe_of_the_file_is_run_as_the_file_has_it():
    with pytest.raises(
        LabError, match=r"^probe 'hairpin': a probe of the file takes no fields \(expect, from_ given\)"
    ):
        unbuilt().probe("hairpin", expect={"outcome": "refused"}, from_="far")


@pytest.mark.parametrize("step", [5, "delete: Service/web", [{"delete": "Service/web"}], None])
def test_a_step_is_a_mapping_of_fields(step):
    with pytest.raises(LabError, match=r"^step: expected a step as a mapping of its fields .*, got .* \(\w+\)$"):
        unbuilt().step(step)


@pytest.mark.parametrize("name", [123, None, ("web",)])
def test_an_actor_or_a_probe_is_named_by_a_string(name):
    with pytest.raises(LabError, match=r"^cluster\[\.\.\.\]: expected a name \(a string\), got"):
        unbuilt()[name]
    with pytest.raises(LabError, match=r"^probe name: expected a name \(a string\), got"):
        unbuilt().own_probe(name)


def test_a_resolved_probe_and_its_steps_are_describes():
    for call in (unbuilt().run, unbuilt().keep_going, unbuilt().steps_of):
        with pytest.raises(LabError, match=r"probe: expected a probe as describe resolved it .*, got 'web' \(str\)"):
            call("web")


ACTOR = Actor(unbuilt(), "web", "lab-x-web", "10.244.1.2")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ("ip route", r"^web\.exec argv: expected the command as a list of words, .*, got 'ip route' \(str\)"),
        ([], r"^web\.exec argv: expected the command as a list of words, .*, got \[\] \(list\)"),
        (["sleep", 1], r"^web\.exec argv\[1\]: expected a word \(a str or os\.PathLike .*\), got 1 \(int\)"),
        (["echo", "a\0b"], r"^web\.exec argv\[1\]: expected a word .*, got 'a\\x00b' \(str\)"),
        ([b"ip"], r"^web\.exec argv\[0\]: expected a word .*, got b'ip' \(bytes\)"),
    ],
)
def test_a_command_is_a_list_of_words(argv, said):
    with pytest.raises(LabError, match=said):
        ACTOR.exec(argv)


@pytest.mark.parametrize("given_input", [b"", bytearray(b"x"), 5])
def test_a_commands_input_is_text(given_input):
    with pytest.raises(LabError, match=r"^web\.exec input: expected None or text \(a str: decode bytes first\)"):
        ACTOR.exec(["cat"], input=given_input)


@pytest.mark.parametrize("timeout", ["x", -1, 0, math.nan, math.inf, 86_401, True])
def test_a_commands_timeout_is_none_or_seconds_within_a_day(timeout):
    with pytest.raises(LabError, match=r"^web\.exec timeout: expected None or seconds, .* at most 86400, got"):
        ACTOR.exec(["true"], timeout=timeout)


def test_what_the_runners_hand_over_is_checked():
    with pytest.raises(LabError, match=r"^result: expected a probe's result .*, got 123 \(int\)"):
        to_json(123)
    for build in (run_variant, lambda topo: hold(None, topo).__enter__()):
        with pytest.raises(LabError, match=r"^topo: expected a scenario variant .*, got 'hairpin' \(str\)"):
            build("hairpin")


def test_a_value_is_said_short_with_its_type():
    assert given("x" * 10_000).startswith("'xxx") and len(given("x" * 10_000)) < 100
    assert given(10**5000) == "a value that cannot be shown (int)"
    looped: list[object] = []
    looped.append(looped)
    assert given(looped).endswith("]]] (list)")  # cut short, not followed for ever
