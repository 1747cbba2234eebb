"""Terminal output: one table per scenario, and the evidence for every probe that failed."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from lab.report.records import expected_text, observed_text
from lab.runner import ProbeResult, VariantRun


def scenario_table(name: str, runs: list[VariantRun]) -> Table:
    table = Table(title=f"[bold]{name}[/bold]", title_justify="left", show_lines=False)
    for column in ("variant", "probe", "expected", "observed", "result"):
        table.add_column(column, overflow="fold")
    for run in runs:
        for r in run.results:
            mark = "[green]PASS[/green]" if r.verdict.ok else "[red]FAIL[/red]"
            table.add_row(run.topology.variant_label, r.probe.name, expected_text(r), observed_text(r), mark)
    return table


def evidence(result: ProbeResult, console: Console) -> None:
    o = result.observed
    console.print(
        f"  [bold]{result.probe.name}[/bold] [{result.topology.variant_label}] "
        f"{result.probe.source} → {result.probe.target} ({result.probe.dst_ip}:{result.probe.dst_port}"
        f"/{result.probe.protocol})"
    )
    for reason in result.verdict.reasons:
        console.print(f"    [red]✗[/red] {reason}")
    if o.explanation:
        console.print(f"    why: {o.explanation}")
    if result.probe.why:
        console.print(f"    scenario says: {result.probe.why}")
    for line in o.path:
        console.print(f"    seen  {line}", highlight=False)
    for node, hit in o.rules:
        console.print(f"    rule  {node}: {hit} ({hit.packets} pkt)", highlight=False)
    for path in o.pcaps:
        console.print(f"    pcap  {path}")


def print_scenario(name: str, runs: list[VariantRun], console: Console, verbose: bool = False) -> None:
    console.print(scenario_table(name, runs))
    shown = [r for run in runs for r in run.results if verbose or not r.verdict.ok]
    for result in shown:
        evidence(result, console)
    if shown:
        console.print()
