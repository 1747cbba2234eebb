"""The tests' own namespaces (support.netns) never let a command into the host's: the holder is in a namespace of
its own before anything runs, and a holder found in the host's namespace is refused."""

from __future__ import annotations

import os
import subprocess

import pytest
from support.netns import FreshNetns


def test_a_fresh_netns_is_not_the_hosts(host_unchanged):
    with FreshNetns() as netns:
        said = netns.run("readlink /proc/self/ns/net; ip -o link show")
    own, *links = said.stdout.splitlines()
    assert own != os.readlink("/proc/self/ns/net")
    assert [line.split(":")[1].strip() for line in links] == ["lo"]


def test_a_holder_in_the_hosts_namespace_is_refused(host_unchanged):
    netns = FreshNetns()
    netns.close()
    netns.holder = subprocess.Popen(["sleep", "infinity"])  # as the holder is before `unshare` has run
    try:
        with pytest.raises(RuntimeError, match="host's network namespace"):
            netns.run("nft add table ip must-not-exist")
    finally:
        netns.holder.kill()
        netns.holder.wait()


def test_a_namespace_whose_setup_is_cut_short_is_unpinned_and_gone(host_unchanged):
    """A SIGTERM (or any error) while the new namespace's setup runs comes after the pin: the pinned file must be
    unmounted before it can go, and the error raised is the one that cut it short, not EBUSY."""
    from lab.paths import NETNS_DIR
    from lab.realize import runs
    from lab.realize.enter import create_netns

    prefix = runs.new_prefix()
    name = f"{prefix}-cut"
    runs.record(prefix, name)

    def cut_short() -> None:
        raise KeyboardInterrupt  # as lab's SIGTERM handler raises Terminated

    try:
        with pytest.raises(KeyboardInterrupt):
            create_netns(name, cut_short)
        assert not (NETNS_DIR / name).exists()
    finally:
        runs.release(prefix)
