"""Each family's xtables in the replayed node: its dump restored with its own tool (iptables-restore,
ip6tables-restore), and the packet counters of the packet's family read as evidence.

lab.install.tools and lab.probe.evidence.counters run IPv4's iptables; an IPv6 proxier's dump goes to
ip6tables-restore and its counters come from `ip6tables-save -c`, in the same node namespace (inside a lab
namespace only, as every tool: lab.install.tools.netns_argv).
"""

from __future__ import annotations

from collections.abc import Callable

from plumbum import ProcessExecutionError, local

from lab.install.tools import RESTORE_WAIT, InstallError, iptables_restore, netns_argv, run_command
from lab.probe.evidence.base import RuleHit
from lab.probe.evidence.counters import Counters, counter_hits, parse_counters

_PREFIX = {4: "iptables", 6: "ip6tables"}


def xtables_restore(netns: str, text: str, version: int, backend: str) -> None:
    """A family's dump restored as kube-proxy's own restore would (the tool's error names the refused line)."""
    if version == 4:
        iptables_restore(netns, text, backend)
        return
    command = netns_argv(netns, (f"ip6tables-{backend}-restore", *RESTORE_WAIT))
    try:
        (local[command[0]][command[1:]] << text)()
    except ProcessExecutionError as exc:
        raise InstallError(f"ip6tables-{backend}-restore rejected the IPv6 rules: {exc.stderr.strip()}") from None


class FamilyCounters:
    """The rules of one family whose packet counters moved since the previous probe (evidence, as
    lab.probe.evidence.counters.CounterEvidence is for IPv4)."""

    def __init__(self, netns: str, backend: str, version: int) -> None:
        self.netns, self.save = netns, f"{_PREFIX[version]}-{backend}-save"
        self._last = self._snapshot()

    def _snapshot(self) -> Counters:
        return parse_counters(run_command(self.netns, (self.save, "-c")))

    def mark(self) -> object:
        return self._last

    def hits(self, mark: object, wanted: Callable[[str], bool]) -> list[RuleHit]:
        after = self._snapshot()
        hits = counter_hits(mark, after)  # type: ignore[arg-type]
        self._last = after
        return hits

    def restart(self) -> None:
        self._last = self._snapshot()

    def close(self) -> None:
        """Nothing runs between two snapshots."""
