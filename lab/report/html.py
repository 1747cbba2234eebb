"""`lab run --html DIR`: one self-contained page (index.html: inline SVG and CSS, no script, nothing fetched) with,
per scenario, its topology drawn, the comparison across its variants with the differences marked, and per probe
its verdict, its path drawn over the topology, each hop with the packet's addresses as captured there, the rules
that met it, why it ended where it did, the source the backend saw, and links to its pcaps (with --pcap)."""

from __future__ import annotations

import html
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path

from lab.describe.topology import Topology
from lab.pipeline import ProbeResult, VariantRun
from lab.probe.capture import write_file
from lab.probe.evidence.snmp import counted
from lab.probe.session import Hop
from lab.report.compare import compare_rows
from lab.report.drawing import svg, topology_dot
from lab.report.records import expected_text, observed_text

STYLE = """
body { font: 14px/1.45 Helvetica, Arial, sans-serif; margin: 1.5em 2em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
nav a { margin-right: 1em; } .muted { color: #777; }
table { border-collapse: collapse; margin: 0.6em 0; } th, td { border: 1px solid #ddd; padding: 3px 7px; }
th { background: #f4f4f4; text-align: left; } td.differs { background: #fff3cd; font-weight: bold; }
td.nat { background: #e3f2fd; } code, td.mono { font-family: Menlo, Consolas, monospace; font-size: 12px; }
article.probe { border: 1px solid #ddd; border-left: 6px solid #2e7d32; padding: 0.4em 1em; margin: 1em 0; }
article.probe.fail { border-left-color: #c62828; }
.badge { display: inline-block; padding: 0 6px; border-radius: 3px; color: #fff; font-size: 12px; }
.pass .badge { background: #2e7d32; } .fail .badge { background: #c62828; }
.drawing svg { max-width: 100%; height: auto; } .legend span { margin-right: 1em; }
"""
LEGEND = (
    '<p class="legend muted"><span style="color:#2e7d32">■ source</span><span style="color:#ef6c00">■ crossed '
    '(in the order first seen)</span><span style="color:#1565c0">■ backend</span><span style="color:#c62828">■ last '
    "seen (nothing answered)</span></p>"
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


def _probe(result: ProbeResult, directory: Path) -> str:
    o, p = result.observed, result.probe
    state = "pass" if result.verdict.ok else "fail"
    died = ""
    if o.outcome != "delivered" and o.hops:
        died = o.hops[-1].actor
    drawing = svg(topology_dot(result.topology, o.hops, p.source, o.backend or "", died))
    anchor = _anchor(result.topology.scenario, result.topology.variant_label, p.name)
    parts = [
        f'<article class="probe {state}" id="{anchor}">',
        f'<h4><span class="badge">{state.upper()}</span> {_e(p.name)}: {_e(p.source)} → {_e(p.target)} '
        f'<span class="muted">({_e(p.dst_ip)}:{p.dst_port}/{_e(p.protocol)})</span></h4>',
        f"<p>expected <b>{_e(expected_text(result))}</b>, observed <b>{_e(observed_text(result))}</b></p>",
    ]
    parts += [f'<p class="reason">✗ {_e(reason)}</p>' for reason in result.verdict.reasons]
    if o.explanation:
        parts.append(f"<p>why: {_e(o.explanation)}</p>")
    if o.counters:
        said = "; ".join(f"{actor}: {counted(dict(moved))}" for actor, moved in o.counters)
        parts.append(f"<p class='mono'>kernel counters that moved: {_e(said)}</p>")
    if o.source_ip:
        parts.append(f"<p>the backend saw the source <code>{_e(o.source_ip)}</code> {_e(o.source or '')}</p>")
    if p.why:
        parts.append(f'<p class="muted">scenario says: {_e(p.why)}</p>')
    parts.append(f'<div class="drawing">{drawing}</div>')
    if o.hops:
        parts.append(
            "<table class='hops'><tr><th>#</th><th>seen at</th><th>source</th><th>destination</th><th></th></tr>"
            + "".join(hop_rows(o.hops))
            + "</table>"
        )
    if o.rules:
        rows = "".join(
            f"<tr><td>{_e(actor)}</td><td>{_e(hit.table)} {_e(hit.chain)}</td><td class='mono'>{_e(hit.rule)}</td>"
            f"<td>{hit.packets}</td></tr>"
            for actor, hit in o.rules
        )
        parts.append(
            f"<table class='rules'><tr><th>where</th><th>chain</th><th>rule</th><th>pkts</th></tr>{rows}</table>"
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


def _comparison(runs: Sequence[VariantRun]) -> str:
    axes = list(dict(runs[0].topology.variant)) if runs else []
    axis = "proxyMode" if "proxyMode" in axes else (axes[0] if axes else "")
    if not axis or len(runs) < 2:
        return ""
    header, body = compare_rows(list(runs), axis)
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    rows = []
    for row in body:
        differs = row[-1] == "≠"
        cells = "".join(
            f'<td class="{"differs" if differs and 2 <= k < len(row) - 1 else ""}">{_e(c)}</td>'
            for k, c in enumerate(row)
        )
        rows.append(f"<tr>{cells}</tr>")
    return f"<h3>By {_e(axis)}</h3><table class='compare'><tr>{head}</tr>{''.join(rows)}</table>"


def _scenario(name: str, runs: Sequence[VariantRun], directory: Path) -> str:
    topo: Topology = runs[0].topology
    parts = [f'<section class="scenario" id="{_anchor(name)}"><h2>{_e(name)}</h2>']
    if topo.description:
        parts.append(f"<p>{_e(topo.description)}</p>")
    parts.append(f'<div class="drawing">{svg(topology_dot(topo))}</div>')
    parts.append(_comparison(runs))
    for run in runs:
        parts.append(f"<h3>{_e(run.topology.variant_label or 'the scenario')}</h3>")
        if run.skipped:
            parts.append(f'<p class="muted">skipped: {_e(run.skipped)}</p>')
        parts += [_probe(result, directory) for result in run.results]
    parts.append("</section>")
    return "\n".join(parts)


def page(scenarios: Sequence[tuple[str, Sequence[VariantRun]]], directory: Path) -> str:
    """The whole report, as one HTML document."""
    results = [r for _, runs in scenarios for run in runs for r in run.results]
    passed = sum(r.verdict.ok for r in results)
    skipped = sum(run.skipped_probes for _, runs in scenarios for run in runs)
    nav = "".join(f'<a href="#{_anchor(name)}">{_e(name)}</a>' for name, _ in scenarios)
    body = "\n".join(_scenario(name, runs, directory) for name, runs in scenarios if runs)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>lab report</title>'
        f"<style>{STYLE}</style></head><body>\n<h1>lab report</h1>\n"
        f'<p class="muted">{stamp}, kernel {_e(platform.release())}: {passed} passed, {len(results) - passed} failed, '
        f"{skipped} skipped</p>\n<nav>{nav}</nav>\n{LEGEND}\n{body}\n</body></html>\n"
    )


def write_report(directory: Path, scenarios: Sequence[tuple[str, Sequence[VariantRun]]]) -> Path:
    """DIR/index.html (checked and opened like --pcap's directory: never through a symlink)."""
    return write_file(directory, "index.html", page(scenarios, directory).encode())
