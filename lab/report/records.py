"""Results as plain data: the `--json` document and what the terminal table shows."""

from __future__ import annotations

from typing import Any

from lab.describe.topology import Expected, ProbeSpec, Topology
from lab.judge.results import ProbeResult, VariantRun
from lab.probe.arp import answer_text, entry_warning
from lab.probe.evidence.snmp import counted
from lab.probe.observation import Observation
from lab.report.answer import answer
from lab.report.chain import chain_records, step_lines
from lab.report.sliced import sliced_records


def expected_text(result: ProbeResult) -> str:
    return expectation_text(result.probe.expected)


def expectation_text(e: Expected) -> str:
    """What a probe expects, in the words of the tables ("delivered by web from node2")."""
    if e.observe:
        return "anything (observe)"
    parts = [" or ".join(e.outcomes)]
    if e.backends:
        parts.append("by " + "|".join(e.backends))
    if e.node:
        parts.append(f"on {e.node}")
    if e.source:
        parts.append(f"from {e.source}")
    if e.same_backend:
        parts.append("(one backend)")
    if e.affinity is not None:
        parts.append("(by affinity)" if e.affinity else "(affinity expired)")
    if e.kernel:
        parts.append(f"(on kernel {e.kernel})")
    return " ".join(parts)


def observed_text(result: ProbeResult) -> str:
    o = result.observed
    text = members_text(o.members) if o.members else one_text(o)
    # Where several nodes answered the client's ARP, the node entered is this run's: the result says so.
    warning = entry_warning(o.arp, o.entry)
    return f"{text}; {warning}" if warning else text


def one_text(o: Observation) -> str:
    parts = [o.outcome]
    if o.backend:
        parts.append(f"by {o.backend}")
    if o.source_ip:
        parts.append(f"from {o.source} ({o.source_ip})" if o.source else f"from {o.source_ip}")
    return " ".join(parts)


def members_text(members: tuple[Observation, ...]) -> str:
    """What each endpoint a probe reached saw (lab/judge/attempts.py), its outcome said once when all share it:
    "delivered by web-a from node1 (10.0.0.1), by web-b from node1/cni0 (10.244.1.1)"."""
    texts = [one_text(m) for m in members]
    outcome = members[0].outcome
    if any(m.outcome != outcome for m in members):
        return ", ".join(texts)
    return f"{outcome} " + ", ".join(text.removeprefix(outcome).lstrip() for text in texts)


def _probe_fields(topology: Topology, probe: ProbeSpec) -> dict[str, Any]:
    """What every record says of its probe, run or skipped."""
    e = probe.expected
    return {
        "scenario": topology.scenario,
        "file": topology.file,
        "variant": dict(topology.variant),
        "kernel": topology.kernel or None,
        # iptablesBackend wrapper: the backend kube-proxy's image's iptables-wrapper chose, and why.
        "iptables_wrapper": topology.cluster.iptables_backend_why or None,
        "probe": probe.name,
        "from": probe.source,
        "to": {"target": probe.target, "address": probe.destination, "protocol": probe.protocol},
        "before": [str(step) for step in probe.before],
        "question": probe.question or None,
        "expected": {
            "outcome": e.outcome,
            "or": list(e.also),
            "kernel": e.kernel or None,
            "backend": list(e.backends) or None,
            "node": e.node,
            "source": e.source,
            "source_ip": e.source_ip,
            "same_backend": e.same_backend,
            "affinity": e.affinity,
            "observe": e.observe,
        },
    }


def to_record(result: ProbeResult) -> dict[str, Any]:
    o = result.observed
    return _probe_fields(result.topology, result.probe) | {
        "kube_proxy": [line for done in result.steps for line in done.said],
        # A probe that ran but whose answer the lab cannot know here is skipped as a variant is: `ok` null.
        "ok": None if result.verdict.skipped else result.verdict.ok,
        "skipped": result.verdict.skipped or None,
        "reasons": list(result.verdict.reasons),
        "observed": {
            "outcome": o.outcome,
            "backend": o.backend,
            "node": o.node,
            "source": o.source,
            "source_ip": o.source_ip,
            "source_by_entry": o.source_by_entry,
            # A probe that reached every endpoint the draw can give: what each saw (judge/attempts.py).
            "members": [_member_record(m) for m in o.members],
            "entry": o.entry,
            "arp": [{"address": a.address, "mac": a.mac, "node": a.node} for a in o.arp],
            "error": o.error or None,
            "explanation": o.explanation or None,
            "diagnosis": chain_records(o.diagnosis),
            # The probe's question answered in one line (lab/report/answer.py); null: it asks none.
            "answer": answer(result) or None,
            "path": list(o.path),
            "rules": [
                {"node": node, "table": h.table, "chain": h.chain, "rule": h.rule, "packets": h.packets}
                for node, h in o.rules
            ],
            "rules_unread": list(o.unread),
            "flow": list(o.flow),
            "conntrack": list(o.conntrack),
            "counters": {actor: dict(moved) for actor, moved in o.counters},
            "pcaps": list(o.pcaps),
            "seconds": round(o.seconds, 4),
        },
    }


