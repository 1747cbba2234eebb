"""Each Debian release's nft and iptables, fetched from the archive into the lab's cache (~/.cache/lab or
$LAB_CACHE: later runs reuse it, checked), run on this machine with the release's own loader and libraries."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

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
@pytest.mark.parametrize(
    ("tool", "package", "command"),
    [
        ("nft", "nftables", ()),
        ("iptables-nft", "iptables", ("iptables",)),
        ("iptables-legacy", "iptables", ("iptables",)),
    ],
)
def test_a_release_tool_runs_as_its_own_version(release: str, tool: str, package: str, command: tuple[str]) -> None:
    tools = _tools(release)
    said = subprocess.run(
        [*tools.argv(tool), *command, "--version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    upstream = tools.versions[package].split("-", 1)[0].split("+", 1)[0]  # 1.0.6-2+deb12u2: nftables 1.0.6
    assert f"v{upstream}" in said, said
    if tool.startswith("iptables"):
        assert f"({tool.removeprefix('iptables-').replace('nft', 'nf_tables')})" in said, said


def test_a_release_iptables_loads_its_own_extensions() -> None:
    """Rules with match extensions (conntrack, comment, mark) written and read back by bullseye's iptables-legacy
    in a namespace of its own: the extensions it loads (the loader's LD_DEBUG=files says which) are bullseye's, not
    this machine's (another libxtables'), and the rule reads back as written."""
    tools = _tools("bullseye")
    rules = (
        '*filter\n-A INPUT -m conntrack --ctstate NEW -m comment --comment "a b" -m mark --mark 0x4000/0x4000\nCOMMIT\n'
    )
    ns = f"lab-{os.getpid() % 0xFFFFFF:06x}-debtools"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        run = ["ip", "netns", "exec", ns, *tools.argv("iptables-legacy")]
        env = {**os.environ, "LD_DEBUG": "files"}
        restore = subprocess.run(
            [*run, "iptables-legacy-restore"], input=rules, text=True, capture_output=True, env=env, timeout=30
        )
        saved = subprocess.run([*run, "iptables-legacy-save"], capture_output=True, text=True, check=True).stdout
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)
    assert restore.returncode == 0, restore.stderr[-2000:]
    loaded = re.findall(r"file=(\S+/libxt_conntrack\.so) ", restore.stderr)
    assert loaded and all(path.startswith(str(tools.tree)) for path in loaded), loaded
    assert '-A INPUT -m conntrack --ctstate NEW -m comment --comment "a b" -m mark --mark 0x4000/0x4000' in saved
    assert "v1.8.7" in saved, saved


@pytest.mark.parametrize("release", RELEASES)
def test_no_link_of_a_fetched_tree_leads_to_the_host(release: str) -> None:
    """Each link the packages hold leads inside the tree: libc6's absolute lib64/ld-linux-x86-64.so.2 (bullseye's
    and bookworm's) was made relative on unpacking, and reaches the release's own loader, not this machine's."""
    tools = _tools(release)
    links = [Path(top, name) for top, dirs, files in os.walk(tools.tree) for name in dirs + files]
    targets = {str(p.relative_to(tools.tree)): os.readlink(p) for p in links if p.is_symlink()}
    assert targets and not [path for path, target in targets.items() if target.startswith("/")], targets
    assert all(os.path.realpath(tools.tree / path).startswith(f"{tools.tree}/") for path in targets)
    loader = tools.tree / "lib64/ld-linux-x86-64.so.2"
    if loader.is_symlink():
        assert os.path.realpath(loader).startswith(f"{tools.tree}/lib/x86_64-linux-gnu/"), os.readlink(loader)
