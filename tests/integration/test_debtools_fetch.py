"""Each Debian release's nft and iptables, fetched from the archive into the lab's cache (~/.cache/lab or
$LAB_CACHE: later runs reuse it, checked), run on this machine with the release's own loader and libraries."""

from __future__ import annotations

import subprocess

import pytest

from lab.vm.debtools import RELEASES, ReleaseTools, release_tools
from lab.vm.errors import VmError


def _tools(release: str) -> ReleaseTools:
    try:
        return release_tools(release)
    except VmError as exc:
        if "fetched no package list" in str(exc):
            pytest.skip(
                f"Debian's archive is unreachable from this machine, and {release}'s tools are not cached: {exc}"
            )
        raise


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(("tool", "package"), [("nft", "nftables"), ("iptables", "iptables")])
def test_a_release_tool_runs_as_its_own_version(release: str, tool: str, package: str) -> None:
    tools = _tools(release)
    argv = tools.argv(tool) + (["--version"] if tool == "nft" else ["iptables", "--version"])
    said = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout
    upstream = tools.versions[package].split("-", 1)[0].split("+", 1)[0]  # 1.0.6-2+deb12u2: nftables 1.0.6
    assert f"v{upstream}" in said, said