def _member_record(m: Observation) -> dict[str, Any]:
    return {"outcome": m.outcome, "backend": m.backend, "node": m.node, "source": m.source, "source_ip": m.source_ip}


# A skipped probe observed nothing: its record has every key a run probe's has, empty (a reader indexes them alike).
_NOTHING_OBSERVED: dict[str, Any] = {
    "outcome": None,
    "backend": None,
    "node": None,
    "source": None,
    "source_ip": None,
    "source_by_entry": None,
    "members": [],
    "entry": None,
    "arp": [],
    "error": None,
    "explanation": None,
    "diagnosis": [],
    "answer": None,
    "path": [],
    "rules": [],
    "rules_unread": [],
    "flow": [],
    "conntrack": [],
    "counters": {},
    "pcaps": [],
    "seconds": 0.0,
}


def skipped_records(run: VariantRun) -> list[dict[str, Any]]:
    """The records of a variant this machine could not run: `ok` null, `skipped` saying why."""
    if not run.skipped:
        return []
    return [
        _probe_fields(run.topology, probe)
        | {
            "iptables_wrapper": None,  # no kube-proxy started, so no wrapper chose
            "kube_proxy": [],
            "ok": None,
            "skipped": run.skipped,
            "reasons": [],
            "observed": dict(_NOTHING_OBSERVED),
        }
        for probe in run.topology.probes
    ]


def summary(runs: list[VariantRun], results: list[ProbeResult] | None = None) -> dict[str, Any]:
    """Counts of passed, failed and skipped probes (of variants this machine could not run, and probes whose answer
    it could not know); `results` when they are more than the runs hold (cut short)."""
    results = [r for run in runs for r in run.results] if results is None else results
    passed = sum(r.verdict.ok for r in results)
    failed = sum(r.verdict.failed for r in results)
    skipped = len(results) - passed - failed + sum(run.skipped_probes for run in runs)
    return {"passed": passed, "failed": failed, "skipped": skipped}


def evidence_lines(result: ProbeResult) -> list[str]:
    """What a failing (or verbose) probe prints: the reasons, then why, the path and the rules hit."""
    r, o = result, result.observed
    lines = [f"✗ {reason}" for reason in r.verdict.reasons]
    if r.verdict.skipped:
        lines.append(f"skipped: {r.verdict.skipped}")
    if o.explanation:
        lines.append(f"why: {o.explanation}")
    lines += step_lines(o.diagnosis)
    if r.probe.why:
        lines.append(f"scenario says: {r.probe.why}")
    for k, step in enumerate(r.probe.before):
        lines.append(f"before {step}")
        lines += [f"  kube-proxy {line}" for line in (r.steps[k].said if k < len(r.steps) else ())]
    lines += [f"arp   {answer_text(answer)}" for answer in o.arp]
    if warning := entry_warning(o.arp, o.entry):
        lines.append(f"arp   {warning}")
    lines += [f"seen  {line}" for line in o.path]
    lines += [f"flow  {line}" for line in o.flow]
    lines += [f"ct    {line}" for line in o.conntrack]
    lines += [f"count {actor}: {counted(dict(moved))}" for actor, moved in o.counters]
    lines += [f"rule  {node}: {hit} ({hit.packets} pkt)" for node, hit in o.rules]
    lines += [f"pcap  {path}" for path in o.pcaps]
    return lines


def headline(result: ProbeResult) -> str:
    p = result.probe
    return f"{p.name} [{result.topology.variant_label}] {p.source} → {p.target} ({p.destination}/{p.protocol})"


def json_document(results: list[ProbeResult], runs: list[VariantRun], interrupted: bool) -> dict[str, Any]:
    """`--json`: every probe that finished (also of a variant cut short), then the variants this machine skipped.

    An interrupted run says so in its summary, so a reader does not take the missing probes for passes. A sliced
    variant's built nodes and stand-ins are under `sliced` (absent when no variant was sliced).
    """
    records = [*map(to_record, results), *(rec for run in runs for rec in skipped_records(run))]
    totals = summary(runs, results)
    if interrupted:
        totals["interrupted"] = True
    document: dict[str, Any] = {"results": records, "summary": totals}
    if sliced := sliced_records(results, runs):
        document["sliced"] = sliced
    return document
