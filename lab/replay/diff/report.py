"""`lab diff`'s terminal report: per chain (set, virtual server) what the node lacks, has in excess, has changed or
in another order; the release its dumps match best; what is not kube-proxy's; how to replay a packet there."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from lab.replay.diff.compare import PartDiff
from lab.replay.diff.nodediff import NodeDiff
from lab.report.literal import literal

_WHOLE = {
    "missing": "missing from the node: kube-proxy {version} writes it for these objects",
    "extra": "on the node only: kube-proxy {version} writes no such {kind} for these objects (stale, another "
    "release's, or someone else's)",
}


def _part(diff: PartDiff, version: str, console: Console) -> None:
    kind = "" if diff.kind == "chain" else f"{diff.kind} "  # a chain is the usual case: named without the word
    heading = literal(f"{diff.table} {kind}{diff.name}", "bold")
    if diff.whole:
        heading += literal(f": {_WHOLE[diff.whole].format(version=version, kind=diff.kind)}")
    console.print(heading)
    for entry in diff.missing:
        console.print(Text("  - missing  ", style="red") + literal(entry), soft_wrap=True)
    for line, entry in diff.extra:
        console.print(Text(f"  + extra    line {line}: ", style="yellow") + literal(entry), soft_wrap=True)
    for expected, line, found in diff.changed:
        console.print(Text("  ~ expected ", style="cyan") + literal(expected), soft_wrap=True)
        console.print(Text(f"    found    line {line}: ", style="cyan") + literal(found), soft_wrap=True)
    if diff.order:
        console.print(literal("  order differs where kube-proxy's order matters (docs/diff.md); the node has:"))
        for line, entry in diff.order:
            console.print(literal(f"    line {line}: {entry}"), soft_wrap=True)
    if diff.spec:
        console.print(
            Text("  ~ declared ", style="cyan")
            + literal(f"{diff.spec[1] or '(nothing)'}; expected {diff.spec[0] or '(nothing)'}")
        )


def print_diff(result: NodeDiff, console: Console, replay: str) -> None:
    what = f"{result.node}: kube-proxy {result.version} ({result.mode}) against the node's dump: "
    if result.identical:
        console.print(literal(what) + Text("identical", style="green"))
    else:
        console.print(literal(what) + Text(f"{result.count} difference(s)", style="red"))
        for diff in result.differences:
            _part(diff, result.version, console)
    if result.best and result.own:
        versions = ", ".join(m.version for m in result.best)
        console.print(
            literal(
                f"the dump matches kube-proxy {versions} best ({result.best[0].differences} difference(s) against it, "
                f"{result.own.differences} against {result.own.version})"
            )
        )
    if result.others:
        console.print(literal(f"not kube-proxy's, not compared: {', '.join(result.others)}"), soft_wrap=True)
    if result.families_not_compared:
        proxiers = ", ".join(result.families_not_compared)
        console.print(literal(f"the node's proxier not compared: {proxiers}"), soft_wrap=True)
    console.print(literal(f"to see what a packet does: {replay}"), soft_wrap=True)
