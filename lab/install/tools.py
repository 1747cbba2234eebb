"""install: feed rendered rules to the real tools inside a namespace, and run commands there.

Every command runs through `ip netns exec <ns>`: the tools never see the host's namespace.
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import get_args

from plumbum import ProcessExecutionError, local

from lab.describe.schema import DebianRelease
from lab.describe.topology import Topology
from lab.realize.runs import PREFIX_RE
from lab.render.kubeproxy.ipvs_resync import set_lines

PACKAGES = {"ip": "iproute2", "ipset": "ipset", "nft": "nftables", "ipvsadm": "ipvsadm", "conntrack": "conntrack"}


class InstallError(RuntimeError):
    pass


def require(tool: str) -> str:
    """The tool's path, or an error saying which Debian package brings it."""
    path = shutil.which(tool)
    if path is None:
        package = PACKAGES.get(tool, "iptables" if tool.startswith(("iptables", "ip6tables")) else tool)
        raise InstallError(f"{tool} is not installed: apt-get install {package} (scripts/setup installs it)")
    return path


def netns_argv(netns: str, argv: tuple[str, ...]) -> list[str]:
    """The command line that runs argv inside a lab namespace (and never outside one); a path (a Debian release's
    loader, tool_command) is run as it is, a name is this machine's tool."""
    if not PREFIX_RE.match(netns):
        raise InstallError(f"refusing to run {argv[0]} outside a lab namespace (got {netns!r})")
    program = argv[0] if argv[0].startswith("/") else require(argv[0])
    return [require("ip"), "netns", "exec", netns, program, *argv[1:]]


def tool_command(topo: Topology, role: str, tool: str) -> tuple[str, ...]:
    """How `role` ("kubeProxy", "host") runs `tool`: the Debian release's own binary cluster.tools names, as the
    runner fetched it (topo.tool_commands), else this machine's."""
    for who, name, argv in topo.tool_commands:
        if (who, name) == (role, tool):
            return argv
    if any((who, name) == (role, tool) for who, name, _ in topo.cluster.tools):
        raise InstallError(f"cluster.tools names {role}'s {tool} release, but the runner did not fetch it")
    return (tool,)


Command = tuple[str, ...]  # a tool's command line: its name on this machine, or the argv of a Debian release's


@dataclass(frozen=True)
class Xtables:
    """The iptables a writer of the node's rules runs: its backend ("nft" or "legacy") and, where cluster.tools
    names a Debian release's, the command that runs that release's multi-call binary (else this machine's)."""

    backend: str = "nft"
    command: Command = ()

    def argv(self, kind: str, family: str = "IPv4") -> list[str]:
        """The command line of one tool: `iptables-legacy-restore`, `ip6tables-nft-save`, `iptables-nft`."""
        return [*self.command, _tool(kind, self.backend, family)]


def xtables(topo: Topology, role: str) -> Xtables:
    """The iptables `role` runs: "kubeProxy" in cluster.iptablesBackend, "host" (the host's firewall, the CNI,
    ip-masq-agent) in cluster.tools.host.iptablesBackend."""
    backend = topo.cluster.iptables_backend if role == "kubeProxy" else topo.cluster.host_iptables_backend
    tool = f"iptables-{backend}"
    named = any((who, name) == (role, tool) for who, name, _ in topo.cluster.tools)
    return Xtables(backend, tool_command(topo, role, tool) if named else ())


def reading_nft(topo: Topology) -> tuple[str, ...]:
    """The nft the lab itself reads a node's rules and traces with: the newest Debian release cluster.tools names
    (an older nft may crash on what a newer one wrote: kubernetes#136786), else this machine's."""
    order = get_args(DebianRelease)
    named = sorted((order.index(release), role) for role, tool, release in topo.cluster.tools if tool == "nft")
    return tool_command(topo, named[-1][1], "nft") if named else ("nft",)


def _in_netns(netns: str, *argv: str) -> object:
    command = netns_argv(netns, argv)
    return local[command[0]][command[1:]]


def _tool(kind: str, backend: str, family: str = "IPv4") -> str:
    """The xtables tool of a backend, IPv4's or IPv6's (`ip6tables-nft-restore`)."""
    name = "ip6tables" if family == "IPv6" else "iptables"
    return f"{name}-{backend}-{kind}" if kind != "iptables" else f"{name}-{backend}"


def _feed(netns: str, argv: list[str], text: str, what: str, tool: str = "") -> None:
    """Run a restore tool (named `tool` where argv runs it through a loader) on text; on rejection, quote the line
    the tool names; a tool killed by a signal (an older nft crashing on what a newer one wrote) says so."""
    try:
        (_in_netns(netns, *argv) << text)()  # type: ignore[operator]
    except ProcessExecutionError as exc:
        name = tool or argv[0]
        if exc.retcode < 0:
            crash = signal.Signals(-exc.retcode).name
            said = f": {exc.stderr.strip()}" if exc.stderr.strip() else ""
            raise InstallError(f"{name} crashed on the {what}: killed by {crash}{said}") from None
        raise InstallError(_explain_restore_error(name, exc.stderr, text, what)) from None


