"""`lab run --html DIR`: one self-contained page (index.html: inline SVG and CSS, no script, nothing fetched) with,
per scenario, its topology drawn, the comparison across its variants with the differences marked, and per probe
its verdict, its path drawn over the topology, each hop with the packet's addresses as captured there, the rules
that met it, why it ended where it did, the source the backend saw, and links to its pcaps (with --pcap)."""

from __future__ import annotations

import html
import os
import time
from collections.abc import Sequence
from pathlib import Path

from lab.describe.topology import Topology
from lab.judge.results import ProbeResult, VariantRun
from lab.probe.arp import answer_text
from lab.probe.capture import write_file
from lab.probe.evidence.snmp import counted
from lab.probe.observation import Hop
from lab.probe.why import dropping_rule
from lab.report.answer import answer
from lab.report.chain import source_summary
from lab.report.compare import Cell, compare_grid
from lab.report.drawing import svg, topology_dot
from lab.report.records import expected_text, observed_text
from lab.report.records import summary as counted_probes
from lab.report.sliced import sliced_line

STYLE = """
body { font: 14px/1.45 Helvetica, Arial, sans-serif; margin: 1.5em 2em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
nav a { margin-right: 1em; } .muted { color: #777; }
table { border-collapse: collapse; margin: 0.6em 0; } th, td { border: 1px solid #ddd; padding: 3px 7px; }
th { background: #f4f4f4; text-align: left; } td.differs { background: #fff3cd; font-weight: bold; }
td.nat { background: #e3f2fd; } code, td.mono { font-family: Menlo, Consolas, monospace; font-size: 12px; }
article.probe { border: 1px solid #ddd; border-left: 6px solid #2e7d32; padding: 0.4em 1em; margin: 1em 0; }
article.probe.fail { border-left-color: #c62828; } article.probe.skip { border-left-color: #f9a825; }
.badge { display: inline-block; padding: 0 6px; border-radius: 3px; color: #fff; font-size: 12px; }
.pass .badge { background: #2e7d32; } .fail .badge { background: #c62828; } .skip .badge { background: #f9a825; }
.drawing svg { max-width: 100%; height: auto; } .legend span { margin-right: 1em; }
td.fail, td.fail a { background: #ffebee; color: #b71c1c; font-weight: bold; } td a { color: inherit; }
section.failures { border: 2px solid #c62828; background: #fff5f5; padding: 0.3em 1em; margin: 1em 0; }
section.failures h2 { color: #c62828; border: none; margin-top: 0.3em; }
tr.dropper td { background: #ffcdd2; font-weight: bold; } tr.dropper td:last-child { color: #b71c1c; }
tr.decider td { background: #fff3c4; font-weight: bold; }
p.sliced { border-left: 6px solid #ef6c00; background: #fff8e1; padding: 0.3em 0.8em; }
"""
LEGEND = (
    '<p class="legend muted"><span style="color:#2e7d32">■ source</span><span style="color:#ef6c00">■ crossed '
    '(in the order first seen)</span><span style="color:#1565c0">■ backend</span><span style="color:#c62828">■ last '
    "seen (nothing answered)</span> dashed lines: the path of each connection (#1, #2… when a probe sent several)"
    "</p>"
)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _anchor(*parts: str) -> str:
    return "-".join("".join(c if c.isalnum() else "_" for c in p) for p in parts)


def _endpoints(packet: str) -> tuple[str, str]:
    src, _, rest = packet.partition(" > ")
    return src, rest.split(" ", 1)[0]


def hop_rows(hops: Sequence[Hop]) -> list[str]:
    """One table row per hop; an address that differs from the hop before it in the same direction (a NAT on the
    way) is marked. A hop goes back towards the client when its destination was a source on the way there."""
    rows: list[str] = []
    sources: set[str] = set()
    last: dict[bool, tuple[str, str]] = {}
    for i, hop in enumerate(hops, 1):
        src, dst = _endpoints(hop.packet)
        back = dst in sources
        if not back:
            sources.add(src)
        before = last.get(back)
        cells = []
        for k, value in enumerate((src, dst)):
            changed = before is not None and before[k] != value
            cells.append(f'<td class="mono{" nat" if changed else ""}">{_e(value)}</td>')
        rest = hop.packet.split(" ", 3)[3] if hop.packet.count(" ") >= 3 else ""
        where = f"{hop.actor}/{hop.ifname} {'out' if hop.outgoing else 'in'}"
        rows.append(f"<tr><td>{i}</td><td>{_e(where)}</td>{''.join(cells)}<td class='mono'>{_e(rest)}</td></tr>")
        last[back] = (src, dst)
    return rows


def probe_anchor(result: ProbeResult) -> str:
    return _anchor(result.topology.scenario, result.topology.variant_label, result.probe.name)


