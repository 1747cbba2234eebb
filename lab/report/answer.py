"""The one-line answer to the question a probe asks (its `question:`), built from what the probe observed and its
translation chain (lab/probe/diagnosis.py), never from the scenario's words: if the kernel did otherwise, the
answer says otherwise.

- `source`: which address the backend saw, and which node and setting rewrote it (or that none did);
- `fate`: what became of the connection and what decided it: the rule that dropped it, what the client was
  told, and the choices and rewrites on the way."""

from __future__ import annotations

from lab.judge.results import ProbeResult
from lab.probe.diagnosis import DNAT, IPVS, MASQUERADE, Diagnosis, rule_place
from lab.probe.observation import Observation
from lab.probe.why import dropping_rule

SOURCE, FATE = "source", "fate"


def answer(result: ProbeResult) -> str:
    """The answer to the probe's question ("" when it asks none)."""
    question = result.probe.question
    if question == SOURCE and result.observed.outcome == "delivered":
        return source_answer(result)
    if question in (SOURCE, FATE):
        return fate_answer(result.observed)
    return ""


def source_answer(result: ProbeResult) -> str:
    """Each source the backends saw, which backends saw it, and why: "openresty saw node2 (192.168.56.12):
    masqueraded on node2: externalTrafficPolicy Cluster"."""
    seen = result.observed.members or (result.observed,)
    groups: dict[tuple[str | None, str | None], list[Observation]] = {}
    for member in seen:
        groups.setdefault((member.source, member.source_ip), []).append(member)
    return "; ".join(_saw(members, result.probe.source) for members in groups.values())


def _saw(members: list[Observation], client: str) -> str:
    first = members[0]
    who = ", ".join(dict.fromkeys(m.backend or "the backend" for m in members))
    if first.source_by_entry and "|" in (first.source or ""):
        # Several connections through several entry nodes (`attempts`): what each saw, named from its entry; the
        # chain is the one connection's the observation shows.
        seen = f"{first.source_by_entry} ({first.source.replace('|', ', ')})"
        return f"{who} saw {seen}; the connection shown: {_rewritten(first, client)}"
    address = f"{first.source} ({first.source_ip})" if first.source else (first.source_ip or "no address")
    return f"{who} saw {address}: {_rewritten(first, client)}"


def _rewritten(o: Observation, client: str) -> str:
    """Why the source is what it is: the steps that rewrote it, or that none did."""
    if said := o.diagnosis.summary():
        return said
    if o.source == client:
        return "the client's own address, no step on the way rewrote it"
    return "no rule the lab read rewrote it on the way"


def fate_answer(o: Observation) -> str:
    """What became of the connection and what decided it, then the choices and rewrites on the way."""
    return "; ".join(filter(None, (_outcome(o), _decisions(o.diagnosis))))


def _outcome(o: Observation) -> str:
    if o.outcome == "delivered":
        seen = o.members or (o,)
        backends = ", ".join(dict.fromkeys(m.backend or "a backend" for m in seen))
        nodes = ", ".join(dict.fromkeys(m.node for m in seen if m.node))
        return f"delivered by {backends}" + (f" on {nodes}" if nodes else "")
    if found := dropping_rule(o.rules):
        node, hit = found
        verb = "rejected" if hit.verdict == "REJECT" else "dropped"
        place = rule_place(hit)
        # A rule without a comment (nftables' verdict maps) is said whole: its map's name says what it checks.
        said = f"{verb} on {node} by {place}" + (f": {hit.rule}" if place == f"{hit.table} {hit.chain}" else "")
        return said if o.outcome == "dropped" else f"{o.outcome}: {said}"
    why = o.explanation.splitlines()[0] if o.explanation else "no rule the lab read and no capture says why"
    return f"{o.outcome}: {why}"


def _decisions(diagnosis: Diagnosis) -> str:
    """The steps that chose the endpoint or rewrote the source, in path order, each with its node and the setting
    behind it."""
    steps = [s for s in diagnosis.steps if s.kind in (DNAT, IPVS) or (s.kind == MASQUERADE and s.rewrote_source)]
    return "; ".join(f"{s.node}: {s.said}" + (f" [{s.setting}]" if s.setting else "") for s in steps)
