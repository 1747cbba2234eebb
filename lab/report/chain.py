"""A probe's translation chain (lab/probe/diagnosis.py) as the reports show it: a line per step for `-v`, a record
per step for `--json` and the HTML report, and one line for the run table where the source was rewritten or is not
the one expected."""

from __future__ import annotations

from typing import Any

from lab.judge.results import ProbeResult
from lab.probe.diagnosis import Diagnosis, Step


def step_lines(diagnosis: Diagnosis) -> list[str]:
    """`-v`: one line per step, in path order."""
    return [f"step  {step.line()}" for step in diagnosis.steps]


def step_record(step: Step) -> dict[str, Any]:
    """`--json`: a step, with the setting behind its deciding rule (null: none the lab knows)."""
    setting = step.setting
    return {
        "step": step.kind,
        "node": step.node,
        "where": step.where,
        "said": step.said,
        "rule": step.rule or None,
        "setting": None
        if setting is None
        else {"name": setting.name, "value": setting.value, "owner": setting.owner, "meaning": setting.meaning},
        "evidence": step.evidence,
    }


def chain_records(diagnosis: Diagnosis) -> list[dict[str, Any]]:
    return [step_record(step) for step in diagnosis.steps]


def source_summary(result: ProbeResult) -> str:
    """The run table's line under the observation: where and why the source was rewritten; for a source other than
    the one expected that no step rewrote, that no rule the lab read rewrote it ("" otherwise)."""
    observed, expected = result.observed, result.probe.expected
    if said := observed.diagnosis.summary():
        return said
    if expected.source_ip and observed.source_ip and observed.source_ip != expected.source_ip:
        return "no rule the lab read rewrote the source on the way"
    return ""
