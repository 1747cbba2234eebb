"""Render's output read back from the kernel diffs as identical: for every variant of every catalogue scenario, the
first node's rules loaded with the real tools (iptables-restore of the variant's backend, ipset restore, nft -f)
into a fresh namespace and dumped with iptables-save, ipset save and nft list ruleset are what lab diff expects.
This is what makes the one form of lab.replay.diff trustworthy: each normalisation is the tools' own rewriting."""

from __future__ import annotations

import pytest
from support.host import REPO
from support.netns import FreshNetns

from lab.describe.load import load_scenario
from lab.render.dataplane import node_dataplane
from lab.replay.diff.nodediff import Dumps, diff_node

# nftables-long-comment's rules are refused by nft by design (a comment over 128 characters): nothing to read back.
# The catalogue, and a fixture with what it leaves out (session affinity, source ranges, UDP, no endpoints) in
# every mode and ten releases.
# An IPv6-only file's primary proxier writes ip6tables text, whose saved forms (ICMPv6's REJECT default) lab diff
# does not read yet: the catalogue's IPv6-only files are left out (a dual-stack file's IPv4 proxier is compared).
SCENARIOS = [
    *sorted(
        p
        for p in (REPO / "topologies").glob("*.yaml")
        if p.stem != "nftables-long-comment" and load_scenario(p).variants[0].cluster.families[0] == "IPv4"
    ),
    REPO / "tests" / "fixtures" / "diff" / "many-features.yaml",
]


def _dumped(netns: FreshNetns, mode: str, backend: str, plane) -> Dumps:  # noqa: ANN001 - render's NodeDataplane
    def run(script: str, text: str = "") -> str:
        done = netns.run(script, input=text)
        assert done.returncode == 0, done.stderr
        return done.stdout

    if mode == "nftables":
        run("nft -f -", plane.nft)
        return Dumps(nft=run("nft list ruleset"))
    tool = "iptables-legacy" if backend == "legacy" else "iptables"
    if mode == "ipvs":
        run("ipset restore", plane.ipsets)
    run(f"{tool}-restore", plane.iptables)
    return Dumps(rules=run(f"{tool}-save"), ipsets=run("ipset save") if mode == "ipvs" else None)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_rules_read_back_from_the_kernel_diff_as_identical(path, host_unchanged):
    compared = 0
    for topo in load_scenario(path).variants:
        node = topo.nodes[0].name
        try:
            plane = node_dataplane(topo, node)
        except ValueError:  # a release the variant's mode does not reproduce (nftables before 1.30)
            continue
        with FreshNetns() as netns:
            dumps = _dumped(netns, topo.cluster.proxy_mode, topo.cluster.iptables_backend, plane)
        result = diff_node(topo, node, dumps)
        assert result.identical, (topo.variant_label, [d.as_json() for d in result.differences])
        compared += 1
    assert compared
