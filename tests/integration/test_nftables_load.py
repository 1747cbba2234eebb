"""The kernel accepts what render_nftables() writes, in a throw-away network namespace only.

Each golden case of tests/unit/test_nftables_render.py, for every supported version, and a few
flag variants (nodePortAddresses "all", no local-traffic detector, --masquerade-all), is loaded
with `nft -f` inside a fresh, empty netns of the test's own (support.netns, gone with the test) and read
back there with `nft -j list table ip kube-proxy`: the kernel must hold the same chains with the
same number of rules, and the same sets and maps with the same number of elements, as the
knftables-style fake the unit tests dump. The host's own netns is never touched.

Findings on this host (nft 1.0.6, Debian 12): every construct kube-proxy 1.30-1.37 writes loads,
so the renderer has no compatibility option.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
from support.netns import FreshNetns
from support.nft import FAKE, GOLDEN_CASES, NODE_IPS, FakeTable

from lab.render.kubeproxy.nftables import NFTABLES_VERSIONS, render_nftables

pytestmark = pytest.mark.nftables


@pytest.fixture(autouse=True)
def needs_nft(fresh_netns: FreshNetns):
    missing = [tool for tool in ("nft", "unshare", "nsenter") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    probe = fresh_netns.run("nft list ruleset")
    if probe.returncode != 0:
        pytest.skip(f"needs nftables in a private network namespace: `nft list ruleset` failed: {probe.stderr.strip()}")


def load_and_list(netns: FreshNetns, script: str) -> dict:
    """Run the script with `nft -f -` in the test's own netns and return `nft -j list table` from there."""
    done = netns.run("nft -f - && nft -j list table ip kube-proxy", input=script)
    assert done.returncode == 0, f"nft refused the script:\n{done.stderr}"
    return json.loads(done.stdout)


def kernel_view(listing: dict) -> tuple[dict[str, int], dict[str, int]]:
    """(rules per chain, elements per set or map) as the kernel holds them."""
    chains: dict[str, int] = {}
    sets: dict[str, int] = {}
    for item in listing["nftables"]:
        if "chain" in item:
            chains.setdefault(item["chain"]["name"], 0)
        elif "rule" in item:
            chains[item["rule"]["chain"]] = chains.get(item["rule"]["chain"], 0) + 1
        elif "set" in item or "map" in item:
            obj = item.get("set") or item.get("map")
            sets[obj["name"]] = len(obj.get("elem", []))
    return chains, sets


def fake_view(script: str) -> tuple[dict[str, int], dict[str, int]]:
    table = FakeTable().run(script)
    return (
        {name: len(rules) for name, rules in table.rules.items()},
        {name: len(elements) for name, elements in table.elements.items()},
    )


CONFIGS = {
    "fake proxier": FAKE,
    "all nodeport addresses": replace(FAKE, node_port_addresses=("0.0.0.0/0",)),
    "no detector, masquerade-all, no service CIDRs": replace(
        FAKE, cluster_cidr=None, masquerade_all=True, service_cidrs=()
    ),
}


@pytest.mark.parametrize("version", NFTABLES_VERSIONS)
@pytest.mark.parametrize("case", list(GOLDEN_CASES))
@pytest.mark.parametrize("config", list(CONFIGS))
def test_script_loads_into_a_fresh_netns(version, case, config, fresh_netns):
    script = render_nftables(GOLDEN_CASES[case](), CONFIGS[config], NODE_IPS, version).script()
    assert kernel_view(load_and_list(fresh_netns, script)) == fake_view(script)


def test_loading_leaves_the_host_alone(fresh_netns, host_unchanged):
    script = render_nftables(GOLDEN_CASES["overall_nftables_rules.txt"](), FAKE, NODE_IPS, "1.35").script()
    load_and_list(fresh_netns, script)


def test_base_chains_get_kube_proxys_hooks_and_priorities(fresh_netns):
    """What nft lists for the base chains (nft prints some priorities by name)."""
    for version, expected in (
        ("1.33", {"filter-prerouting": ("prerouting", -110), "filter-output-post-dnat": ("output", -90)}),
        ("1.35", {"filter-output-pre-dnat": ("output", -110), "filter-input": ("input", 0)}),
    ):
        listing = load_and_list(fresh_netns, render_nftables([], FAKE, NODE_IPS, version).script())
        hooks = {
            item["chain"]["name"]: (item["chain"]["hook"], item["chain"]["prio"])
            for item in listing["nftables"]
            if "chain" in item and "hook" in item["chain"]
        }
        for name, hook in expected.items():
            assert hooks[name] == hook, (version, name, hooks)
