"""Terminal output: one table per scenario, and the evidence for every probe that failed."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from lab.pipeline import ProbeResult, VariantRun
from lab.report.records import evidence_lines, expected_text, headline, observed_text


def scenario_table(name: str, runs: list[VariantRun]) -> Table:
    table = Table(title=f"[bold]{name}[/bold]", title_justify="left", show_lines=False)
    # A probe name is never cut (it is what a user greps and passes to --probe); the other columns wrap at spaces.
    table.add_column("variant")
    table.add_column("probe", no_wrap=True)
    for column in ("expected", "observed", "result"):
        table.add_column(column)
    for run in runs:
        if run.skipped:
            table.add_row(run.topology.variant_label, "(all)", "", f"[yellow]{run.skipped}[/yellow]", "SKIP")
        for r in run.results:
            mark = "[green]PASS[/green]" if r.verdict.ok else "[red]FAIL[/red]"
            table.add_row(run.topology.variant_label, r.probe.name, expected_text(r), observed_text(r), mark)
    return table


def evidence(result: ProbeResult, console: Console) -> None:
    console.print(f"  [bold]{headline(result)}[/bold]", highlight=False, soft_wrap=True)
    for line in evidence_lines(result):
        console.print(f"    {line}", highlight=False, markup=False, soft_wrap=True)


def print_scenario(name: str, runs: list[VariantRun], console: Console, verbose: bool = False) -> None:
    console.print(scenario_table(name, runs))
    shown = [r for run in runs for r in run.results if verbose or not r.verdict.ok]
    for result in shown:
        evidence(result, console)
    if shown:
        console.print()
