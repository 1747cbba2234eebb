"""Terminal output of a replay."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from lab.realize.families import endpoint
from lab.replay.run import ReplayResult
from lab.report.literal import literal

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
    # Several outcomes: the load balancing's choices differ, each said (every choice was drawn: lab/replay/run.py).
    outcomes = result.outcome.split("|")
    says = "; ".join(_SAYS.get(o, o).format(endpoints=", ".join(result.endpoints)) for o in outcomes)
    says += f" (the load balancing's {result.choices} choices differ: each was drawn)" if len(outcomes) > 1 else ""
    console.print(
        Text.assemble(
            literal(f"{s.protocol.lower()} {s.source} → {endpoint(s.dst_ip, s.dst_port)}", "bold"),
            literal(f" (from the {s.source_role}): {says}"),
        )
    )
    if result.source_seen:
        masq = "masqueraded" if result.masq else "source kept"
        console.print(literal(f"  source seen by the receiver: {', '.join(result.source_seen)} ({masq})"))
    if a := result.affinity:
        stuck = "stuck to" if a.sticky else "did not stick to"
        console.print(
            literal(
                f"  session affinity: a second connection from the same client {stuck} {a.endpoint} "
                f"(recent list {', '.join(a.lists)}, {a.seconds} s); the lists were emptied before each later one"
            )
        )
    output = "None" if result.output is None else repr(result.output)
    drew = f", every one of the {result.choices} choices drawn" if result.choices > 1 else ""
    console.print(
        literal(f"  output={output} masq={str(result.masq).lower()} after {result.attempts} attempt(s){drew}")
    )
    # The rules as the dump wrote them: its comments are the user's text.
    for line in result.trace:
        console.print(literal(f"  rule  {line}"), soft_wrap=True)
    for line in result.added:
        console.print(literal(f"  added {line}"), soft_wrap=True)
