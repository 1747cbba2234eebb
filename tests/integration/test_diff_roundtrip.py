"""Render's output read back from the kernel diffs as identical: for every variant of every catalogue scenario, the
first node's rules loaded with the real tools (iptables-restore of the variant's backend, ipset restore, nft -f)
into a fresh namespace and dumped with iptables-save, ipset save and nft list ruleset are what lab diff expects.
This is what makes the one form of lab.replay.diff trustworthy: each normalisation is the tools' own rewriting."""

from __future__ import annotations

import argparse

import pytest
from support.host import REPO
from support.netns import FreshNetns

from lab.describe.load import load_scenario
from lab.render.dataplane import node_dataplane
from lab.replay.diff.command import diff_from_args
from lab.replay.diff.nodediff import Dumps, diff_node

# nftables-long-comment's rules are refused by nft by design (a comment over 128 characters): nothing to read back.
# The catalogue, and a fixture with what it leaves out (session affinity, source ranges, UDP, no endpoints) in
# every mode and ten releases.
SCENARIOS = [
    *sorted(p for p in (REPO / "topologies").glob("*.yaml") if p.stem != "nftables-long-comment"),
    REPO / "tests" / "fixtures" / "diff" / "many-features.yaml",
]


def _dumped(netns: FreshNetns, mode: str, backend: str, plane) -> Dumps:  # noqa: ANN001 - render's NodeDataplane
    """Every proxier of the node loaded with its family's tool and read back (ipvs mode: both proxiers' sets in the
    node's one `ipset save`)."""

    def run(script: str, text: str = "") -> str:
        done = netns.run(script, input=text)
        assert done.returncode == 0, done.stderr
        return done.stdout

    planes = [p for p in (plane, plane.other_family) if p is not None]
    if mode == "nftables":
        run("nft -f -", "".join(p.nft for p in planes))
        return Dumps(nft=run("nft list ruleset"))
    if mode == "ipvs":
        run("ipset restore", "".join(p.ipsets for p in planes))  # before the rules that match its sets
    saved = {}
    for p in planes:
        tool = ("ip6tables" if p.family == "IPv6" else "iptables") + ("-legacy" if backend == "legacy" else "")
        run(f"{tool}-restore", p.iptables)
        saved[p.family] = run(f"{tool}-save")
    return Dumps(
        rules=saved.get("IPv4"), rules6=saved.get("IPv6"), ipsets=run("ipset save") if mode == "ipvs" else None
    )


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


DUAL_STACK = REPO / "tests" / "fixtures" / "replay" / "dual-stack.yaml"


@pytest.mark.parametrize(("mode", "version"), [("iptables", "1.31"), ("nftables", "1.31"), ("nftables", "1.36")])
def test_a_dual_stack_nodes_rules_read_back_diff_as_identical(mode, version, host_unchanged):
    """Both proxiers loaded (iptables-restore and ip6tables-restore; both nft tables) and saved back with
    iptables-save and ip6tables-save (nft list ruleset): the IPv6 forms (`/128`, ICMPv6's REJECT default, 1.36's
    `dnat ip6 addr . port to numgen` listed as `dnat ip6 to`) too."""
    (topo,) = load_scenario(DUAL_STACK, {"proxyMode": [mode], "kubeVersion": [version]}).variants
    plane = node_dataplane(topo, "node2")
    assert plane.other_family is not None
    with FreshNetns() as netns:

        def run(script: str, text: str = "") -> str:
            done = netns.run(script, input=text)
            assert done.returncode == 0, done.stderr
            return done.stdout

        if mode == "nftables":
            run("nft -f -", plane.nft + plane.other_family.nft)
            dumps = Dumps(nft=run("nft list ruleset"))
        else:
            run("iptables-restore", plane.iptables)
            run("ip6tables-restore", plane.other_family.iptables)
            dumps = Dumps(rules=run("iptables-save"), rules6=run("ip6tables-save"))
    result = diff_node(topo, "node2", dumps)
    assert result.identical and not result.families_not_compared, [d.as_json() for d in result.differences]


def test_iptables_save_c_output_diffs_as_identical(tmp_path, host_unchanged):
    """What `iptables-save -c` writes (each rule after its counters) diffs as iptables-save's: the counters dropped."""
    many = REPO / "tests" / "fixtures" / "diff" / "many-features.yaml"
    variant = ["proxyMode=iptables", "kubeVersion=1.31"]
    (topo,) = load_scenario(many, {"proxyMode": ["iptables"], "kubeVersion": ["1.31"]}).variants
    with FreshNetns() as netns:
        loaded = netns.run("iptables-restore", input=node_dataplane(topo, "node1").iptables)
        assert loaded.returncode == 0, loaded.stderr
        (tmp_path / "rules").write_text(netns.run("iptables-save -c").stdout)
    assert "\n[0:0] -A KUBE-SERVICES " in (tmp_path / "rules").read_text()
    dumps = {"rules": str(tmp_path / "rules"), "rules6": None, "nft": None, "ipsets": None, "ipvs": None}
    args = argparse.Namespace(file=str(many), node="node1", variant=variant, matrix=None, **dumps)
    result, _, _ = diff_from_args(args)
    assert result.identical, [d.as_json() for d in result.differences]
