"""Terminal output of a replay."""

from __future__ import annotations

from rich.console import Console

from lab.replay.run import ReplayResult

_SAYS = {
    "dnat": "DNATed to {endpoints}",
    "local": "delivered to the node itself, unchanged",
    "accepted": "accepted by a kube-proxy filter rule and delivered to the node itself",
    "forwarded": "forwarded out of the node without NAT",
    "dropped": "dropped",
    "rejected": "rejected",
    "unanswered": "not answered, and no rule dropped it (lost on the way: see the rules below)",
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
    if a := result.affinity:
        stuck = "stuck to" if a.sticky else "did not stick to"
        console.print(
            f"  session affinity: a second connection from the same client {stuck} {a.endpoint} "
            f"(recent list {', '.join(a.lists)}, {a.seconds} s); the lists were emptied before each later one",
            highlight=False,
        )
    output = "None" if result.output is None else repr(result.output)
    console.print(
        f"  output={output} masq={str(result.masq).lower()} after {result.attempts} attempt(s)", highlight=False
    )
    for line in result.trace:
        console.print(f"  rule  {line}", highlight=False, markup=False, soft_wrap=True)
    for line in result.added:
        console.print(f"  added {line}", highlight=False, markup=False, soft_wrap=True)
