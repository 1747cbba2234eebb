"""Probes that send several connections, and expectations relative to the node a connection entered through.

A router spreading flows over several nodes (ECMP) makes the node a connection meets first a property of
that connection, not of the probe: `attempts: N` sends N connections (each from a new source port) and
judges every one; `source: entry/tunl0`, `node: entry` or `source: {local: entry, remote: entry/tunl0}`
name addresses relative to that node, resolved per connection from where the capture first saw it.
`entries: [...]` asks that each listed node be entered at least once (more connections are sent, up to
MAX_ATTEMPTS, until each has been).

ClientIP session affinity is judged per connection too: `affinity: true|false` asks whether every connection
after the first was sent along the client's affinity state, which the rule that looks the client up says by
matching (iptables: kube-proxy's `-m recent --rcheck` in the service chain; nftables: `ip saddr @affinity-*`,
`ip6 saddr @affinity-*` in the IPv6 proxier's table),
as the renderer that writes it says (lab/render/kubeproxy/affinity.py);
`pause` spaces the connections to outwait the affinity timeout. Connections that came too far apart to show the
affinity (a machine too slow: the kernel let it expire), or whose rules went unread, are sent again once, then
skipped, not failed: the lab cannot know then.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from itertools import pairwise

from lab.describe.families import Family
from lab.describe.topology import ENTRY, Expected, ProbeSpec, Topology, entry_suffix
from lab.judge.verdict import Verdict, judge
from lab.probe.arp import answering_nodes
from lab.probe.choices import endpoint_chains, enough_attempts
from lab.probe.evidence.base import RuleHit
from lab.probe.observation import Observation
from lab.probe.session import ProbeSession
from lab.render.dataplane import affinity_lookup
from lab.render.kubeproxy.affinity import AffinityLookup

MAX_ATTEMPTS = 64
# Reaching each of N endpoints takes about N·ln N connections (a Service over 3 000 pods: 25 000, where one probe
# should take a fraction of a second); above this many the probe keeps its one connection and says so.
MAX_SPREAD = 32


def followed_affinity(observed: Observation, lookup: AffinityLookup | None) -> bool:
    """Whether the connection was sent along the client's ClientIP affinity: the lookup rule the renderer wrote
    matched it."""
    return lookup is not None and any(lookup.matches(hit.table, hit.rule) for _, hit in observed.rules)


def resolve(expected: Expected, observed: Observation, topo: Topology, family: Family = "IPv4") -> Expected | str:
    """The expectation for this one connection, or why it cannot be judged; a name relative to the entry node
    stands for its address of the probe's `family`."""
    if not expected.relative:
        return expected
    entry = observed.entry
    needs_entry = expected.node == ENTRY or any(
        entry_suffix(n) is not None for n in (expected.source, expected.source_local, expected.source_remote)
    )
    if needs_entry and not entry:
        return "no node saw the connection, so it entered through none"
    source = expected.source
    if expected.source_local is not None and expected.source_remote is not None:
        source = expected.source_local if observed.node == entry else expected.source_remote
    if entry and (suffix := entry_suffix(source)) is not None:
        source = entry + suffix
    node = entry if expected.node == ENTRY else expected.node
    source_ip = expected.source_ip
    if source is not None and source != expected.source or expected.source_local is not None:
        source_ip = topo.address_of(source or "", family) or source
    return replace(expected, node=node, source=source, source_ip=source_ip)


def _one(session: ProbeSession, probe: ProbeSpec, topo: Topology, running: Topology) -> tuple[Observation, Verdict]:
    observed = session.run(probe, running)
    concrete = resolve(probe.expected, observed, topo, probe.family)
    if isinstance(concrete, str):
        return observed, Verdict(False, (concrete,))
    return observed, judge(concrete, observed)


def _merge_rules(observations: list[Observation]) -> tuple[tuple[str, RuleHit], ...]:
    merged: dict[tuple[str, str, str, str], RuleHit] = {}
    for o in observations:
        for actor, hit in o.rules:
            key = (actor, hit.table, hit.chain, hit.rule)
            seen = merged.get(key)
            merged[key] = replace(hit, packets=seen.packets + hit.packets) if seen else hit
    return tuple((actor, hit) for (actor, *_), hit in merged.items())


