"""The file without the probes the schema refused: what the resolve steps can still check in one pass, so that
`lab validate` says what else is wrong (a probe's unknown Service, a step's unknown pod) with the schema's errors.

Only probes are left out: the cluster, nodes and workload are what every probe is checked against, so an error
there leaves nothing to check. A flow check of a left-out probe is left out too (it would only say that the
probe is missing). Errors are named by the probes' places in the file as written."""

from __future__ import annotations

from lab.describe.errors import ScenarioError
from lab.describe.yamlsrc import FieldPath, Source, format_path


def probes_refused(errors: list[ScenarioError], source: Source) -> set[int] | None:
    """The probes the errors are about (by index), or None when one is about something else."""
    probes = source.data.get("probes")
    paths = {format_path(("probes", i)): i for i in range(len(probes))} if isinstance(probes, list) else {}
    found = set()
    for error in errors:
        index = next((i for text, i in paths.items() if error.field.startswith((f"{text}.", f"{text}["))), None)
        if index is None and error.field not in paths:
            return None
        found.add(paths.get(error.field, index))  # type: ignore[arg-type]  # one of the two is an index
    return found


def without_probes(source: Source, refused: set[int]) -> tuple[Source, dict[int, int]] | None:
    """The file without the refused probes and the flow checks of their flows, and where each probe left was
    (its index in the file by its index here); None when no probe is left."""
    probes = source.data["probes"]
    names = set()
    for i, probe in enumerate(probes):
        if i in refused or (isinstance(probe, dict) and probe.get("flow") in names):
            refused = refused | {i}
            names.add(probe.get("name") if isinstance(probe, dict) else None)
    kept = [i for i in range(len(probes)) if i not in refused]
    if not kept:
        return None
    lines: dict[FieldPath, int] = {}
    for path, line in source.lines.items():
        if path[:1] == ("probes",) and len(path) > 1:
            if path[1] in refused:
                continue
            path = ("probes", kept.index(int(path[1])), *path[2:])
        lines[path] = line
    data = {**source.data, "probes": [probes[i] for i in kept]}
    return Source(source.file, data, lines), dict(enumerate(kept))


def as_written(error: ScenarioError, places: dict[int, int]) -> ScenarioError:
    """An error about the file without some probes, named by the probe's place in the file."""
    for here, there in places.items():
        before = format_path(("probes", here))
        if error.field == before or error.field.startswith((f"{before}.", f"{before}[")):
            field = format_path(("probes", there)) + error.field[len(before) :]
            return ScenarioError(error.file, error.line, field, error.message)
    return error
