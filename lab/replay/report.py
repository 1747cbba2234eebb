"""Terminal output of a replay."""

from __future__ import annotations

from rich.console import Console

from lab.replay.run import ReplayResult

_SAYS = {
    "dnat": "DNATed to {endpoints}",
    "local": "delivered to the node itself, unchanged",
    "forwarded": "forwarded out of the node without NAT",
    "dropped": "dropped",
    "rejected": "rejected",
}


def print_replay(result: ReplayResult, console: Console) -> None:
    s = result.setup
    says = _SAYS.get(result.outcome, result.outcome).format(endpoints=", ".join(result.endpoints))
    console.print(
        f"[bold]{s.protocol.lower()} {s.source} → {s.dst_ip}:{s.dst_port}[/bold] (from the {s.source_role}): {says}",
        highlight=False,
    )
    if result.source_seen:
        masq = "masqueraded" if result.masq else "source kept"
        console.print(f"  source seen by the receiver: {', '.join(result.source_seen)} ({masq})", highlight=False)
    console.print(
        f"  output={result.output!r} masq={str(result.masq).lower()} after {result.attempts} attempt(s)",
        highlight=False,
    )
    for line in result.trace:
        console.print(f"  rule  {line}", highlight=False, markup=False, soft_wrap=True)
