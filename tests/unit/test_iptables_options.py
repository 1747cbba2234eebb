"""The host's iptables rules read as iptables reads a line's options: a long option by any prefix of it that begins
no other, and refused where iptables refuses one (an ambiguous prefix, a name it has no option of, a value given
to an option that takes none). Each case was run through this machine's iptables and iptables-restore, nft and
legacy, in a namespace of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario
from lab.describe.resolve.node_tables import restore_tables
from lab.describe.resolve.restore_text import restore_text_problem

WRAPPED = BASE.replace("cluster: {", "cluster: {iptablesBackend: wrapper, kubeVersion: '1.31', ")


def _host(rules: str) -> str:
    host = f'tools: {{host: {{iptablesBackend: legacy, iptablesRules: "*filter\\n{rules}\\nCOMMIT\\n"}}}}, '
    return WRAPPED.replace("cluster: {", f"cluster: {{{host}", 1)


def test_every_prefix_iptables_takes_of_a_command_is_that_command() -> None:
    read = restore_tables(
        "*filter\n:FOO - [0:0]\n--app FOO -j ACCEPT\n--a FOO -j ACCEPT\n--ins FOO 1 -j DROP\n--new-c BAR\n--new BAZ\n"
        "-s 1.2.3.4 --ap=FOO -j DROP\n--sr 1.2.3.4 --insert FOO\nCOMMIT\n"
    )
    assert read.unread is None
    assert (read.rules, read.chains) == (5, {("filter", "FOO"), ("filter", "BAR"), ("filter", "BAZ")})


def test_a_command_abbreviated_after_an_extension_is_said_unread() -> None:
    # -m comment's options join iptables' own there: which --ins begins depends on them too.
    read = restore_tables("*filter\n:FOO - [0:0]\n-m comment --comment x --app FOO -j ACCEPT\nCOMMIT\n")
    assert read.unread and "gives --app after -m, -j or -p" in read.unread.why


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("--in FOO -j DROP", "--in is ambiguous, the start of --insert, --in-interface: iptables refuses it"),
        ("--s 1.2.3.4 -A FOO", "--s is ambiguous, the start of --source, --src, --set-counters"),
        # After -p tcp too: tcp's options begin no --d of their own.
        ("-A FOO -p tcp --d 1.2.3.4", "--d is ambiguous, the start of --delete, --delete-chain, --destination, --dst"),
        ("--ipv -A FOO", "--ipv is ambiguous, the start of --ipv4, --ipv6"),
    ],
)
def test_an_ambiguous_prefix_is_refused_naming_the_line_and_the_options_it_begins(
    tmp_path: Path, rule: str, said: str
) -> None:
    error = str(error_for(tmp_path, _host(rule)))
    assert f"s.yaml:2: cluster.tools.host.iptablesRules: not iptables-restore's input: its line 2 ({rule!r}): " in error
    assert said in error and "write the option in full" in error


def test_a_name_iptables_has_no_option_of_is_refused_before_an_extension_is_loaded(tmp_path: Path) -> None:
    error = str(error_for(tmp_path, _host("--foo -A FOO -j DROP")))
    said = "--foo is no option of iptables', and no -m, -j or -p before it loads an extension that could have it"
    assert f"its line 2 ('--foo -A FOO -j DROP'): {said}" in error
    # After -m comment, --comment is the match's: iptables takes it, and so does the lab.
    (topo,) = load_scenario(write(tmp_path, _host("-A FORWARD -m comment --comment x -j DROP"))).variants
    assert topo.cluster.iptables_backend == "legacy"


def test_a_value_given_to_an_option_that_takes_none_is_refused(tmp_path: Path) -> None:
    error = str(error_for(tmp_path, _host("-A FOO --numeric=1")))
    assert "its line 2 ('-A FOO --numeric=1'): --numeric=1: --numeric takes no value: iptables refuses it" in error


def test_a_second_command_on_a_line_is_refused_unless_iptables_takes_the_two_together(tmp_path: Path) -> None:
    error = str(error_for(tmp_path, _host("-A FORWARD -j ACCEPT --new-chain X")))
    assert "its line 2 ('-A FORWARD -j ACCEPT --new-chain X'): --new-chain is a second command, after -A" in error
    assert "iptables takes one a line (-L or -S with -Z alone)" in error
    assert restore_text_problem("*filter\n-L FORWARD -Z\n-Z -S\nCOMMIT\n") == ""