# kube-proxy waits up to 5 s for the xtables lock (-w 5; its `-W 100000` poll interval is one this iptables
# ignores): kubernetes/kubernetes pkg/util/iptables/iptables.go at a122bc70, WaitString and WaitSecondsValue.
# iptables-legacy's lock is one file for every namespace, so nodes installed side by side take turns at it.
RESTORE_WAIT = ("-w", "5")


def iptables_restore(
    netns: str, text: str, xt: Xtables = Xtables(), family: str = "IPv4", noflush: bool = False, what: str = "rules"
) -> None:
    """iptables-restore, or ip6tables-restore for an IPv6 proxier's rules; `noflush`: adding to the tables (a
    CNI's rules beside kube-proxy's) rather than replacing them."""
    restore = xt.argv("restore", family)
    argv = [*restore, *RESTORE_WAIT, *(("--noflush",) if noflush else ())]
    _feed(netns, argv, text, what, restore[-1])


def iptables_has(netns: str, table: str, chain: str, spec: Sequence[str], xt: Xtables = Xtables()) -> bool:
    """Whether the rule stands in the chain (`iptables -C`: it exits 1 where the rule does not, 2 where the chain
    it jumps to does not: iptables-nft says it "does not exist", iptables-legacy "Couldn't load target")."""
    argv = (*xt.argv("iptables"), *RESTORE_WAIT, "-t", table, "-C", chain, *spec)
    try:
        _in_netns(netns, *argv)()  # type: ignore[operator]
    except ProcessExecutionError as exc:
        if exc.retcode == 1 or "does not exist" in exc.stderr or "Couldn't load target" in exc.stderr:
            return False
        raise InstallError(f"{xt.argv('iptables')[-1]} -C {chain} in {netns}: {exc.stderr.strip()}") from None
    return True


def nft_apply(netns: str, text: str, what: str = "nftables script", nft: tuple[str, ...] = ("nft",)) -> None:
    """`nft -f -` of text, with this machine's nft or the argv of a release's (tool_command)."""
    _feed(netns, [*nft, "-f", "-"], text, what, "nft")


def restore_ipsets(netns: str, text: str) -> None:
    _feed(netns, ["ipset", "restore"], text, "ipsets")


def ipset_restore_all(netns: str, text: str) -> None:
    """kube-proxy's set list, with its comment lines (ipset restore knows no comments) left out."""
    restore_ipsets(netns, "".join(line + "\n" for line in set_lines(text)))


def ipset_apply(netns: str, lines: Sequence[str]) -> None:
    """ipset restore lines applied over what the sets hold (`-exist`: a create of a set that exists is no error)."""
    _feed(netns, ["ipset", "restore", "-exist"], "".join(f"{line}\n" for line in lines), "ipsets")


def ipvsadm_restore(netns: str, text: str, clear: bool = True) -> None:
    """ipvsadm-restore clears IPVS first (`ipvsadm -C`); `ipvsadm -R` (clear=False) only runs the lines, each as
    one ipvsadm invocation, as a sync's changes need."""
    _feed(netns, ["ipvsadm-restore"] if clear else ["ipvsadm", "-R"], text, "virtual servers")


def run_command(netns: str, argv: tuple[str, ...]) -> str:
    """A command in a lab namespace (a scenario's step); its output, or an error quoting what it said."""
    try:
        return str(_in_netns(netns, *argv)())  # type: ignore[operator]
    except ProcessExecutionError as exc:
        said = (exc.stderr or exc.stdout or "").strip()
        raise InstallError(f"`{shlex.join(argv)}` in {netns} exited with {exc.retcode}: {said}") from None


def ip_batch(netns: str, commands: list[str]) -> None:
    _feed(netns, ["ip", "-batch", "-"], "".join(c + "\n" for c in commands), "ip commands")


# Where each tool names the refused line: iptables-restore and ipset ("line 3"), nft ("/dev/stdin:3:5-9: Error").
_REFUSED_LINE = re.compile(r"/dev/stdin:(\d+):|line:? (\d+)")


def _explain_restore_error(tool: str, stderr: str, text: str, what: str) -> str:
    match = _REFUSED_LINE.search(stderr)
    if not match:
        return f"{tool} rejected the {what}: {stderr.strip()}"
    number = int(match.group(1) or match.group(2))
    lines = text.splitlines()
    line = lines[number - 1].strip() if 0 < number <= len(lines) else "?"
    return f"{tool} rejected line {number} of the {what}: {line}\n{stderr.strip()}"
