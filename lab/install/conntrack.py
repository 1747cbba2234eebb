"""kube-proxy's conntrack cleanup on each node, done with the real `conntrack` tool as render decided it
(lab/render/kubeproxy/conntrack.py): the event-driven deletions as kube-proxy up to 1.31 ran them, or the
reconciler's pass of 1.32+ (list the UDP entries, delete those whose reply source is no serving endpoint of
the frontend they were addressed to)."""

from __future__ import annotations

from dataclasses import dataclass

from lab.install.tools import InstallError, require, run_command
from lab.render.kubeproxy.conntrack import Cleanup, Frontend


@dataclass(frozen=True)
class Entry:
    """One conntrack entry as `conntrack -L` prints it, with the fields the cleanup reads."""

    text: str
    orig_src: str
    orig_dst: str
    orig_dport: int
    reply_src: str


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


def stale(entries: list[Entry], reconcile: tuple[tuple[Frontend, frozenset[str]], ...]) -> list[Entry]:
    """The entries the reconciler deletes: addressed to a frontend, answered by no serving endpoint of it."""
    wanted = dict(reconcile)
    out = []
    for entry in entries:
        for frontend in (Frontend(entry.orig_dst, entry.orig_dport), Frontend(None, entry.orig_dport)):
            if frontend in wanted and entry.reply_src not in wanted[frontend]:
                out.append(entry)
                break
    return out


def _delete(netns: str, args: tuple[str, ...]) -> None:
    try:
        run_command(netns, ("conntrack", *args))
    except InstallError as exc:
        # conntrack exits 1 when its filter matched nothing; kube-proxy takes that as success too.
        if "0 flow entries have been deleted" not in str(exc):
            raise


def apply_cleanup(netns: str, plan: Cleanup) -> list[str]:
    """Run one node's cleanup; what it did: the commands run, or each entry deleted as `conntrack -L` printed it."""
    if plan.empty:
        return []
    require("conntrack")
    for args in plan.deletes:
        _delete(netns, args)
    done = [f"ran conntrack {' '.join(args)}" for args in plan.deletes]
    if plan.reconcile:
        for entry in stale(parse_entries(run_command(netns, ("conntrack", "-L", "-p", "udp"))), plan.reconcile):
            frontend = (
                ("--orig-dst", entry.orig_dst)
                if Frontend(entry.orig_dst, entry.orig_dport) in dict(plan.reconcile)
                else ()
            )
            _delete(
                netns,
                (
                    "-D",
                    "-p",
                    "udp",
                    *frontend,
                    "--orig-port-dst",
                    str(entry.orig_dport),
                    "--reply-src",
                    entry.reply_src,
                ),
            )
            done.append(f"deleted {entry.text}")
    return done
