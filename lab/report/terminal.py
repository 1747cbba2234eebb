"""Terminal output: one table per scenario, and the evidence for every probe that failed.

Every name, why and observation came from a scenario file or the kernel: each is printed with `literal`.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from lab.judge.results import ProbeResult, VariantRun
from lab.report.answer import answer
from lab.report.chain import source_summary
from lab.report.literal import literal
from lab.report.records import evidence_lines, expected_text, headline, observed_text


def scenario_table(name: str, runs: list[VariantRun]) -> Table:
    table = Table(title=literal(name, "bold"), title_justify="left", show_lines=False)
    # A probe name is never cut (it is what a user greps and passes to --probe); the other columns wrap at spaces.
    table.add_column("variant")
    table.add_column("probe", no_wrap=True)
    for column in ("expected", "observed", "result"):
        table.add_column(column)
    for run in runs:
        variant = literal(run.topology.variant_label)
        if run.skipped:
            table.add_row(variant, "(all)", "", literal(run.skipped, "yellow"), "SKIP")
        for r in run.results:
            mark = literal("PASS", "green") if r.verdict.ok else literal("FAIL", "red")
            mark = literal("SKIP", "yellow") if r.verdict.skipped else mark  # ran, but the lab cannot know here
            # The probe's question answered, else where its source was rewritten (lab/report/answer.py).
            observed = "\n".join(filter(None, (observed_text(r), answer(r) or source_summary(r))))
            table.add_row(variant, literal(r.probe.name), literal(expected_text(r)), literal(observed), mark)
    return table


def evidence(result: ProbeResult, console: Console) -> None:
    console.print(literal(f"  {headline(result)}", "bold"), soft_wrap=True)
    for line in evidence_lines(result):
        console.print(literal(f"    {line}"), soft_wrap=True)


def print_scenario(name: str, runs: list[VariantRun], console: Console, verbose: bool = False) -> None:
    console.print(scenario_table(name, runs))
    shown = [r for run in runs for r in run.results if verbose or not r.verdict.ok]
    for result in shown:
        evidence(result, console)
    if shown:
        console.print()
