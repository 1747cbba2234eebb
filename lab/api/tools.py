"""The tools a scenario's cluster.tools names, fetched before the stages run: the stages never touch the network or
the cache, they run the commands handed down in the Topology (lab/install/tools.py: tool_command)."""

from __future__ import annotations

import dataclasses

from lab.api.arguments import LabError
from lab.describe.topology import Topology
from lab.vm.debtools import release_tools
from lab.vm.errors import VmError

UNREACHABLE = "fetched no package list"  # what lab.vm says when Debian's archive cannot be reached


def with_release_tools(topo: Topology) -> tuple[Topology, str]:
    """topo with each cluster.tools entry's command: the Debian release's own binary, run by its own loader (the
    release's packages downloaded into the lab's cache on first use, checked at every use); and "", or why the
    variant cannot run here: Debian's archive unreachable and the tools not cached. A cache that fails its check
    is an error (LabError)."""
    try:
        commands = tuple(
            (role, tool, tuple(release_tools(release).argv(tool))) for role, tool, release in topo.cluster.tools
        )
    except VmError as exc:
        if UNREACHABLE in str(exc):
            return topo, f"the tools cluster.tools names are not cached and Debian's archive is unreachable: {exc}"
        raise LabError(f"the tools cluster.tools names cannot be had: {exc}") from None
    return dataclasses.replace(topo, tool_commands=commands), ""
