"""One table per scenario with a column per value of one matrix axis (e.g. proxyMode): where do they differ?"""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from rich.text import Text

from lab.describe.topology import axis_text
from lab.judge.results import ProbeResult, VariantRun
from lab.probe.arp import entry_warning
from lab.report.literal import literal, visible


@dataclass(frozen=True)
class Cell:
    text: str  # what the table shows
    compared: str = ""  # what is compared across the columns ("" for a probe that did not run)
    result: ProbeResult | None = None  # the probe's, when it ran (the HTML report links it)


def _cell(result: ProbeResult | None, skipped: str) -> Cell:
    """One probe in one variant."""
    if result is None:
        return Cell("skipped" if skipped else "—")
    o = result.observed
    # The backend where the scenario names one (which pod a flow reaches); otherwise it is the kernel's random
    # pick, and would make modes differ that do not.
    by = f" by {o.backend}" if o.backend and result.probe.expected.backends else ""
    seen = f" from {o.source_by_entry or o.source or o.source_ip}" if o.source_ip else ""
    # Where several nodes answered the client's ARP, the node entered is this run's: the cell says so.
    warning = entry_warning(o.arp, o.entry)
    seen += f" ({warning})" if warning else ""
    mark = "PASS" if result.verdict.ok else "SKIP" if result.verdict.skipped else "FAIL"
    return Cell(f"{o.outcome}{by}{seen} {mark}", f"{o.outcome}{by}{seen}", result)


def compare_grid(runs: list[VariantRun], axis: str) -> tuple[list[str], list[tuple[str, str, list[Cell], bool]]]:
    """Header and rows: the other axes, the probe, one cell per value of `axis`, and whether the cells differ."""
    values: list[str] = []
    rows: dict[tuple[str, str], dict[str, Cell]] = {}
    for run in runs:
        variant = dict(run.topology.variant)
        value = axis_text(variant.pop(axis, ""))
        if value not in values:
            values.append(value)
        rest = ", ".join(f"{k}={axis_text(v)}" for k, v in variant.items()) or "—"
        by_probe = {r.probe.name: r for r in run.results}
        for probe in run.topology.probes:
            rows.setdefault((rest, probe.name), {})[value] = _cell(by_probe.get(probe.name), run.skipped)
    body = []
    for (rest, probe), cells in rows.items():
        compared = {cells[v].compared for v in values if v in cells and cells[v].compared}
        body.append((rest, probe, [cells.get(v, Cell("—")) for v in values], len(compared) > 1))
    return ["variant", "probe", *values, "differs"], body


def compare_rows(runs: list[VariantRun], axis: str) -> tuple[list[str], list[list[str]]]:
    """compare_grid as text: the differing rows marked ≠."""
    header, grid = compare_grid(runs, axis)
    return header, [
        [rest, probe, *(c.text for c in cells), "≠" if differs else ""] for rest, probe, cells, differs in grid
    ]


def compare_table(name: str, runs: list[VariantRun], axis: str) -> Table:
    header, body = compare_rows(runs, axis)
    table = Table(title=Text.assemble(literal(name, "bold"), literal(f" by {axis}")), title_justify="left")
    for column in header:
        table.add_column(literal(column), overflow="fold")
    for row in body:
        table.add_row(*(literal(cell) for cell in row))
    return table


def compare_markdown(name: str, runs: list[VariantRun], axis: str) -> str:
    header, body = compare_rows(runs, axis)
    lines = [f"**{name}** by {axis}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    # Printed as it is (markdown, not rich): the names' control characters are escaped here.
    lines = [visible(line) for line in lines]
    return "\n".join(lines) + "\n"