def _merge_counters(observations: list[Observation]) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """The kernel counters that moved during all the connections, summed per actor."""
    merged: dict[str, dict[str, int]] = {}
    for o in observations:
        for actor, moved in o.counters:
            for name, n in moved:
                merged.setdefault(actor, {})[name] = merged.get(actor, {}).get(name, 0) + n
    return tuple((actor, tuple(moved.items())) for actor, moved in merged.items())


def _by_entry(o: Observation) -> str | None:
    if o.source and o.entry and (o.source == o.entry or o.source.startswith(f"{o.entry}/")):
        return ENTRY + o.source[len(o.entry) :]
    return o.source or o.source_ip


def _joined(values: list[str | None]) -> str | None:
    """Several connections' values as one, sorted: which connection met which backend is the kernel's random
    choice, so the order they came in would differ between two runs that saw the same."""
    seen = sorted({v for v in values if v})
    return "|".join(seen) if seen else None


def run_probe(
    session: ProbeSession, probe: ProbeSpec, topo: Topology, running: Topology | None = None
) -> tuple[Observation, Verdict]:
    """Send the probe's connection(s) to the cluster running `running` (the workload earlier steps left; `topo`'s
    when none ran) and judge each against `topo`'s expectations; several are summed up in one observation."""
    running = running or topo
    expected = probe.expected
    if probe.attempts == 1 and not expected.entries:
        first = _one(session, probe, topo, running)
        if probe.every_choice and first[0].spread > 1 and not _affinity_timeout(probe, running):
            if first[0].spread > MAX_SPREAD:
                return _one_of_many(first)
            return _every_choice(session, probe, topo, running, first)
        return first
    results = _send(session, probe, topo, running)
    reasons = _reasons(results, probe, topo, running)
    timeout = _affinity_timeout(probe, running)
    earlier: list[tuple[Observation, Verdict]] = []
    reasons_before: list[Reason] = []
    if _sent_again(reasons, probe, timeout):
        # Once more, at once, in the same lab: the client's affinity entry need not expire first, as a connection
        # that meets it follows the affinity the rules keep, which is what the probe asks.
        earlier, reasons_before = results, reasons
        results = _send(session, probe, topo, running)
        reasons = _reasons(results, probe, topo, running)
    first_round = [text for text, _ in reasons_before]
    verdict = _verdict(reasons, probe, timeout, first_round)
    lines = (
        [f"sent again, the first {len(earlier)} {_not_judged(reasons_before)}: {'; '.join(first_round)}"]
        if earlier
        else []
    )
    summary = _attempts_summary(results, topo, lines)
    # The first round's time and captures are the probe's too.
    sent = [o for o, _ in earlier]
    seconds = summary.seconds + sum(o.seconds for o in sent)
    return replace(summary, seconds=seconds, pcaps=(*(p for o in sent for p in o.pcaps), *summary.pcaps)), verdict


def _attempts_summary(results: list[tuple[Observation, Verdict]], topo: Topology, before: list[str]) -> Observation:
    """The connections as one observation: after the lines `before`, where they entered, each one's answer (✓ or ✗
    as judged alone) and the path of the first that failed (else the first's)."""
    observations = [o for o, _ in results]
    lookup = affinity_lookup(topo.cluster.proxy_mode)
    outcomes = Counter(o.outcome for o in observations)
    entries = Counter(o.entry or "?" for o in observations)
    lines = [f"{len(results)} connections, entered through " + ", ".join(f"{e} ×{n}" for e, n in entries.items())]
    for i, (o, v) in enumerate(results, 1):
        seen = f"{o.source} ({o.source_ip})" if o.source else o.source_ip or "-"
        mark = "✓" if v.ok else "✗"
        answer = f"{o.outcome} by {o.backend or '-'} on {o.node or '-'}, saw {seen}"
        answer += ", by ClientIP affinity" if followed_affinity(o, lookup) else ""
        answer += f", ARP answered by {', '.join(answering_nodes(o.arp))}" if o.arp else ""
        lines.append(f"{mark} #{i} entered {o.entry or '?'}: {answer}")
    first_bad = next((o for o, v in results if not v.ok), observations[0])
    shown = (f"(#{observations.index(first_bad) + 1}) {line}" for line in first_bad.path)
    return _summary(observations, outcomes.most_common(1)[0][0], first_bad, (*before, *lines, *shown))


