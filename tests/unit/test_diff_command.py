"""The `lab replay ...` command lab diff prints for copying is shell-quoted in every value: pasted, it runs with the
very file names and addresses it shows, whatever they hold."""

from __future__ import annotations

import argparse
import shlex
from types import SimpleNamespace

from lab.replay.diff.command import replay_hint


def test_every_value_of_the_printed_replay_command_is_shell_quoted(tmp_path):
    rules = str(tmp_path / "node 1 $(touch pwned).rules")
    args = argparse.Namespace(node="node1", rules=rules, rules6=None, nft=None, ipsets="it's; set", ipvs=None)
    # Values a scenario could hold before addresses were parsed as Kubernetes parses them (a scoped address).
    node = SimpleNamespace(
        ip="fd00::1%$(reboot)", secondary_ip="10.0.0.1 `id`", pod_cidr="fd00:10::/64", secondary_pod_cidr="a|b"
    )
    command = replay_hint(args, SimpleNamespace(node={"node1": node}.__getitem__))
    assert shlex.split(command) == [
        "lab", "replay", "--rules", rules, "--ipsets", "it's; set",
        "--node-ip", "fd00::1%$(reboot)", "--node-ip", "10.0.0.1 `id`",
        "--pod-cidr", "fd00:10::/64", "--pod-cidr", "a|b",
        "--from", "SRC_IP", "--to", "DST_IP:PORT",
    ]  # fmt: skip
