"""cluster.tools: which Debian release's nft kube-proxy (its image) and the node's other writer (the host, a CNI)
run; what the loader takes and refuses in words, and the commands install and the probes then run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from support.scenario import BASE, error_for, write

from lab.describe.load import load_scenario
from lab.install.tools import InstallError, reading_nft, tool_command

NFTABLES = BASE.replace("cluster: {", "cluster: {proxyMode: nftables, ")


def _with_tools(base: str, tools: str) -> str:
    return base.replace("cluster: {", "cluster: {tools: " + tools + ", ", 1)


def test_the_releases_and_the_host_script_are_taken(tmp_path: Path) -> None:
    text = _with_tools(NFTABLES, '{kubeProxy: {nft: bookworm}, host: {nft: trixie, nftables: "add table ip x\\n"}}')
    cluster = load_scenario(write(tmp_path, text)).variants[0].cluster
    assert cluster.tools == (("kubeProxy", "nft", "bookworm"), ("host", "nft", "trixie"))
    assert cluster.host_nftables == "add table ip x\n"


def test_no_tools_is_this_machines_nft(tmp_path: Path) -> None:
    topo = load_scenario(write(tmp_path, NFTABLES)).variants[0]
    assert topo.cluster.tools == ()
    assert tool_command(topo, "kubeProxy", "nft") == ("nft",)
    assert reading_nft(topo) == ("nft",)


@pytest.mark.parametrize("release", ["buster", "sid", "1.0.6", "Trixie"])
def test_an_unknown_release_is_refused_in_words(tmp_path: Path, release: str) -> None:
    error = str(error_for(tmp_path, _with_tools(NFTABLES, f"{{kubeProxy: {{nft: {release}}}}}")))
    assert "cluster.tools.kubeProxy.nft" in error
    assert "bullseye" in error and "trixie" in error


def test_an_unknown_tool_or_role_is_refused(tmp_path: Path) -> None:
    assert "cluster.tools.kubeProxy.nftables" in str(
        error_for(tmp_path, _with_tools(NFTABLES, "{kubeProxy: {nftables: x}}"))
    )
    assert "cluster.tools.cni" in str(error_for(tmp_path, _with_tools(NFTABLES, "{cni: {nft: trixie}}")))


def test_kube_proxys_nft_outside_nftables_mode_is_refused(tmp_path: Path) -> None:
    error = str(error_for(tmp_path, _with_tools(BASE, "{kubeProxy: {nft: bookworm}}")))
    assert "kube-proxy runs nft only in proxyMode nftables, not iptables" in error


def test_install_runs_each_writers_fetched_command_and_the_lab_reads_with_the_newest(tmp_path: Path) -> None:
    text = _with_tools(NFTABLES, "{kubeProxy: {nft: bookworm}, host: {nft: trixie}}")
    topo = load_scenario(write(tmp_path, text)).variants[0]
    old, new = ("/b/ld.so", "/b/nft"), ("/t/ld.so", "/t/nft")
    fetched = dataclasses.replace(topo, tool_commands=(("kubeProxy", "nft", old), ("host", "nft", new)))
    assert tool_command(fetched, "kubeProxy", "nft") == old
    assert tool_command(fetched, "host", "nft") == new
    assert reading_nft(fetched) == new
    with pytest.raises(InstallError, match="names kubeProxy's nft release, but the runner did not fetch it"):
        tool_command(topo, "kubeProxy", "nft")