# A reason the connections fail the probe, and what keeps the lab from knowing instead ("" when nothing does: the
# rules' failure): LATE, an attempt came after the client's affinity had expired, as the kernel lets it; UNREAD,
# the rules that acted on an attempt could not be read (a node's trace did not answer in time).
Reason = tuple[str, str]
LATE, UNREAD = "late", "unread"


def _not_judged(reasons: list[Reason]) -> str:
    """Why connections could not be judged, as their reasons say: too far apart, their rules unread, or both."""
    kinds = {kind for _, kind in reasons}
    said = [word for kind, word in ((LATE, "too far apart"), (UNREAD, "with their rules unread")) if kind in kinds]
    return "connections " + " or ".join(said)


def _send(
    session: ProbeSession, probe: ProbeSpec, topo: Topology, running: Topology
) -> list[tuple[Observation, Verdict]]:
    """The probe's connections, each judged: `attempts` of them, more until each of `entries` was entered (at most
    MAX_ATTEMPTS), `pause` apart."""
    results: list[tuple[Observation, Verdict]] = []
    wanted = set(probe.expected.entries)
    while len(results) < probe.attempts or (wanted - {o.entry for o, _ in results} and len(results) < MAX_ATTEMPTS):
        if results and probe.pause_ms:
            time.sleep(probe.pause_ms / 1000)
        results.append(_one(session, probe, topo, running))
    return results


def _reasons(
    results: list[tuple[Observation, Verdict]], probe: ProbeSpec, topo: Topology, running: Topology
) -> list[Reason]:
    """Why the connections together fail the probe, in the order a reader checks them: each connection's own,
    the affinity each did or did not follow, the entries never met, the backends reached."""
    expected = probe.expected
    observations = [o for o, _ in results]
    reasons: list[Reason] = [(f"attempt {i}: {r}", "") for i, (_, v) in enumerate(results, 1) for r in v.reasons]
    affinity, late = _affinity_reasons(observations, probe, topo, running)
    reasons += affinity
    if missing := sorted(set(expected.entries) - {o.entry for o in observations}):
        reasons.append((f"no connection entered through {', '.join(missing)} in {len(results)} attempts", ""))
    reached = Counter(o.backend or "-" for o in observations)
    if expected.same_backend and len(reached) > 1:
        said = ", ".join(f"{backend} ×{n}" for backend, n in sorted(reached.items()))
        reasons.append(
            (
                f"expected the same backend on every attempt, got {said}",
                LATE if _changed_only_at(observations, late) else "",
            )
        )
    return reasons


def _affinity_reasons(
    observations: list[Observation], probe: ProbeSpec, topo: Topology, running: Topology
) -> tuple[list[Reason], set[int]]:
    """The attempts that did not do as `affinity:` expects, and those of them (by number) that did not follow the
    client's affinity only because they came after it had expired."""
    expected = probe.expected
    if expected.affinity is None:
        return [], set()
    lookup = affinity_lookup(topo.cluster.proxy_mode)
    timeout = _affinity_timeout(probe, running)
    how = "followed the client's affinity" if expected.affinity else "was balanced anew (affinity expired)"
    reasons: list[Reason] = []
    late: set[int] = set()
    for i, o in enumerate(observations[1:], 2):
        if o.unread or followed_affinity(o, lookup) == expected.affinity:
            continue
        said = f"attempt {i}: expected it {how}, but it {'did not' if expected.affinity else 'followed it'}"
        gap = _gap(observations[i - 2], o)
        # A Service without affinity (timeout 0) has none to outwait: a connection there did not follow one.
        if expected.affinity and timeout and gap is not None and gap > timeout:
            late.add(i)
            said += _outwaited(o, gap, timeout)
        reasons.append((said, LATE if i in late else ""))
    # Without the rules it met, whether a connection followed the affinity is not known: it cannot pass, nor fail.
    reasons += [
        (
            f"attempt {i}: whether it {how} is not known: the rules that acted cannot be read on {'; '.join(o.unread)}",
            UNREAD,
        )
        for i, o in enumerate(observations[1:], 2)
        if o.unread
    ]
    return reasons, late


