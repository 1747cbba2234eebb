"""Why a probe went as it did, in words: from the frames the captures saw, the rules that moved and what the
client was told (a RST, an ICMP error and who sent it, a REJECT the kernel did not answer, a crafted segment's
fate). lab.probe.explain asks the kernel where it must (a packet lost without a rule)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lab.probe.capture import IPPROTO_ICMPV6, Frame
from lab.probe.craft import Craft, Segment
from lab.probe.evidence.base import RuleHit
from lab.probe.evidence.snmp import Counters, counted
from lab.realize.families import endpoint

# Why a REJECT can go unanswered, as the node's counters show it. The per-host ICMP budget (net/ipv4/inetpeer.c
# inet_peer_xrlim_allow, torvalds/linux v6.1): tokens of 1 ms that refill with the time since the host's
# `rate_last`, up to XRLIM_BURST_FACTOR (6) errors, one error costing net.ipv4.icmp_ratelimit of them; a host
# the node never sent anything to starts with a full burst (inet_getpeer sets rate_last 60 s back). ICMPv6 keeps
# the same kind of budget per host (net/ipv6/icmp.c icmpv6_xrlim_allow), an error costing
# net.ipv6.icmp.ratelimit (lab/probe/icmp_sent.py says how older kernels scaled it), and counts what it
# withholds as Icmp6OutRateLimitHost; both families share the host-wide budget of
# net.ipv4.icmp_msgs_per_sec, and ICMPv6 counts what that one withholds in IPv4's IcmpOutRateLimitGlobal
# (icmpv6_global_allow; both counters from torvalds/linux d0941130c935).
BUDGET = "its budget for a host refills by one error per {ms} ms ({sysctl}), up to a burst of 6"
# A redirect is counted in the same host's inet_peer: net/ipv4/route.c ip_rt_send_redirect (torvalds/linux v6.1)
# stamps `rate_last` with the time it is sent and leaves `rate_tokens` as it was (0 for a new host), so the
# budget refills from that moment, from zero.
REDIRECT_SHARES = (
    "a redirect restarts that budget's clock (net/ipv4/route.c ip_rt_send_redirect sets the host's rate_last, "
    "which inet_peer_xrlim_allow refills from), and a host that was sent nothing else before has no error saved up"
)
TIMING = "this verdict depends on timing: the same datagram {ms} ms after the last ICMP to that host is answered"
_REDIRECTS = ("IcmpOutRedirects", "Icmp6OutRedirects")


@dataclass(frozen=True)
class Budget:
    """What one ICMP error to a host costs of a node's budget for that host: `ms` of refill, and where that comes
    from (`sysctl`: the setting, and what older kernels made of it); `version` is the host's IP version, which says
    whose counters tell of it."""

    ms: int
    sysctl: str = "net.ipv4.icmp_ratelimit"
    version: int = 4


@dataclass(frozen=True)
class SentIcmp:
    """ICMP messages of one kind a node sent before: its counter's move, and where the captures saw each go (the
    counter also counts what no capture watches: the rule tracer's markers, answered on loopback)."""

    when: str  # "at probe first-datagram", "between probes, before check"
    node: str
    counter: str  # IcmpOutRedirects, IcmpOutDestUnreachs, and ICMPv6's Icmp6OutRedirects, Icmp6OutDestUnreachs
    count: int
    to: tuple[str, ...]  # the destination of each one a capture saw
    at: float | None  # perf_counter when the probe ended; None between probes (some time before the next one)
    # Whether a capture saw them leave; a redirect none saw is for whom the kernel makes one (`to`: inferred).
    seen: bool = True


def silent_reject(
    node: str, host: str, delta: Counters, counts_limits: bool, before: list[SentIcmp], budget: Budget, now: float
) -> str:
    """Why `node` sent `host` no ICMP (or ICMPv6, for an IPv6 host) error for a packet it rejected, as far as its
    counters (`delta`: what moved during the probe) and the ICMP it was seen sending before show it; the cause
    left unknown where they do not."""
    earlier = [s for s in before if s.node == node and host in s.to]
    redirects = [s for s in earlier if s.counter in _REDIRECTS]
    errors = [s for s in earlier if s.counter not in _REDIRECTS]
    icmp, per_host = ("ICMP", "IcmpOutRateLimitHost") if budget.version == 4 else ("ICMPv6", "Icmp6OutRateLimitHost")
    if limited := delta.get(per_host, 0):
        said = f"{node} sent no {icmp} error: {per_host} +{limited} (its {icmp} budget for {host} was spent; "
        said += BUDGET.format(ms=budget.ms, sysctl=budget.sysctl) + ")"
        if redirects and budget.version == 4:
            redirected = _sent(redirects, f"an ICMP redirect for {host}", host, now)
            said += f"; {node} had counted {redirected}, which shares that budget: {REDIRECT_SHARES}"
        elif redirects:  # ndisc_send_redirect limits them by the host's same entry, 1 s each: what that left is unread
            redirected = _sent(redirects, f"an ICMPv6 redirect for {host}", host, now)
            said += f"; {node} had counted {redirected}, whose share of that budget is not known"
        if errors:
            said += f"; {node} had counted {_sent(errors, f'{icmp} errors to {host}', host, now)}"
        if not earlier:
            said += f"; what spent it is not known: no {icmp} from {node} to {host} was seen before"
        return f"{said}; {TIMING.format(ms=budget.ms)}"
    if spent := delta.get("IcmpOutRateLimitGlobal", 0):
        return (
            f"{node} sent no {icmp} error: IcmpOutRateLimitGlobal +{spent} (its budget for all hosts, "
            "net.ipv4.icmp_msgs_per_sec, which ICMPv6 shares, was spent); this verdict depends on timing"
        )
    moved = f"({counted(delta)})" if delta else f"(none of its {icmp} counters moved)"
    if not counts_limits:
        said = (
            f"{node} sent no {icmp} error {moved}, and this kernel does not count the {icmp} errors it rate-limits "
            f"({per_host} came with Linux 6.2, d0941130c935): the cause is not known"
        )
        if earlier:
            said += f"; {node} had counted {_sent(earlier, f'{icmp} for {host}', host, now)}"
        return said
    return f"{node} sent no {icmp} error and its counters do not say why {moved}: the cause is not known"


