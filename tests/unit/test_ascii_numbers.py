"""Numbers in untrusted text are ASCII digits, as Go's strconv.Atoi and net.ParseCIDR read them: a superscript
digit or another script's digits is refused in the lab's own words, never int()'s (a traceback) nor read as a
number."""

from __future__ import annotations

import pytest

from lab.bench.cluster import parse_sizes
from lab.bench.imports import parse_import_size
from lab.describe.digits import is_ascii_number
from lab.render.kubeproxy.addresses import parse_cidr
from lab.replay.dump import split_target

NOT_ASCII = ("²", "١٦", "１６")


def test_only_ascii_digits_are_a_number():
    assert is_ascii_number("0123")
    for text in (*NOT_ASCII, "", "1a", "-1", " 1"):
        assert not is_ascii_number(text)


@pytest.mark.parametrize("digits", NOT_ASCII)
def test_an_ipv4_cidr_prefix_of_other_digits_is_no_cidr(digits):
    assert parse_cidr(f"10.0.0.0/{digits}") is None
    assert parse_cidr(f"fd00::/{digits}", "IPv6") is None


@pytest.mark.parametrize("digits", NOT_ASCII)
def test_a_nat_target_port_of_other_digits_is_no_port(digits):
    assert split_target(f"10.0.0.1:{digits}") == ("10.0.0.1", None)


@pytest.mark.parametrize("digits", NOT_ASCII)
def test_bench_sizes_of_other_digits_are_refused_in_words(digits):
    with pytest.raises(ValueError, match="expected NODESxPODS"):
        parse_sizes(f"{digits}x3")
    with pytest.raises(ValueError, match="expected NODES,PODS,SERVICES"):
        parse_import_size(f"{digits},1,1")
