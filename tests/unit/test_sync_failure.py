"""What a refused iptables-restore of kube-proxy's two tables says (pure: the words and the per-table outcome;
tests/integration/test_xtables_sync_failure.py shows the kernel leaving what they say)."""

from __future__ import annotations

from lab.install.sync_failure import committed_tables, failed_sync, sync_failed, xtables_refusal

TEXT = "*filter\n:KUBE-FORWARD - [0:0]\nCOMMIT\n*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j NOPE\nCOMMIT\n"
NFT = (
    "iptables-nft-restore rejected line 7 of the rules: COMMIT\n"
    "iptables-nft-restore v1.8.9 (nf_tables): Chain 'NOPE' does not exist\n"
    "Error occurred at line: 7\nTry `iptables-nft-restore -h' or 'iptables-nft-restore --help' for more information."
)


def test_the_second_table_refused_at_a_first_sync():
    said = xtables_refusal("iptables", NFT, TEXT, resync=False)
    assert said.startswith("kube-proxy's iptables sync failed: iptables-nft-restore refused line 7, in the nat table")
    assert "Chain 'NOPE' does not exist" in said and "Error occurred" not in said and "Try" not in said
    assert "the filter table is this sync's; the nat table keeps nothing of kube-proxy's (a first sync)" in said
    assert "the node has no Service rules" in said and "IPVS" not in said


def test_a_later_sync_keeps_what_the_refused_table_had():
    said = xtables_refusal("iptables", NFT, TEXT, resync=True)
    assert "the nat table keeps what it had before this sync" in said
    assert "no Service rules" not in said


def test_ipvs_writes_nat_first_so_a_refused_filter_leaves_this_syncs_nat():
    text = "*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n*filter\n:KUBE-FORWARD - [0:0]\n-X KUBE-FORWARD\nCOMMIT\n"
    message = "iptables-restore rejected line 6 of the rules: -X KUBE-FORWARD\niptables-restore: line 6 failed"
    said = xtables_refusal("ipvs", message, text, resync=True)
    assert said.startswith("kube-proxy's ipvs sync failed: iptables-restore refused line 6, in the filter table")
    assert "the nat table is this sync's; the filter table keeps what it had before this sync" in said
    assert "virtual servers and kube-ipvs0 addresses of deleted Services stay" in said


def test_a_refusal_before_any_line_leaves_every_table():
    message = (
        "iptables-legacy-restore rejected the rules: Another app is currently holding the xtables lock. "
        "Stopped waiting after 5s."
    )
    said = xtables_refusal("iptables", message, TEXT, resync=True)
    assert "refused the whole restore: Another app is currently holding the xtables lock" in said
    assert "the filter table keeps what it had before this sync; the nat table keeps what it had" in said


def test_the_session_reads_any_modes_failure():
    assert failed_sync(f"{sync_failed('ipvs')}: why — kept") == ("kube-proxy's ipvs sync failed", "why — kept")
    assert failed_sync("ipvs graceful termination: real server kept") is None


def test_ipvs_at_a_first_sync_still_translates_without_its_nat_table():
    """ipvs' virtual servers do the translation: a refused nat table is no "no Service rules"."""
    text = "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j NOPE\nCOMMIT\n*filter\nCOMMIT\n"
    message = "iptables-restore rejected line 3 of the rules: -A KUBE-SERVICES -j NOPE\niptables-restore: line 3 failed"
    said = xtables_refusal("ipvs", message, text, resync=False)
    assert "the nat table keeps nothing of kube-proxy's (a first sync); the filter table keeps nothing" in said
    assert "no Service rules" not in said and "deleted Services" not in said


def test_a_line_number_past_the_input_names_no_line():
    message = "iptables-restore rejected line 99 of the rules: ?\niptables-restore: line 99 failed"
    said = xtables_refusal("iptables", message, TEXT, resync=True)
    assert "refused the whole restore" in said and "line 99 failed" in said


def test_the_tables_committed_are_those_closed_before_the_refused_line():
    """What the host's rules are added again to after a refused sync (lab/install/host_rules.py)."""
    assert committed_tables(NFT, TEXT) == ("filter",)  # refused at the nat table's COMMIT, as iptables-nft names it
    at_filters_commit = "iptables-nft-restore rejected line 3 of the rules: COMMIT\nError occurred at line: 3"
    assert committed_tables(at_filters_commit, TEXT) == ()
    lock = "iptables-legacy-restore rejected the rules: Another app is currently holding the xtables lock."
    assert committed_tables(lock, TEXT) == ()
