"""The topology as a picture (Graphviz `dot`, SVG inlined in the HTML report), with one probe's path over it.

Nodes are boxes holding their pods (a cluster each: the node's addresses, then each pod with its address), beside
the underlay they share with external hosts, routers and load balancers. A probe's path colours the actors it
crossed in the order the captures first saw them (numbered), the source, the backend that answered, and the actor
where the packet was last seen when nothing answered. Every string from the scenario is escaped for dot and for
the SVG that dot writes.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence

from lab.describe.topology import Topology
from lab.probe.session import Hop

UNDERLAY = "underlay"
SOURCE, CROSSED, BACKEND, DIED = "#2e7d32", "#ef6c00", "#1565c0", "#c62828"


class DrawingError(Exception):
    """dot is missing or refused the graph."""


def _quote(text: str) -> str:
    """A dot string literal (label text: newlines as line breaks)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _id(name: str) -> str:
    return _quote(f"a:{name}")


def path_actors(hops: Sequence[Hop]) -> list[str]:
    """The actors whose interfaces saw the probe, in the order they first did."""
    return list(dict.fromkeys(h.actor for h in hops))


def topology_dot(topo: Topology, hops: Sequence[Hop] = (), source: str = "", backend: str = "", died: str = "") -> str:
    """The graph in dot's language; with a probe's hops, its path drawn over it."""
    crossed = path_actors(hops)
    order = {actor: i for i, actor in enumerate(crossed, 1)}

    def style(name: str) -> str:
        colour = {source: SOURCE, backend: BACKEND, died: DIED}.get(name) or (CROSSED if name in order else "")
        mark = f" ({order[name]})" if name in order else ""
        return (f', color="{colour}", penwidth=2.5, fontcolor="{colour}"' if colour else ""), mark

    lines = [
        "graph topology {",
        '  graph [rankdir=LR, fontname="Helvetica", fontsize=11, bgcolor="transparent", nodesep=0.25];',
        '  node [shape=box, style="rounded", fontname="Helvetica", fontsize=10];',
        '  edge [color="#888888"];',
    ]
    gateway = f"{UNDERLAY}\n{topo.cluster.underlay}\ngateway {topo.cluster.gateway_ip}"
    lines.append(f"  {_id(UNDERLAY)} [label={_quote(gateway)}, shape=ellipse];")
    for node in topo.nodes:
        extra, mark = style(node.name)
        addresses = [f"eth0 {node.ip}"] + ([f"cni0 {node.bridge_ip}"] if node.bridge_ip else [])
        lines.append(f"  subgraph {_quote('cluster_' + node.name)} {{")
        lines.append(f'    label={_quote("pods " + node.pod_cidr)}; style="dashed"; color="#bbbbbb";')
        lines.append(
            f"    {_id(node.name)} [label={_quote(node.name + mark + chr(10) + chr(10).join(addresses))}{extra}];"
        )
        for pod in topo.pods_on(node.name):
            if pod.host_network:
                continue
            pextra, pmark = style(pod.name)
            lines.append(f"    {_id(pod.name)} [label={_quote(f'{pod.name}{pmark}{chr(10)}{pod.ip}')}{pextra}];")
            lines.append(f"    {_id(node.name)} -- {_id(pod.name)};")
        lines.append("  }")
        lines.append(f"  {_id(UNDERLAY)} -- {_id(node.name)};")
    for ext in topo.externals:
        extra, mark = style(ext.name)
        kind = "router" if ext.is_router else "host"
        lines.append(f"  {_id(ext.name)} [label={_quote(f'{ext.name}{mark} ({kind}){chr(10)}{ext.ip}')}{extra}];")
        lines.append(f"  {_id(ext.behind or UNDERLAY)} -- {_id(ext.name)};")
    for lb in topo.load_balancers:
        vips = ", ".join(dict.fromkeys(f.vip for f in lb.frontends))
        label = f"load balancer {lb.name}\n{lb.address}\nVIP {vips}"
        lines.append(f"  {_id('lb:' + lb.name)} [label={_quote(label)}, shape=hexagon];")
        lines.append(f"  {_id(UNDERLAY)} -- {_id('lb:' + lb.name)} [style=dotted];")
    for first, second in zip(crossed, crossed[1:], strict=False):
        lines.append(
            f'  {_id(first)} -- {_id(second)} [color="{CROSSED}", penwidth=2, style=dashed, constraint=false];'
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


_PROLOG = re.compile(r"\A.*?(?=<svg)", re.S)


def svg(dot_text: str) -> str:
    """The picture as an <svg> element (dot's XML prolog and doctype removed, to inline it)."""
    try:
        done = subprocess.run(["dot", "-Tsvg"], input=dot_text, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise DrawingError("dot (Debian's graphviz package) is not installed: scripts/setup installs it") from None
    if done.returncode != 0:
        raise DrawingError(f"dot refused the graph: {done.stderr.strip()}")
    return _PROLOG.sub("", done.stdout, count=1)
