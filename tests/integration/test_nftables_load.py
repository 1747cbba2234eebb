"""The kernel accepts what render_nftables() writes, in a throw-away network namespace only.

Each golden case of tests/unit/test_nftables_render.py, for every supported version, and a few
flag variants (nodePortAddresses "all", no local-traffic detector, --masquerade-all), is loaded
with `nft -f` inside `unshare -n` (a fresh, empty netns that disappears with the process) and read
back there with `nft -j list table ip kube-proxy`: the kernel must hold the same chains with the
same number of rules, and the same sets and maps with the same number of elements, as the
knftables-style fake the unit tests dump. The host's own netns is never touched.

Findings on this host (nft 1.0.6, Debian 12): every construct kube-proxy 1.30-1.35 writes loads,
so the renderer has no compatibility option.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from lab.render.kubeproxy.nftables import NFTABLES_VERSIONS, render_nftables

pytestmark = pytest.mark.nftables


def _unit_cases():
    """The unit tests' cases and fake (tests/ is not a package, so load the module by path)."""
    path = Path(__file__).resolve().parents[1] / "unit" / "test_nftables_render.py"
    spec = importlib.util.spec_from_file_location("nftables_render_cases", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_UNIT = _unit_cases()
FAKE, GOLDEN_CASES, NODE_IPS, FakeTable = _UNIT.FAKE, _UNIT.GOLDEN_CASES, _UNIT.NODE_IPS, _UNIT.FakeTable


def _nft_usable() -> str | None:
    """None when `unshare -n nft` works here, else why not."""
    for tool in ("nft", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    probe = subprocess.run(["unshare", "-n", "nft", "list", "ruleset"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"`unshare -n nft list ruleset` failed: {probe.stderr.strip()}"
    return None


@pytest.fixture(autouse=True)
def needs_nft():
    if reason := _nft_usable():
        pytest.skip(f"needs nftables in a private network namespace: {reason}")


def load_and_list(script: str) -> dict:
    """Run the script with `nft -f -` in a fresh netns and return `nft -j list table` from there."""
    shell = "nft -f - && nft -j list table ip kube-proxy"
    done = subprocess.run(["unshare", "-n", "sh", "-c", shell], input=script, capture_output=True, text=True)
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
def test_script_loads_into_a_fresh_netns(version, case, config):
    script = render_nftables(GOLDEN_CASES[case](), CONFIGS[config], NODE_IPS, version).script()
    assert kernel_view(load_and_list(script)) == fake_view(script)


def test_loading_leaves_the_host_alone(host_unchanged):
    script = render_nftables(GOLDEN_CASES["overall_nftables_rules.txt"](), FAKE, NODE_IPS, "1.35").script()
    load_and_list(script)


def test_base_chains_get_kube_proxys_hooks_and_priorities():
    """What nft lists for the base chains (nft prints some priorities by name)."""
    for version, expected in (
        ("1.33", {"filter-prerouting": ("prerouting", -110), "filter-output-post-dnat": ("output", -90)}),
        ("1.35", {"filter-output-pre-dnat": ("output", -110), "filter-input": ("input", 0)}),
    ):
        listing = load_and_list(render_nftables([], FAKE, NODE_IPS, version).script())
        hooks = {
            item["chain"]["name"]: (item["chain"]["hook"], item["chain"]["prio"])
            for item in listing["nftables"]
            if "chain" in item and "hook" in item["chain"]
        }
        for name, hook in expected.items():
            assert hooks[name] == hook, (version, name, hooks)
