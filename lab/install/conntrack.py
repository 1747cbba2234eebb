"""The node's conntrack table read with the real `conntrack` tool (`-L`, parsed into entries), and the deletions
a sync plan names (lab/render/kubeproxy/sync.py) run with it: the event-driven deletions of kube-proxy up to
1.31, or the reconciler's per-entry ones of 1.32+ (kube-proxy 1.32+ talks netlink; the tool's filter
--orig-dst, --orig-port-dst, --reply-src is applied by the kernel alike)."""

from __future__ import annotations

from collections.abc import Sequence

from lab.install.tools import InstallError, require, run_command
from lab.render.kubeproxy.conntrack import ConntrackDeletion

# A probe reads flows' entries as the cleanup does (lab/probe/session.py): the same type, under its short name.
from lab.render.kubeproxy.kernel_state import ConntrackEntry as Entry


def parse_entries(listing: str) -> list[Entry]:
    """`conntrack -L` lines: the first src/dst/dport are the original direction's, the second src the reply's."""
    entries = []
    for line in listing.splitlines():
        fields: dict[str, list[str]] = {}
        for word in line.split():
            key, eq, value = word.partition("=")
            if eq:
                fields.setdefault(key, []).append(value)
        try:
            entries.append(
                Entry(
                    " ".join(line.split()),
                    fields["src"][0],
                    fields["dst"][0],
                    int(fields["dport"][0]),
                    fields["src"][1],
                )
            )
        except (KeyError, IndexError, ValueError):
            continue  # not an entry line (a summary), or a protocol without ports
    return entries


def family_args(family: str) -> tuple[str, ...]:
    """The `conntrack` option that keeps a listing to one family's table, "ipv4" or "ipv6" ("": every family, which
    is what `conntrack -L` lists without it, conntrack-tools 1.4.7 on kernel 6.18), as each of kube-proxy's
    proxiers looks at its own family's entries only."""
    return ("-f", family) if family else ()


def udp_entries(netns: str, family: str = "") -> tuple[Entry, ...]:
    """The node's UDP conntrack entries (of one family, if given), as the 1.32+ reconciler lists them on every
    sync."""
    require("conntrack")
    return tuple(parse_entries(run_command(netns, ("conntrack", "-L", *family_args(family), "-p", "udp"))))


def _delete(netns: str, args: tuple[str, ...]) -> None:
    try:
        run_command(netns, ("conntrack", *args))
    except InstallError as exc:
        # conntrack exits 1 when its filter matched nothing; kube-proxy takes that as success too.
        if "0 flow entries have been deleted" not in str(exc):
            raise


def delete_entries(netns: str, deletions: Sequence[ConntrackDeletion]) -> list[str]:
    """Run a plan's conntrack deletions on one node; what each did, as the plan says it."""
    if deletions:
        require("conntrack")
    for deletion in deletions:
        _delete(netns, deletion.args)
    return [deletion.done for deletion in deletions]
