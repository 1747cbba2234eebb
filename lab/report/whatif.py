"""`lab run --what-if PROBE` shown: the probe as the file has it and the settings its chain named, then each change
tried with what it did to this probe and to the others (one line each), and what was not tried; or as JSON."""

from __future__ import annotations

from typing import Any

from lab.judge.results import ProbeResult
from lab.judge.whatif import Difference, Tried, WhatIf, differences
from lab.report.records import observed_text


def what_if_lines(what: WhatIf) -> list[str]:
    target = what.target
    topo = target.topology
    lines = [f"what-if {what.probe} ({topo.scenario}, {topo.variant_label}): {observed_text(target)}"]
    named = "; ".join(f"{s} ({s.owner})" for s in what.settings) or "none (no step of its chain names a setting)"
    lines.append(f"  settings behind its chain: {named}")
    for tried in what.tried:
        lines += _tried_lines(what, tried)
    lines += [f"  not tried: {why}" for why in what.untried]
    return lines


def _tried_lines(what: WhatIf, tried: Tried) -> list[str]:
    head = f"  {tried.change} ({tried.built})"
    if tried.skipped:
        return [f"{head}: not run here: {tried.skipped}"]
    found = differences(what.baseline, tried)
    own = next((d for d in found if d.before.probe.name == what.probe), None)
    others = [f"    {_difference(d)}" for d in found if d is not own]
    return [f"{head}: {_verdict(own)}", *(others or ["    the other probes: unchanged"])]


def _verdict(own: Difference | None) -> str:
    if own is None:
        return "this probe unchanged"
    flips = "keeps the sender's address" if own.kept else f"flips the {own.what}"
    return f"{flips}: {observed_text(own.before)} → {_after(own.after)}"


def _after(result: ProbeResult) -> str:
    """What a probe observed under the change, with its why when it was not delivered (the rule that dropped it)."""
    said = observed_text(result)
    why = result.observed.explanation
    return f"{said} ({why})" if why and result.observed.outcome != "delivered" else said


def _difference(d: Difference) -> str:
    said = "keeps the sender's address" if d.kept else f"{d.what} changes"
    return f"{d.before.probe.name}: {said}: {observed_text(d.before)} → {_after(d.after)}"


def what_if_record(what: WhatIf) -> dict[str, Any]:
    """The what-if as `--json` prints it."""
    target = what.target
    return {
        "probe": what.probe,
        "scenario": target.topology.scenario,
        "variant": dict(target.topology.variant),
        "observed": observed_text(target),
        "settings": [_setting(s) for s in what.settings],
        "changes": [_tried_record(what, t) for t in what.tried],
        "untried": list(what.untried),
    }


def _setting(setting: Any) -> dict[str, str]:
    return {"name": setting.name, "value": setting.value, "owner": setting.owner, "meaning": setting.meaning}


def _tried_record(what: WhatIf, tried: Tried) -> dict[str, Any]:
    change = tried.change
    found = differences(what.baseline, tried)
    own = next((d for d in found if d.before.probe.name == what.probe), None)
    return {
        "change": str(change),
        "name": change.name,
        "value": change.value,
        "how": change.how,
        "service": f"{change.service.namespace}/{change.service.name}" if change.service else None,
        "setting": _setting(change.setting),
        "ran": tried.built,
        "skipped": tried.skipped or None,
        "flips": None if own is None else own.what,
        "keeps_sender": bool(own and own.kept),
        "observed": observed_text(own.after) if own else _own_text(what, tried),
        "why": own.after.observed.explanation if own else None,
        "elsewhere": [_difference_record(d) for d in found if d is not own],
    }


def _own_text(what: WhatIf, tried: Tried) -> str | None:
    result: ProbeResult | None = next((r for r in tried.results if r.probe.name == what.probe), None)
    return observed_text(result) if result else None


def _difference_record(d: Difference) -> dict[str, Any]:
    return {
        "probe": d.before.probe.name,
        "what": d.what,
        "keeps_sender": d.kept,
        "before": observed_text(d.before),
        "after": observed_text(d.after),
        "why": d.after.observed.explanation,
    }
