"""What the API's callers give, made into what a scenario file would say (pure): a variant as the matrix
`--variant` would pick, a probe or step as an entry of `probes:`, so that describe checks and resolves them with
its own words; and describe's errors about them said as the caller wrote them, not as `probes[1]` of a file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lab.api.arguments import AXIS_VALUE, RESULT, VARIANT, LabError, checked
from lab.describe.errors import ScenarioError, ScenarioErrors
from lab.describe.topology import Axis
from lab.judge.results import ProbeResult
from lab.report.records import to_record

# The probe that carries the steps done so far through describe: it is resolved, never run.
HISTORY = "api-steps-so-far"
STEP = "api-step"


def variant_matrix(variant: object) -> dict[str, list[Axis]]:
    """{"proxyMode": "nftables"} as `--matrix proxyMode=nftables`: one value per axis, checked by describe (an
    unknown axis or value is refused there). Booleans and numbers as the command line spells them."""
    if variant is None:
        return {}
    matrix: dict[str, list[Axis]] = {}
    for axis, value in checked("variant", variant, VARIANT).items():
        checked(f"variant {axis}", value, AXIS_VALUE)
        matrix[axis] = [("true" if value else "false") if isinstance(value, bool) else str(value)]
    return matrix


_KEYWORDS = {"from_": "from", "source": "from"}  # `from` is a Python keyword: probe(from_="client", ...)


def probe_entry(probe: Mapping[str, Any] | None, fields: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A probe as written in `probes:`: the mapping given, then keyword fields over it; named `name` unless it
    has a name; expecting delivery unless it says (as `lab probe --from --to` does)."""
    entry: dict[str, Any] = dict(probe or {})
    for key, value in fields.items():
        entry[_KEYWORDS.get(key, key)] = value
    entry.setdefault("name", name)
    entry.setdefault("expect", {"outcome": "delivered"})
    return entry


def step_carrier(name: str, steps: Sequence[Mapping[str, Any]], actor: str) -> dict[str, Any]:
    """A probe that is never run, only there to carry `steps` through describe: from the first node to its own
    address (any node's port is a valid destination)."""
    return {
        "name": name,
        "before": [dict(step) for step in steps],
        "from": actor,
        "to": {"node": actor, "port": 1},
        "expect": {"outcome": "delivered"},
    }


def in_words(exc: ScenarioError, index: int, what: str) -> LabError:
    """describe's errors about the API's entry at `probes[index]` with the field as the caller wrote it (`step:
    before[0].replicas: ...` reads `step: replicas: ...`); errors about the file itself as they are."""
    errors = exc.errors if isinstance(exc, ScenarioErrors) else [exc]
    prefix = f"probes[{index}]"
    said = []
    for error in errors:
        if error.field != prefix and not error.field.startswith((f"{prefix}.", f"{prefix}[")):
            said.append(str(error))
            continue
        field = error.field.removeprefix(prefix).removeprefix(".")
        if what == "step":
            field = field.removeprefix("before[0]").removeprefix(".")
        said.append(f"{what}: {field}: {error.message}" if field else f"{what}: {error.message}")
    return LabError("\n".join(said))


def load_error(exc: ScenarioError) -> LabError:
    """describe's errors about the file and the variant; a refused axis or value is named as the caller gave it
    (`variant proxyMode=userspace: ...`), not as the command line's `--matrix` flag that describe knows."""
    errors = exc.errors if isinstance(exc, ScenarioErrors) else [exc]
    said = []
    for error in errors:
        if error.file.startswith("--matrix ") and not error.line:
            said.append(f"variant {error.file.removeprefix('--matrix ')}: {error.message}")
        else:
            said.append(str(error))
    return LabError("\n".join(said))


def to_json(result: ProbeResult) -> dict[str, Any]:
    """A probe's result as `lab run --json` prints it (one entry of its "results")."""
    return to_record(checked("result", result, RESULT))
