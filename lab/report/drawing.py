"""The topology as a picture (Graphviz `dot`, SVG inlined in the HTML report), with one probe's path over it.

Nodes are boxes holding their pods (a cluster each: the node's addresses, then each pod with its address), beside
the underlay they share with external hosts, routers and load balancers. A probe's path colours the actors it
crossed in the order the captures first saw them (numbered), the source, the backends that answered, and the actor
where the packet was last seen when nothing answered; a probe that sent several connections has each one's path
drawn, numbered. Every string from the scenario is escaped for dot and for
the SVG that dot writes.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Collection, Sequence

from lab.describe.topology import Topology
from lab.probe.observation import Hop

UNDERLAY = "underlay"
SOURCE, CROSSED, BACKEND, DIED = "#2e7d32", "#ef6c00", "#1565c0", "#c62828"
# The paths of a probe's several connections, told apart (the first as a single path, then none of the above).
CONNECTIONS = ("#ef6c00", "#6a1b9a", "#00838f", "#9e9d24", "#ad1457", "#4e342e", "#283593", "#558b2f")


class DrawingError(Exception):
    """dot is missing or refused the graph."""


def _quote(text: str) -> str:
    """A dot string literal (label text: newlines as line breaks)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _id(name: str) -> str:
    return _quote(f"a:{name}")


# The underlay's id has a prefix of its own ('a:' is the actors'): a node, host or pod named underlay is drawn
# apart from it.
_UNDERLAY_ID = _quote(f"net:{UNDERLAY}")


def _both(primary: str, secondary: str = "") -> str:
    """An address (or network) of each family a dual-stack actor has, the primary first."""
    return f"{primary}, {secondary}" if secondary else primary


def path_actors(hops: Sequence[Hop]) -> list[str]:
    """The actors whose interfaces saw the probe, in the order they first did."""
    return list(dict.fromkeys(h.actor for h in hops))


def topology_dot(
    topo: Topology,
    paths: Sequence[Sequence[Hop]] = (),
    source: str = "",
    backends: Collection[str] = (),
    died: str = "",
) -> str:
    """The graph in dot's language; with a probe's paths (one per connection it sent), each drawn over it.

    One path numbers the actors it crossed in the order first seen; several (an ECMP router spreading the
    connections over nodes) each get a colour and their number (#1, #2...) on their edges, and an actor names the
    connections that crossed it."""
    paths = [path for path in paths if path]
    crossings: dict[str, list[int]] = {}
    for k, path in enumerate(paths, 1):
        for actor in path_actors(path):
            crossings.setdefault(actor, []).append(k)
    order = {actor: i for i, actor in enumerate(path_actors([h for path in paths for h in path]), 1)}

    def style(name: str) -> tuple[str, str]:
        colour = SOURCE if name == source else BACKEND if name in backends else DIED if name == died else ""
        colour = colour or (CROSSED if name in order else "")
        if name not in order:
            mark = ""
        elif len(paths) == 1:
            mark = f" ({order[name]})"
        else:
            mark = " (" + " ".join(f"#{k}" for k in crossings[name]) + ")"
        return (f', color="{colour}", penwidth=2.5, fontcolor="{colour}"' if colour else ""), mark

    lines = [
        "graph topology {",
        '  graph [rankdir=LR, fontname="Helvetica", fontsize=11, bgcolor="transparent", nodesep=0.25];',
        '  node [shape=box, style="rounded", fontname="Helvetica", fontsize=10];',
        '  edge [color="#888888"];',
    ]
    cluster = topo.cluster
    gateway = f"{UNDERLAY}\n{_both(cluster.underlay, cluster.secondary_underlay)}\n"
    gateway += f"gateway {_both(cluster.gateway_ip, cluster.secondary_gateway_ip)}"
    lines.append(f"  {_UNDERLAY_ID} [label={_quote(gateway)}, shape=ellipse];")
    for node in topo.nodes:
        extra, mark = style(node.name)
        addresses = [f"eth0 {_both(node.ip, node.secondary_ip)}"]
        addresses += [f"cni0 {_both(node.bridge_ip, node.secondary_bridge_ip)}"] if node.bridge_ip else []
        lines.append(f"  subgraph {_quote('cluster_' + node.name)} {{")
        pods = "pods " + _both(node.pod_cidr, node.secondary_pod_cidr)
        lines.append(f'    label={_quote(pods)}; style="dashed"; color="#bbbbbb";')
        lines.append(
            f"    {_id(node.name)} [label={_quote(node.name + mark + chr(10) + chr(10).join(addresses))}{extra}];"
        )
        for pod in topo.pods_on(node.name):
            if pod.host_network:
                continue
            pextra, pmark = style(pod.name)
            label = f"{pod.name}{pmark}\n{_both(*pod.ips)}"
            lines.append(f"    {_id(pod.name)} [label={_quote(label)}{pextra}];")
            lines.append(f"    {_id(node.name)} -- {_id(pod.name)};")
        lines.append("  }")
        lines.append(f"  {_UNDERLAY_ID} -- {_id(node.name)};")
    for ext in topo.externals:
        extra, mark = style(ext.name)
        kind = "router" if ext.is_router else "host"
        label = f"{ext.name}{mark} ({kind})\n{_both(ext.ip, ext.secondary_ip)}"
        lines.append(f"  {_id(ext.name)} [label={_quote(label)}{extra}];")
        lines.append(f"  {_id(ext.behind) if ext.behind else _UNDERLAY_ID} -- {_id(ext.name)};")
    for lb in topo.load_balancers:
        vips = ", ".join(dict.fromkeys(f.vip for f in lb.frontends))
        label = f"load balancer {lb.name}\n{lb.address}\nVIP {vips}"
        lines.append(f"  {_id('lb:' + lb.name)} [label={_quote(label)}, shape=hexagon];")
        lines.append(f"  {_UNDERLAY_ID} -- {_id('lb:' + lb.name)} [style=dotted];")
    # Connections that took the same route share its edges: one colour per route, labelled with their numbers.
    # A connection from an external host starts there and crosses the routers it sits behind, where no capture is.
    behind = {e.name: e.behind for e in topo.externals if e.behind}
    start = [source] if source else []
    while start and start[-1] in behind and behind[start[-1]] not in start:
        start.append(behind[start[-1]])
    routes: dict[tuple[str, ...], list[int]] = {}
    for k, path in enumerate(paths, 1):
        crossed = path_actors(path)
        routes.setdefault(tuple([a for a in start if a not in crossed] + crossed), []).append(k)
    for r, (route, numbers) in enumerate(routes.items()):
        colour = CROSSED if len(paths) == 1 else CONNECTIONS[r % len(CONNECTIONS)]
        said = " ".join(f"#{k}" for k in numbers)
        label = "" if len(paths) == 1 else f', label="{said}", fontcolor="{colour}", fontsize=9'
        for first, second in zip(route, route[1:], strict=False):
            lines.append(
                f'  {_id(first)} -- {_id(second)} [color="{colour}", penwidth=2, style=dashed, constraint=false'
                f"{label}];"
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
