"""Why a probe went as it did, in words: from the frames the captures saw, the rules that moved and what the
client was told (a RST, an ICMP error and who sent it, a REJECT the kernel did not answer, a crafted segment's
fate). The session asks the kernel where it must (lab.probe.session: a packet lost without a rule)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lab.probe.capture import Frame
from lab.probe.craft import Craft, Segment
from lab.probe.evidence.base import RuleHit
from lab.probe.flows import KeptFlow

# Why a REJECT can go unanswered: the kernel's ICMP rate limit (net/ipv4/icmp.c, icmpv4_xrlim_allow), per
# destination host, which a client sending several datagrams a second to a Service without endpoints meets.
ICMP_RATE_LIMIT = (
    "the kernel rate-limits the ICMP errors it sends to a host (net.ipv4.icmp_ratelimit: after a burst of 6, "
    "one per 1000 ms by default)"
)


BACKING_OFF = (
    "the kept connection was already retransmitting an unanswered request, and the client's kernel sends this "
    "one only when its retransmission timer fires (it backs off, doubling), after the probe's wait"
)


def path_lines(frames: list[Frame]) -> tuple[str, ...]:
    """The frames as path lines, a repeat of the line before left out."""
    lines: list[str] = []
    for frame in frames:
        line = f"{frame.where:<24} {frame.summary()}"
        if not lines or lines[-1] != line:
            lines.append(line)
    return tuple(lines)


def tcp_flags(frame: Frame) -> str:
    summary = frame.summary() or ""
    return summary.rsplit("[", 1)[-1][:-1] if summary.endswith("]") else ""


def stray_answer(outcome: str, frames: list[Frame], target: str) -> str:
    """A SYN-ACK the client got from another address than it called, and reset: a NAT on the way was bypassed."""
    if outcome == "delivered":
        return ""
    syn = next((f.summary() for f in frames if (f.summary() or "").endswith("tcp [S]")), None)
    client = syn.split(" > ")[0] if syn else None
    for frame in reversed(frames):  # the answer nearest the client: what it got
        src, _, rest = (frame.summary() or "").partition(" > ")
        stray = client and rest.startswith(f"{client} tcp [S.]") and src != target
        # Only the client's reset proves the answer reached it as it was.
        if stray and any((f.summary() or "").startswith(f"{client} > {src} tcp [R") for f in frames):
            return (
                f"the answer reached the client from {src}, not {target} which it called ({frame.where}): it "
                "came back without passing the NAT that had sent the connection there, and the client reset it"
            )
    return ""


def dropping_rule(hits: Sequence[tuple[str, RuleHit]]) -> tuple[str, RuleHit] | None:
    """The rule (or chain policy) that dropped or rejected the probe's packet, with its node: the last such one
    the packet met. Only meaningful for a probe that was not delivered."""
    return next(
        ((node, hit) for node, hit in reversed(hits) if hit.verdict in ("DROP", "REJECT") or hit.rule == "policy DROP"),
        None,
    )


def explain(
    outcome: str,
    hits: list[tuple[str, RuleHit]],
    frames: list[Frame],
    reply_lost: bool,
    answer: str,
    lost: Callable[[Frame, list[tuple[str, RuleHit]]], str],
) -> str:
    """The why of a probe that was not delivered, from the frames that show its path; `answer` is what the
    client says came back, `lost` tells where a packet last seen in a frame went (the kernel is asked)."""
    if outcome == "delivered":
        return ""
    if found := dropping_rule(hits):
        node, hit = found
        said = f"{'rejected' if hit.verdict == 'REJECT' else 'dropped'} on {node} by {hit}"
        if outcome != "dropped":
            return f"{said}; the client got: {answer}"
        if hit.verdict == "REJECT" and not any(" icmp " in (f.summary() or "") for f in frames):
            return f"{said}, but no ICMP error was sent back: {ICMP_RATE_LIMIT}"
        return said
    if outcome != "dropped":  # a RST or an ICMP error came back: where it was seen nearest the client
        came = next((f for f in reversed(frames) if "R" in tcp_flags(f) or " icmp " in (f.summary() or "")), None)
        return f"{answer}: {came.where} carried {came.summary()}" if came else answer
    if reply_lost:
        said = "the backend received it, but its answer never reached the client"
        return f"{said}: {lost(frames[-1], hits)}" if frames else said
    return lost(frames[-1], hits) if frames else "never seen on any node interface"


def retransmitting(flow: KeptFlow) -> bool:
    """Whether the exchange before a kept connection's latest went unanswered too."""
    outcomes = [e.outcome for e in flow.history if e.outcome]
    return len(outcomes) >= 2 and outcomes[-2] == "dropped"


def crafted_fate(frames: list[Frame], craft: Craft, seq: int, client: str, names: dict[str, str]) -> tuple[str, bool]:
    """Where the crafted segment (its sequence number `seq`) was seen last, with which source, and what the
    client answered it with (the first segment it sent after it); and whether it reached the client."""
    seen = [(i, f, seg) for i, f in enumerate(frames) if (seg := Segment.of(f)) and craft.is_it(seg, seq)]
    if not seen:
        return f"the crafted {craft.what} was never seen on a node interface", False
    index, last, seg = seen[-1]
    source = f"{seg.src}:{seg.sport}" + (f" ({names[seg.src]})" if seg.src in names else "")
    at_client = seg.dst == client and last.outgoing
    where = (
        f"reached the client from {source}"
        if at_client
        else f"was last seen {last.where} ({last.summary()}): it did not reach the client"
    )
    said = f"the crafted {craft.what} {where}"
    answer = next((f for f in frames[index:] if Segment.of(f) and f.addresses and f.addresses[0] == client), None)
    if at_client and answer is not None:
        said += f"; the client answered it with {answer.summary()} ({answer.where})"
    return said, at_client