def _changed_only_at(observations: list[Observation], late: set[int]) -> bool:
    """Did every attempt that reached another backend than the one before it come after the client's affinity had
    expired (attempt numbers `late`)? Then the backends differ as the kernel lets them."""
    changed = {i for i, (a, b) in enumerate(pairwise(observations), 2) if a.backend != b.backend}
    return changed <= late


def _only_unknown(reasons: list[Reason]) -> bool:
    """Do the connections fail the probe only where the lab cannot know (too far apart to show the client's
    affinity, or the rules that acted unread)?"""
    return bool(reasons) and all(kind for _, kind in reasons)


def _sent_again(reasons: list[Reason], probe: ProbeSpec, timeout: int) -> bool:
    """Can sending the connections once more show what this round could not? Not when the probe's own pause
    outwaits the affinity: it would again."""
    late = any(kind == LATE for _, kind in reasons)
    return _only_unknown(reasons) and not (late and _pause_outwaits(probe, timeout))


def _pause_outwaits(probe: ProbeSpec, timeout: int) -> bool:
    """Does the probe's own `pause` between attempts outlast the affinity (then sending again cannot show it)?"""
    return probe.pause_ms >= timeout * 1000


def _verdict(reasons: list[Reason], probe: ProbeSpec, timeout: int, first_round: list[str]) -> Verdict:
    """Pass, fail, or skipped when the only failures are where the lab cannot know (in this round and, sent again,
    the first: `first_round`): connections too far apart to show the client's affinity, or whose rules went unread;
    whether the rules keep the affinity is not known then."""
    if not _only_unknown(reasons):
        return Verdict(not reasons, tuple(text for text, _ in reasons))
    said = "; ".join(text for text, _ in reasons)
    said = f"{'; '.join(first_round)}; sent again: {said}" if first_round else said
    kinds = {kind for _, kind in reasons}
    whys = []
    if LATE in kinds and _pause_outwaits(probe, timeout):
        whys.append(
            f"the probe's pause ({probe.pause_ms} ms) is not shorter than the Service's {timeout} s affinity timeout "
            "(give it a shorter pause)"
        )
    elif LATE in kinds:
        whys.append(
            f"this machine was too slow to send the connections within the Service's {timeout} s affinity timeout "
            "(run it again on a less busy machine, or give the Service a longer timeout)"
        )
    if UNREAD in kinds:
        whys.append("the rules that acted could not be read (run it again on a less busy machine)")
    why = "; ".join(whys)
    return Verdict(
        False, skipped=f"whether the connections follow the client's affinity cannot be known: {said}: {why}"
    )


def _summary(observations: list[Observation], outcome: str, shown: Observation, path: tuple[str, ...]) -> Observation:
    """Several connections as one observation: `shown` the one whose path, hops and why it gives, `path` the
    lines before and with them."""
    return Observation(
        outcome=outcome,
        backend=_joined([o.backend for o in observations]),
        node=_joined([o.node for o in observations]),
        source_ip=_joined([o.source_ip for o in observations]),
        source=_joined([o.source for o in observations]),
        error=shown.error,
        path=path,
        hops=shown.hops,
        connections=tuple(o.hops for o in observations),
        counters=_merge_counters(observations),
        rules=_merge_rules(observations),
        unread=tuple(dict.fromkeys(u for o in observations for u in o.unread)),
        explanation=shown.explanation,
        diagnosis=shown.diagnosis,
        seconds=sum(o.seconds for o in observations),
        pcaps=tuple(p for o in observations for p in o.pcaps),
        entry=_joined([o.entry for o in observations]),
        source_by_entry=_joined([_by_entry(o) for o in observations]),
        arp=tuple(a for o in observations for a in o.arp),
    )


def _affinity_timeout(probe: ProbeSpec, topo: Topology) -> int:
    """The ClientIP affinity timeout (seconds) of the Service port the probe goes to; 0: none. With one, every
    connection from the client goes where its first went: the set the draw can give this client is that one
    endpoint."""
    for svc in topo.services:
        frontends = {*svc.cluster_ips, *svc.external_ips, *svc.ingress_ips}
        for port in svc.ports:
            at_frontend = probe.dst_ip in frontends and port.port == probe.dst_port
            if svc.affinity_timeout and (at_frontend or port.node_port == probe.dst_port):
                return svc.affinity_timeout
    return 0


