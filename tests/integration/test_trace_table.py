"""The lab-trace table made over netlink (lab.probe.evidence.trace_table) is the table nft makes of its text, and
making it again leaves that one table."""

from __future__ import annotations

import subprocess

import pytest

from lab.probe.evidence.trace_table import add_trace_table
from lab.realize.enter import create_netns_all
from lab.realize.links import _netlink
from lab.realize.runs import new_prefix, record, release

NFT_TEXT = """\
table inet lab-trace {
    chain prerouting { type filter hook prerouting priority -350; meta nftrace set 1; }
    chain output { type filter hook output priority -350; meta nftrace set 1; }
}
"""


@pytest.fixture
def two_namespaces(host_unchanged):
    prefix = new_prefix()
    names = [f"{prefix}-a", f"{prefix}-b"]
    record(prefix, *names)
    for sock in create_netns_all(names, _netlink):
        sock.close()
    try:
        yield names
    finally:
        release(prefix)


def nft(netns: str, *argv: str, text: str = "") -> str:
    done = subprocess.run(["ip", "netns", "exec", netns, "nft", *argv], input=text, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_table_is_what_nft_makes_of_its_text_and_made_again_stays_one(two_namespaces):
    ours, nfts = two_namespaces
    add_trace_table(ours)
    add_trace_table(ours)  # every tracer of a namespace makes it
    nft(nfts, "-f", "-", text=NFT_TEXT)
    listed = nft(ours, "list", "ruleset")
    assert listed == nft(nfts, "list", "ruleset")
    assert listed.count("meta nftrace set 1") == 2
    assert listed.count("table inet lab-trace") == 1
