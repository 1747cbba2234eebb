"""`lab probe --from A --to B:PORT`: an ad hoc probe, resolved by describe exactly as a probe written at the end
of the scenario would be (so it is checked and refused with the same words), then run like any other."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from lab.describe.errors import ScenarioError, ScenarioErrors
from lab.describe.load import load_scenario
from lab.describe.topology import Axis, ProbeSpec, Topology
from lab.doctor import machine_arch, running_kernel
from lab.live.record import LiveLabError


def target(topo: Topology, text: str, via: str | None, node: str | None) -> dict[str, Any]:
    """A probe's `to:` from NAME:PORT: a Service (by name, port number or name; `via` and `node` pick its
    frontend), a node (its own address), a pod or external host (its address), or an IPv4 address."""
    name, sep, port_text = text.rpartition(":")
    if not sep or not name or not port_text:
        raise LiveLabError(f"--to {text}: expected NAME:PORT or ADDRESS:PORT (a Service, node, pod, host or IPv4)")
    port: int | str = int(port_text) if port_text.isdigit() else port_text
    if any(s.name == name for s in topo.services):
        to: dict[str, Any] = {"service": name, "port": port, "via": via or "clusterIP"}
        return to | ({"node": node} if node else {})
    if via or node:
        raise LiveLabError(f"--via and --node pick a Service's frontend; {name} is no Service")
    if not isinstance(port, int):
        raise LiveLabError(f"--to {text}: a named port belongs to a Service; give a number")
    if any(n.name == name for n in topo.nodes):
        return {"node": name, "port": port}
    addresses = {p.name: p.ip for p in topo.built_pods} | {e.name: e.ip for e in topo.externals}
    if name in addresses:
        return {"address": addresses[name], "port": port}
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        known = sorted({s.name for s in topo.services} | {n.name for n in topo.nodes} | set(addresses))
        raise LiveLabError(
            f"--to {text}: {name} is no Service, node, pod or host of the lab ({', '.join(known)})"
        ) from None
    return {"address": name, "port": port}


def adhoc_probe(path: Path, matrix: dict[str, list[Axis]], topo: Topology, request: dict[str, Any]) -> ProbeSpec:
    """The probe `request` asks for (from, to, protocol, via, node), resolved against the live variant."""
    taken = {p.name for p in topo.probes}
    name = next(f"adhoc-{n}" for n in range(1, len(taken) + 2) if f"adhoc-{n}" not in taken)
    written: dict[str, Any] = {
        "name": name,
        "from": str(request.get("from", "")),
        "to": target(topo, str(request.get("to", "")), request.get("via"), request.get("node")),
        "expect": {"outcome": "delivered"},
    }
    if request.get("protocol"):
        written["protocol"] = str(request["protocol"]).upper()
    try:
        scenario = load_scenario(path, matrix, extra_probes=(written,), kernel=running_kernel(), arch=machine_arch())
    except ScenarioError as exc:
        errors = exc.errors if isinstance(exc, ScenarioErrors) else [exc]
        raise LiveLabError("; ".join(_in_flags(e, len(topo.probes), request) for e in errors)) from None
    variant = next(t for t in scenario.variants if t.variant == topo.variant)
    return variant.probes[-1]


# The probe's fields as `lab probe` builds them (above), by the flag that gave each; a field not listed here
# (`to` as a whole, its `address` or `port`) came from --to.
_FLAGS = {"from": "--from", "protocol": "--protocol", "to.via": "--via", "to.node": "--node"}


def _in_flags(error: ScenarioError, index: int, request: dict[str, Any]) -> str:
    """An error about the ad hoc probe in the words of the command line (the flag and what it was given), not
    the probe's place in the file (`probes[3].to.port`); one about the file itself as it is."""
    prefix = f"probes[{index}]"
    if error.field != prefix and not error.field.startswith(f"{prefix}."):
        return str(error)
    field = error.field.removeprefix(prefix).removeprefix(".")
    flag = _FLAGS.get(field, "--to")
    given = request.get(flag.removeprefix("--"))
    return f"lab probe {flag} {given}: {error.message}" if given else f"lab probe: {error.message}"