def _gap(before: Observation, after: Observation) -> float | None:
    """Seconds between two connections entering their nodes, read from the captures' times; None: not seen."""
    if before.entered_at is None or after.entered_at is None:
        return None
    return after.entered_at - before.entered_at


def _outwaited(after: Observation, gap: float, timeout: int) -> str:
    """Why a connection that did not follow the client's affinity could not have: it entered its node longer after
    the one before than the affinity lasts (each new connection through the endpoint renews the client's entry:
    kube-proxy writes `-m recent --name KUBE-SEP-* --set` in the endpoint's chain, kubernetes/kubernetes
    pkg/proxy/iptables/proxier.go at 092dddd12ca4cc5e66597de66a81fc77fdd3f29b and since, and `update @affinity-*
    { ip saddr }` in nftables mode, pkg/proxy/nftables/proxier.go at 01d7de5464ba38091b53e0a4d5077ddde9553c08)."""
    return (
        f": it entered {after.entry} {gap:.2f} s after the attempt before it (the captures' times), longer than the "
        f"Service's {timeout} s affinity timeout, so the client's affinity had expired, as the kernel lets it"
    )


def _choice(o: Observation) -> str:
    """Which endpoint the connection's draw gave: the backend that answered, else the endpoint chains its rules
    passed through, else (no trace of the choice) its outcome."""
    return o.backend or "|".join(endpoint_chains(hit for _, hit in o.rules)) or o.outcome


def _every_choice(
    session: ProbeSession,
    probe: ProbeSpec,
    topo: Topology,
    running: Topology,
    first: tuple[Observation, Verdict],
) -> tuple[Observation, Verdict]:
    """More connections until every endpoint the load balancing chose among has been drawn (at most
    enough_attempts), judged as the set they reached: one member per endpoint, each judged as a connection is,
    the probe passing when every member does. Members, reasons and the summary come in the members' order, not
    the draw's, so two runs that reached the same set say the same."""
    results = [first]
    while len(results) < enough_attempts(spread := max(o.spread for o, _ in results)):
        if len({_choice(o) for o, _ in results}) >= spread:
            break
        results.append(_one(session, probe, topo, running))
    by_choice: dict[str, list[tuple[Observation, Verdict]]] = {}
    for result in results:
        by_choice.setdefault(_choice(result[0]), []).append(result)
    # Endpoints that answered first, by name; then the others, by the chains that chose them.
    groups = [by_choice[key] for key in sorted(by_choice, key=lambda k: (not by_choice[k][0][0].backend, k))]
    members = [next((r for r in group if not r[1].ok), group[0]) for group in groups]
    several = len(members) > 1
    reasons = [f"{_label(o) + ': ' if several else ''}{r}" for o, v in members for r in v.reasons]
    outcomes = sorted({o.outcome for o, _ in members})
    shown = next((o for o, v in members if not v.ok), members[0][0])
    spread = max(o.spread for o, _ in results)
    lines = [f"{len(results)} connections reached {len(members)} of the {spread} endpoints the draw chose among"]
    lines += [f"{'✓' if v.ok else '✗'} {_label(o)}: {_member_line(o)}" for o, v in members]
    observations = [o for group in groups for o, _ in group]
    summary = _summary(observations, "|".join(outcomes), shown, (*lines, *shown.path))
    return replace(summary, members=tuple(o for o, _ in members), spread=spread), Verdict(not reasons, tuple(reasons))


def _one_of_many(first: tuple[Observation, Verdict]) -> tuple[Observation, Verdict]:
    """A draw among more endpoints than the lab reaches one by one: the one connection, said as one draw of many,
    so a verdict another run might not repeat is not taken for the set's."""
    observed, verdict = first
    line = (
        f"one connection: the draw chose among {observed.spread} endpoints, more than the {MAX_SPREAD} a probe "
        "reaches one by one; another run may draw another (attempts: N sends N)"
    )
    return replace(observed, path=(line, *observed.path)), verdict


def _label(o: Observation) -> str:
    return f"by {o.backend}" if o.backend else _choice(o)


def _member_line(o: Observation) -> str:
    seen = f"{o.source} ({o.source_ip})" if o.source else o.source_ip or "-"
    return f"{o.outcome} on {o.node or '-'}, saw {seen}" if o.backend else o.outcome