def _hop_table(hops: Sequence[Hop], caption: str = "") -> str:
    head = f"<caption>{_e(caption)}</caption>" if caption else ""
    return (
        f"<table class='hops'>{head}<tr><th>#</th><th>seen at</th><th>source</th><th>destination</th><th></th></tr>"
        + "".join(hop_rows(hops))
        + "</table>"
    )


def rule_rows(result: ProbeResult) -> list[str]:
    """One row per rule that met the probe, in path order; the one that dropped or rejected it, when it was not
    delivered, marked (the rule `why` names), and those that decided its translation chain (a DNAT, a mark for
    masquerade, the masquerade), with the setting that wrote each."""
    o = result.observed
    dropper = dropping_rule(o.rules) if o.outcome != "delivered" else None
    deciders = {(step.node, step.rule): step for step in o.diagnosis.steps if step.rule}
    rows = []
    for actor, hit in o.rules:
        dropped = dropper is not None and dropper == (actor, hit)
        said = f"{'rejected' if hit.verdict == 'REJECT' else 'dropped'} it" if dropped else ""
        mark = ' class="dropper"' if dropped else ""
        if not dropped and (step := deciders.get((actor, str(hit)))):
            said, mark = step.kind + (f" ({step.setting})" if step.setting else ""), ' class="decider"'
        rows.append(
            f"<tr{mark}><td>{_e(actor)}</td><td>{_e(hit.table)} {_e(hit.chain)}</td>"
            f"<td class='mono'>{_e(hit.rule)}</td><td>{hit.packets}</td><td>{said}</td></tr>"
        )
    return rows


def _probe(result: ProbeResult, directory: Path) -> str:
    o, p = result.observed, result.probe
    state = "pass" if result.verdict.ok else "skip" if result.verdict.skipped else "fail"
    died = ""
    if o.outcome != "delivered" and o.hops:
        died = o.hops[-1].actor
    paths = o.connections or (o.hops,)
    backends = set((o.backend or "").split("|")) - {""}
    drawing = svg(topology_dot(result.topology, paths, p.source, backends, died))
    anchor = probe_anchor(result)
    parts = [
        f'<article class="probe {state}" id="{anchor}">',
        f'<h4><span class="badge">{state.upper()}</span> {_e(p.name)}: {_e(p.source)} → {_e(p.target)} '
        f'<span class="muted">({_e(p.destination)}/{_e(p.protocol)})</span></h4>',
        f"<p>expected <b>{_e(expected_text(result))}</b>, observed <b>{_e(observed_text(result))}</b></p>",
    ]
    parts += [f'<p class="reason">✗ {_e(reason)}</p>' for reason in result.verdict.reasons]
    if result.verdict.skipped:
        parts.append(f'<p class="muted">skipped: {_e(result.verdict.skipped)}</p>')
    if o.explanation:
        parts.append(f"<p>why: {_e(o.explanation)}</p>")
    if summary := answer(result) or source_summary(result):
        parts.append(f"<p><b>{_e(summary)}</b></p>")
    if o.diagnosis.steps:
        steps = "".join(f"<li>{_e(step.line())}</li>" for step in o.diagnosis.steps)
        parts.append(f"<p>the translation chain, in path order:</p><ol class='chain mono'>{steps}</ol>")
    if o.counters:
        said = "; ".join(f"{actor}: {counted(dict(moved))}" for actor, moved in o.counters)
        parts.append(f"<p class='mono'>kernel counters that moved: {_e(said)}</p>")
    if o.source_ip:
        parts.append(f"<p>the backend saw the source <code>{_e(o.source_ip)}</code> {_e(o.source or '')}</p>")
    if o.arp:
        said = "; ".join(answer_text(answer) for answer in o.arp)
        parts.append(f"<p class='mono'>ARP answers the client got, in order: {_e(said)}</p>")
    if p.why:
        parts.append(f'<p class="muted">scenario says: {_e(p.why)}</p>')
    parts.append(f'<div class="drawing">{drawing}</div>')
    if len(o.connections) > 1:
        parts += [_hop_table(hops, f"connection #{k}") for k, hops in enumerate(o.connections, 1) if hops]
    elif o.hops:
        parts.append(_hop_table(o.hops))
    if o.rules:
        parts.append(
            "<table class='rules'><tr><th>where</th><th>chain</th><th>rule</th><th>pkts</th><th></th></tr>"
            f"{''.join(rule_rows(result))}</table>"
        )
    for line in (*o.conntrack, *o.flow):
        parts.append(f"<p class='mono'>{_e(line)}</p>")
    if o.pcaps:
        links = " ".join(
            f'<a href="{_e(os.path.relpath(path, directory))}">{_e(Path(path).name)}</a>' for path in o.pcaps
        )
        parts.append(f"<p>pcaps: {links}</p>")
    parts.append("</article>")
    return "\n".join(parts)


