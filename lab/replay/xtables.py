"""Each family's xtables in the replayed node: its dump restored with its own tool (iptables-restore,
ip6tables-restore), and the packet counters of the packet's family read as evidence.

lab.install.tools and lab.probe.evidence.counters run IPv4's iptables; an IPv6 proxier's dump goes to
ip6tables-restore and its counters come from `ip6tables-save -c`, in the same node namespace (inside a lab
namespace only, as every tool: lab.install.tools.netns_argv).
"""

from __future__ import annotations

from plumbum import ProcessExecutionError, local

from lab.install.tools import RESTORE_WAIT, InstallError, iptables_restore, netns_argv, run_command
from lab.probe.evidence.counters import CounterEvidence, Counters, parse_counters

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


class FamilyCounters(CounterEvidence):
    """The counters of the packet's family: CounterEvidence's reading (lab.probe.evidence.counters) of
    `ip6tables-save -c` for an IPv6 packet, `iptables-save -c` for an IPv4 one."""

    def __init__(self, netns: str, backend: str, version: int) -> None:
        self.save = f"{_PREFIX[version]}-{backend}-save"  # before CounterEvidence takes its first snapshot
        super().__init__(netns, backend)

    def _snapshot(self) -> Counters:
        return parse_counters(run_command(self.netns, (self.save, "-c")))