def _sent(sent: list[SentIcmp], what: str, host: str, now: float) -> str:
    """`an ICMP redirect (IcmpOutRedirects +1 at probe first-datagram, 0.4 s before)`: the connections of a
    probe with attempts summed, and how many of them went to `host` when the counter counted others too."""
    summed: dict[tuple[str, str], list[int]] = {}
    last: dict[tuple[str, str], float | None] = {}
    for s in sent:
        count, seen = summed.setdefault((s.when, s.counter), [0, 0])
        summed[(s.when, s.counter)] = [count + s.count, seen + (s.to.count(host) if s.seen else s.count)]
        last[(s.when, s.counter)] = s.at
    parts = []
    for (when, counter), (count, seen) in summed.items():
        part = f"{counter} +{count} {when}" + ("" if seen == count else f", {seen} of them seen going to {host}")
        parts.append(part + ("" if (at := last[(when, counter)]) is None else f", {now - at:.1f} s before"))
    if unseen := [s for s in sent if not s.seen]:
        parts.append(
            f"made for {host}, which {unseen[0].node} forwarded back out of the interface it came in by; no capture "
            "saw it leave"
        )
    return f"{what} ({'; '.join(parts)})"


BACKING_OFF = (
    "the exchange before it went unanswered too: the client's kernel was holding the request for its retransmission "
    "timer (it backs off, doubling), which fires after the probe's wait"
)


def path_lines(frames: list[Frame]) -> tuple[str, ...]:
    """The frames as path lines, a repeat of the line before left out."""
    lines: list[str] = []
    for frame in frames:
        line = f"{frame.where:<24} {frame.summary()}"
        if not lines or lines[-1] != line:
            lines.append(line)
    return tuple(lines)


def is_icmp(frame: Frame) -> bool:
    """An ICMP or ICMPv6 message: what a REJECT answers with in either family."""
    return frame.packet is not None and frame.packet.protocol in (1, IPPROTO_ICMPV6)


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
    unanswered: Callable[[str], str] = lambda node: f"{node}'s counters were not read: the cause is not known",
) -> str:
    """The why of a probe that was not delivered, from the frames that show its path; `answer` is what the
    client says came back, `lost` tells where a packet last seen in a frame went (the kernel is asked),
    `unanswered` why a node sent no ICMP error for what it rejected (its counters are asked)."""
    if outcome == "delivered":
        return ""
    if found := dropping_rule(hits):
        node, hit = found
        said = f"{'rejected' if hit.verdict == 'REJECT' else 'dropped'} on {node} by {hit}"
        if outcome != "dropped":
            return f"{said}; the client got: {answer}"
        if hit.verdict == "REJECT" and not any(is_icmp(f) for f in frames):
            icmp = "ICMPv6" if any(f.packet is not None and f.packet.version == 6 for f in frames) else "ICMP"
            return f"{said}, but no {icmp} error was sent back: {unanswered(node)}"
        return said
    if outcome != "dropped":  # a RST or an ICMP error came back: where it was seen nearest the client
        came = next((f for f in reversed(frames) if "R" in tcp_flags(f) or is_icmp(f)), None)
        return f"{answer}: {came.where} carried {came.summary()}" if came else answer
    if reply_lost:
        said = "the backend received it, but its answer never reached the client"
        return f"{said}: {lost(frames[-1], hits)}" if frames else said
    return lost(frames[-1], hits) if frames else "never seen on any node interface"


def crafted_fate(frames: list[Frame], craft: Craft, seq: int, client: str, names: dict[str, str]) -> tuple[str, bool]:
    """Where the crafted segment (its sequence number `seq`) was seen last, with which source, and what the
    client answered it with (the first segment it sent after it); and whether it reached the client."""
    seen = [(i, f, seg) for i, f in enumerate(frames) if (seg := Segment.of(f)) and craft.is_it(seg, seq)]
    if not seen:
        return f"the crafted {craft.what} was never seen on a node interface", False
    index, last, seg = seen[-1]
    source = endpoint(seg.src, seg.sport) + (f" ({names[seg.src]})" if seg.src in names else "")
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
