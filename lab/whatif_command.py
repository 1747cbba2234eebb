"""`lab run FILE --what-if PROBE`: for each variant selected that has the probe, the what-if (lab/api/whatif.py)
printed as lines, or as one JSON list."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rich.console import Console

from lab.api.whatif import what_if
from lab.describe.topology import Topology
from lab.realize.terminate import stop_if_terminated
from lab.report.literal import literal
from lab.report.whatif import what_if_lines, what_if_record


def run_what_if(
    variants: list[Topology], probe: str, timeout: float, as_json: bool, out: Console, say: Callable[[str], None]
) -> int:
    """The what-if of `probe` in every variant of `variants` that has it; `say` tells the user what runs and what
    could not. Exit status 0 once every variant that could run was tried, 2 when none had the probe or could run."""
    records: list[dict[str, Any]] = []
    ran = False
    for topo in (t for t in variants if any(p.name == probe for p in t.probes)):
        found = what_if(topo, probe, timeout, lambda what: say(f"running {what}"))
        stop_if_terminated()
        if isinstance(found, str):
            say(found)
            continue
        ran = True
        if as_json:
            records.append(what_if_record(found))
        else:
            for line in what_if_lines(found):
                out.print(literal(line), highlight=False)
    if as_json:
        print(json.dumps(records, indent=2))
    return 0 if ran else 2
