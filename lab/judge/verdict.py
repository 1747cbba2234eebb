"""judge: expected vs observed, with the reasons a probe failed."""

from __future__ import annotations

from dataclasses import dataclass

from lab.describe.topology import Expected
from lab.probe.observation import Observation


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reasons: tuple[str, ...] = ()
    # Why the lab cannot know the answer on this machine, though the probe ran (an affinity probe whose connections
    # were too slow to show it, lab/judge/attempts.py): neither passed nor failed, skipped as a variant this machine
    # cannot run is; "" for a probe judged.
    skipped: str = ""

    @property
    def failed(self) -> bool:
        return not self.ok and not self.skipped


def judge(expected: Expected, observed: Observation) -> Verdict:
    reasons = []
    if observed.outcome not in expected.outcomes:
        on = f" on kernel {expected.kernel}" if expected.kernel else ""
        reasons.append(f"expected {' or '.join(expected.outcomes)}{on}, got {observed.outcome}")
    elif expected.outcome == "delivered":
        if expected.backends and observed.backend not in expected.backends:
            reasons.append(f"expected backend {' or '.join(expected.backends)}, answered by {observed.backend}")
        if expected.node and observed.node != expected.node:
            reasons.append(f"expected a backend on {expected.node}, answered on {observed.node}")
        if expected.source_ip and observed.source_ip != expected.source_ip:
            seen = f"{observed.source} ({observed.source_ip})" if observed.source else observed.source_ip
            reasons.append(f"expected source {expected.source} ({expected.source_ip}), backend saw {seen}")
    return Verdict(not reasons, tuple(reasons))