def _compare_cell(cell: Cell, differs: bool) -> str:
    """A comparison cell: a failure in red, and every probe that ran linked to its account below."""
    failed = cell.result is not None and cell.result.verdict.failed
    classes = " ".join(c for c, on in (("differs", differs), ("fail", failed)) if on)
    text = _e(cell.text)
    if cell.result is not None:
        text = f'<a href="#{probe_anchor(cell.result)}">{text}</a>'
    return f'<td class="{classes}">{text}</td>'


def _comparison(runs: Sequence[VariantRun]) -> str:
    axes = list(dict(runs[0].topology.variant)) if runs else []
    axis = "proxyMode" if "proxyMode" in axes else (axes[0] if axes else "")
    if not axis or len(runs) < 2:
        return ""
    header, grid = compare_grid(list(runs), axis)
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    rows = [
        f"<tr><td>{_e(rest)}</td><td>{_e(probe)}</td>{''.join(_compare_cell(c, differs) for c in cells)}"
        f"<td>{'≠' if differs else ''}</td></tr>"
        for rest, probe, cells, differs in grid
    ]
    return f"<h3>By {_e(axis)}</h3><table class='compare'><tr>{head}</tr>{''.join(rows)}</table>"


def _failures(results: Sequence[ProbeResult]) -> str:
    """The failed probes first, each linked to its account: what was expected, what came."""
    failed = [r for r in results if r.verdict.failed]
    if not failed:
        return ""
    items = "".join(
        f'<li><a href="#{probe_anchor(r)}">{_e(r.topology.scenario)} · {_e(r.topology.variant_label or "—")} · '
        f"{_e(r.probe.name)}</a>: expected {_e(expected_text(r))}, observed {_e(observed_text(r))}</li>"
        for r in failed
    )
    return f'<section class="failures"><h2>{len(failed)} failed</h2><ul>{items}</ul></section>'


def _scenario(name: str, runs: Sequence[VariantRun], directory: Path) -> str:
    topo: Topology = runs[0].topology
    parts = [f'<section class="scenario" id="{_anchor(name)}"><h2>{_e(name)}</h2>']
    if topo.description:
        parts.append(f"<p>{_e(topo.description)}</p>")
    parts.append(f'<div class="drawing">{svg(topology_dot(topo))}</div>')
    parts.append(_comparison(runs))
    for run in runs:
        parts += _variant(run, directory)
    parts.append("</section>")
    return "\n".join(parts)


def _variant(run: VariantRun, directory: Path) -> list[str]:
    """A variant's part of its scenario's section: its heading, why it was skipped or, sliced, which nodes were
    built and which stood in (above its probes: none is to be read as a stand-in's own rules at work), its probes."""
    parts = [f"<h3>{_e(run.topology.variant_label or 'the scenario')}</h3>"]
    if run.skipped:
        parts.append(f'<p class="muted">skipped: {_e(run.skipped)}</p>')
    elif run.topology.stand_ins:
        parts.append(f'<p class="sliced">{_e(sliced_line(run.topology, most=None))}</p>')
    return parts + [_probe(result, directory) for result in run.results]


def page(scenarios: Sequence[tuple[str, Sequence[VariantRun]]], directory: Path) -> str:
    """The whole report, as one HTML document."""
    results = [r for _, runs in scenarios for run in runs for r in run.results]
    totals = counted_probes([run for _, runs in scenarios for run in runs])
    nav = "".join(f'<a href="#{_anchor(name)}">{_e(name)}</a>' for name, _ in scenarios)
    body = "\n".join(_scenario(name, runs, directory) for name, runs in scenarios if runs)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    # The release the runner read and gave each variant (report reads nothing from the machine).
    kernel = ", ".join(sorted({run.topology.kernel for _, runs in scenarios for run in runs})) or "none"
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>lab report</title>'
        f"<style>{STYLE}</style></head><body>\n<h1>lab report</h1>\n"
        f'<p class="muted">{stamp}, kernel {_e(kernel)}: {totals["passed"]} passed, {totals["failed"]} failed, '
        f"{totals['skipped']} skipped</p>\n{_failures(results)}\n<nav>{nav}</nav>\n{LEGEND}\n{body}\n</body></html>\n"
    )


def write_report(directory: Path, scenarios: Sequence[tuple[str, Sequence[VariantRun]]]) -> Path:
    """DIR/index.html (checked and opened like --pcap's directory: never through a symlink)."""
    return write_file(directory, "index.html", page(scenarios, directory).encode())
