"""cluster.iptablesBackend: wrapper — the backend kube-proxy's image's iptables-wrapper chooses from the host's rules
(each release's wrapper, each of its branches), what the lab reads of those rules, and what it refuses in words."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario
from lab.describe.resolve.iptables_wrapper import Unknowable, choose_backend
from lab.describe.resolve.node_tables import BackendTables, Unread, nft_tables, restore_tables
from lab.judge.results import ProbeResult, Timing, VariantRun
from lab.judge.verdict import Verdict
from lab.probe.observation import Observation
from lab.report.records import skipped_records, to_record

NONE = BackendTables()


def _tables(*chains: tuple[str, str], rules: int = 0) -> BackendTables:
    return BackendTables(frozenset(chains), rules)


# (release, legacy, nft, chosen backend, words of the why): every branch of each release's wrapper.
BRANCHES = [
    ("1.31", NONE, _tables(("mangle", "KUBE-KUBELET-CANARY")), "nft", "KUBE-KUBELET-CANARY in iptables-nft's mangle"),
    ("1.31", _tables(("nat", "KUBE-IPTABLES-HINT")), _tables(rules=5), "legacy", "in iptables-legacy's nat table"),
    # v2 asks iptables-nft for its mangle table alone: kubelet's chain in nft's filter table is not seen.
    ("1.31", _tables(rules=1), _tables(("filter", "KUBE-KUBELET-CANARY")), "legacy", "holds 1 rule, iptables-nft 0"),
    # grep -E '^:(KUBE-IPTABLES-HINT|...)' matches a prefix.
    ("1.25", _tables(("mangle", "KUBE-IPTABLES-HINT-X")), NONE, "legacy", "KUBE-IPTABLES-HINT-X in iptables-legacy"),
    ("1.38", _tables(rules=2), _tables(rules=1), "legacy", "no KUBE-IPTABLES-HINT or KUBE-KUBELET-CANARY chain"),
    ("1.31", _tables(rules=2), _tables(rules=2), "nft", "→ nft (legacy only with more rules)"),
    ("1.31", NONE, NONE, "nft", "iptables-legacy holds 0 rules, iptables-nft 0 → nft"),
    # debian-iptables (1.19 - 1.24) counts rules alone, and a tie is legacy's.
    ("1.24", NONE, NONE, "legacy", "(debian-iptables bullseye): iptables-legacy holds 0 rules, iptables-nft 0"),
    ("1.23", NONE, _tables(("mangle", "KUBE-KUBELET-CANARY")), "legacy", "→ legacy (as many rules or more)"),
    ("1.24", _tables(rules=3), _tables(rules=4), "nft", "→ nft (legacy only with as many rules or more)"),
    ("1.21", _tables(rules=12), _tables(rules=3), "legacy", "debian-iptables buster, before and from v1.6.2 alike"),
    ("1.19", _tables(rules=2), _tables(rules=3), "nft", "holds 2 rules, iptables-nft 3 → nft"),
]


@pytest.mark.parametrize(("release", "legacy", "nft", "backend", "words"), BRANCHES)
def test_each_wrapper_chooses_as_its_image_does(
    release: str, legacy: BackendTables, nft: BackendTables, backend: str, words: str
) -> None:
    choice = choose_backend(release, legacy, nft)
    assert choice.backend == backend
    assert choice.why.startswith(f"iptables-wrapper of kube-proxy {release}'s image (")
    assert words in choice.why


def test_buster_images_before_and_after_v1_6_2_disagreeing_is_said_not_guessed() -> None:
    # The early buster wrapper takes legacy at 10 rules; the later one compares: 10 < 11 is nft's.
    with pytest.raises(Unknowable, match="kube-proxy 1.22's images carried two iptables-wrappers") as info:
        choose_backend("1.22", _tables(rules=10), _tables(rules=11))
    assert "before v1.6.2: iptables-legacy holds 10 rules, iptables-nft 11 → legacy" in str(info.value)
    assert info.value.field == ("cluster", "iptablesBackend")


def test_rules_the_lab_cannot_count_matter_only_where_the_wrapper_counts() -> None:
    uncounted = BackendTables(
        frozenset({("mangle", "KUBE-KUBELET-CANARY")}), uncounted=Unread(("cluster", "tools", "host", "nftables"), "x")
    )
    assert choose_backend("1.31", NONE, uncounted).backend == "nft"
    with pytest.raises(Unknowable, match="iptables-wrapper's choice reads the host's rules, and x"):
        choose_backend("1.24", NONE, uncounted)


def test_restore_input_is_read_as_iptables_save_would_print_it() -> None:
    text = (
        "*mangle\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n*filter\n:FORWARD DROP [0:0]\n-N DOCKER\n-A FORWARD -j DOCKER\n"
    )
    read = restore_tables(text + "-I FORWARD -j ACCEPT\n--append FORWARD -j DROP\n--new-chain X\nCOMMIT\n")
    declared = {("mangle", "KUBE-KUBELET-CANARY"), ("filter", "FORWARD"), ("filter", "DOCKER"), ("filter", "X")}
    assert read.chains == declared
    assert read.rules == 3 and read.unread is None


def test_restore_input_that_changes_loaded_rules_is_not_read() -> None:
    read = restore_tables("*filter\n-A FORWARD -j DROP\n-F FORWARD\nCOMMIT\n")
    assert read.unread and "its line 3 ('-F FORWARD') changes rules already loaded" in read.unread.why


# Each line is one rule iptables-save prints (one `^-` line the wrapper counts), checked with both backends' restore.
ONE_RULE_EACH = [
    *("[3:180] -A FOO -j ACCEPT", "-A\tFOO -j DROP", "-s 1.2.3.4 -A FOO -j ACCEPT", "--append=FOO -j DROP"),
    *("-AFOO -j ACCEPT", "-IFOO 1 -j DROP"),
]


@pytest.mark.parametrize("rule", ONE_RULE_EACH)
def test_every_form_iptables_restore_takes_of_a_rule_is_counted(rule: str) -> None:
    read = restore_tables(f"*filter\n:FOO - [0:0]\n{rule}\nCOMMIT\n")
    assert read.unread is None
    assert read.rules == 1


def test_a_chain_of_the_users_declared_again_is_flushed_as_restore_noflush_does() -> None:
    kept = "*filter\n:INPUT ACCEPT [0:0]\n:FOO - [0:0]\n-A FOO -j ACCEPT\n-A INPUT -j FOO\nCOMMIT\n"
    read = restore_tables(kept + "*filter\n:INPUT DROP [0:0]\n:FOO - [0:0]\n-A FOO -j RETURN\nCOMMIT\n")
    # FOO's first rule is gone; INPUT, a built-in chain, keeps its rule.
    assert read.rules == 2


def test_a_rule_for_ipv6_alone_is_left_out_as_iptables_restore_leaves_it() -> None:
    # Both backends' iptables-restore load none of the first two (checked in a fresh namespace).
    read = restore_tables(
        "*filter\n:FOO - [0:0]\n-6 -A FOO -j ACCEPT\n-A FOO --ipv6 -j DROP\n-4 -A FOO -j RETURN\nCOMMIT\n"
    )
    assert read.rules == 1


def test_a_restore_line_without_a_command_is_said_so() -> None:
    read = restore_tables("*filter\n-s 1.2.3.4 -j ACCEPT\nCOMMIT\n")
    assert read.unread and "its line 2 ('-s 1.2.3.4 -j ACCEPT') gives no command (-A, -I or -N" in read.unread.why


@pytest.mark.parametrize(
    ("script", "chains"),
    [
        ("table ip mangle {\n  chain KUBE-KUBELET-CANARY {\n  }\n}\n", {("mangle", "KUBE-KUBELET-CANARY")}),
        ("add table ip6 mangle\nadd chain ip6 mangle KUBE-IPTABLES-HINT\n", {("mangle", "KUBE-IPTABLES-HINT")}),
        ("table mangle { chain KUBE-KUBELET-CANARY { } }", {("mangle", "KUBE-KUBELET-CANARY")}),  # ip by default
        # iptables-nft-save reads neither inet tables nor ip tables of other names.
        ("table inet mangle { chain KUBE-KUBELET-CANARY { } }\ntable ip x { chain KUBE-IPTABLES-HINT { } }", set()),
        ("table ip mangle { chain A { } }\nflush ruleset\n", set()),
        (
            "add table ip mangle\nadd chain ip mangle A\nadd chain ip mangle B\ndelete chain ip mangle A\n",
            {("mangle", "B")},
        ),
        ("table ip mangle { chain A { } }\ndelete table ip mangle\n", set()),
        (
            "# a base chain's hook and policy are no rules\ntable ip filter {\n chain FORWARD {\n"
            "  type filter hook forward priority 0; policy drop;\n }\n}\n",
            {("filter", "FORWARD")},
        ),
        # A comment's quotes and `$` are the comment's (nft -f loads this; iptables-nft-save prints no rule of it).
        (
            '# kubelet\'s "canary" for $reasons\ntable ip mangle {\n chain PREROUTING {\n'
            '  type filter hook prerouting priority -150; # Docker\'s "rules" go here\n  # "$x"\n }\n}\n',
            {("mangle", "PREROUTING")},
        ),
        (
            'table ip mangle {\n chain KUBE-KUBELET-CANARY {\n  comment "#1";\n }\n}\n',
            {("mangle", "KUBE-KUBELET-CANARY")},
        ),
    ],
)
def test_the_chains_iptables_nft_save_prints_of_an_nft_script(script: str, chains: set[tuple[str, str]]) -> None:
    read = nft_tables(script)
    assert read.chains == chains
    assert read.unread is None and read.uncounted is None


def test_rules_written_with_nft_in_iptables_tables_are_not_counted() -> None:
    read = nft_tables(
        "table ip filter {\n chain FORWARD {\n  type filter hook forward priority 0;\n  counter drop\n }\n}"
    )
    assert read.uncounted and "writes rules in table ip filter" in read.uncounted.why
    assert nft_tables("table inet fw { chain input { tcp dport 22 accept } }").uncounted is None


CANARY = "table ip mangle {\n chain KUBE-KUBELET-CANARY {\n }\n"
HOOKED = " chain pre {\n  type filter hook prerouting priority -150;\n }\n"


def test_kubelets_chain_beside_an_nft_written_base_chain_in_mangle_is_not_known_to_be_seen() -> None:
    # iptables-nft-save 1.8.7 prints nothing of such a table, 1.8.9 its chains (checked in a fresh namespace).
    with pytest.raises(Unknowable, match="whether iptables-nft-save -t mangle then prints that table's chains"):
        choose_backend("1.31", NONE, nft_tables(CANARY + HOOKED + "}\n"))


def test_nft_written_rules_base_chains_elsewhere_or_no_kubelet_chain_leave_the_choice_known() -> None:
    # Rules in mangle and a base chain in filter hide kubelet's chain from neither release (checked alike).
    ruled = CANARY + " chain X {\n  meta mark set 0x1 counter\n }\n}\n"
    filter_hooked = CANARY + "}\ntable ip filter {\n" + HOOKED + "}\n"
    for script in (ruled, filter_hooked):
        assert choose_backend("1.31", NONE, nft_tables(script)).backend == "nft"
    hooked_alone = "table ip mangle {\n" + HOOKED + "}\n"
    assert choose_backend("1.31", _tables(rules=1), nft_tables(hooked_alone)).backend == "legacy"


@pytest.mark.parametrize(
    ("script", "words"),
    [
        ('include "/etc/nftables.d/x.nft"\n', "is not read by the lab (variables and included files)"),
        ("define t = mangle\ntable ip $t { chain KUBE-KUBELET-CANARY { } }\n", "variables and included files"),
        ("delete rule ip filter FORWARD handle 4\n", "changes what stands in a table iptables-nft-save reads"),
    ],
)
def test_nft_scripts_the_lab_cannot_follow_are_said(script: str, words: str) -> None:
    read = nft_tables(script)
    assert read.unread and words in read.unread.why


WRAPPED = BASE.replace("cluster: {", "cluster: {iptablesBackend: wrapper, kubeVersion: '1.31', ")


def _host(rules: str, backend: str = "legacy") -> str:
    return WRAPPED.replace(
        "cluster: {", f'cluster: {{tools: {{host: {{iptablesBackend: {backend}, iptablesRules: "{rules}"}}}}, ', 1
    )


def test_the_scenario_resolves_the_wrappers_choice_and_its_reason(tmp_path: Path) -> None:
    canary = "*mangle\\n:KUBE-KUBELET-CANARY - [0:0]\\nCOMMIT\\n"
    (topo,) = load_scenario(write(tmp_path, _host(canary))).variants
    assert topo.cluster.iptables_backend == "legacy" and topo.cluster.host_iptables_backend == "legacy"
    why = "iptables-wrapper of kube-proxy 1.31's image (distroless-iptables, iptables-wrappers v2): KUBE-KUBELET-CANARY"
    assert topo.cluster.iptables_backend_why == f"{why} in iptables-legacy's mangle table → legacy"
    ran = ProbeResult(topo, topo.probes[0], Observation("delivered"), Verdict(True))
    assert to_record(ran)["iptables_wrapper"] == topo.cluster.iptables_backend_why
    # A variant this machine skipped started no kube-proxy: no wrapper chose.
    (record, *_) = skipped_records(VariantRun(topo, [], Timing(0, 0, 0, 0), skipped="x"))
    assert record["iptables_wrapper"] is None


def test_a_named_backend_has_no_wrapper_reason(tmp_path: Path) -> None:
    (topo,) = load_scenario(write(tmp_path, BASE)).variants
    assert (topo.cluster.iptables_backend, topo.cluster.iptables_backend_why) == ("nft", "")
    assert skipped_records(VariantRun(topo, [], Timing(0, 0, 0, 0), skipped="x"))[0]["iptables_wrapper"] is None


def test_no_host_rules_leave_the_host_in_the_chosen_backend(tmp_path: Path) -> None:
    (topo,) = load_scenario(write(tmp_path, WRAPPED.replace("'1.31'", "'1.24'"))).variants
    assert (topo.cluster.iptables_backend, topo.cluster.host_iptables_backend) == ("legacy", "legacy")


def test_host_rules_without_their_backend_are_refused_in_words(tmp_path: Path) -> None:
    text = WRAPPED.replace("cluster: {", 'cluster: {tools: {host: {iptablesRules: "*filter\\nCOMMIT\\n"}}, ', 1)
    error = str(error_for(tmp_path, text))
    assert "cluster.tools.host.iptablesBackend: with iptablesBackend wrapper, say which backend" in error


def test_host_rules_the_wrapper_cannot_read_are_refused_at_their_field(tmp_path: Path) -> None:
    error = str(error_for(tmp_path, _host("*filter\\n-X DOCKER\\nCOMMIT\\n")))
    assert "cluster.tools.host.iptablesRules: iptables-wrapper's choice reads the host's rules" in error
    assert "its line 2 ('-X DOCKER')" in error


@pytest.mark.parametrize(
    ("value", "said"), [("Wrapper", "'Wrapper'"), ("iptables-wrapper", "'iptables-wrapper'"), ("true", "True")]
)
def test_an_unknown_backend_is_refused_in_words(tmp_path: Path, value: str, said: str) -> None:
    error = str(error_for(tmp_path, WRAPPED.replace("iptablesBackend: wrapper", f"iptablesBackend: {value}")))
    assert f":2: cluster.iptablesBackend: expected 'nft', 'legacy' or 'wrapper', not {said}" in error


def test_an_unknown_backend_in_the_matrix_is_refused_at_its_line(tmp_path: Path) -> None:
    text = BASE + "matrix:\n  iptablesBackend: [nft, wraper]\n"
    error = str(error_for(tmp_path, text))
    assert "matrix.iptablesBackend[1]: expected 'nft', 'legacy' or 'wrapper', not 'wraper'" in error
