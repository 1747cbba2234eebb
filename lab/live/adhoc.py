"""`lab probe --from A --to B:PORT`: an ad hoc probe, resolved by describe exactly as a probe of the scenario
would be (so it is checked and refused with the same words), against the workload as the lab started (a live lab
runs none of the file's steps), then run like any other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.api.cluster import pod_aliases
from lab.describe.digits import is_ascii_number
from lab.describe.errors import ScenarioError, ScenarioErrors
from lab.describe.ip import AddressError, canonical_ip
from lab.describe.load import load_scenario
from lab.describe.names import DNS1123_LABEL, DNS1123_SUBDOMAIN, refusal
from lab.describe.topology import Axis, ProbeSpec, ServiceSpec, Topology
from lab.doctor import machine_arch, running_kernel
from lab.live.record import LiveLabError, actor_named

# What --to takes, said when it is given something else.
_FORMS = (
    "expected NAME:PORT, NAMESPACE/NAME:PORT or NAME.NAMESPACE:PORT (a Service; a bare NAME is default's, or the "
    "one namespace's that has it), NODE:PORT, POD:PORT (or NAMESPACE/POD:PORT), HOST:PORT, IPv4:PORT or [IPv6]:PORT"
)


def target(topo: Topology, text: str, via: str | None, node: str | None) -> dict[str, Any]:
    """A probe's `to:` from --to TARGET:PORT: a Service (NAME, NAMESPACE/NAME or NAME.NAMESPACE as kube DNS spells
    it; by port number or name; `via` and `node` pick its frontend), a node (its own address), a pod (NAME or
    NAMESPACE/NAME) or external host (its address), or an address ([IPv6]:PORT in brackets)."""
    name, port = _name_and_port(text)
    if (service := _service(topo, text, name)) is not None:
        to: dict[str, Any] = {"service": service.name, "namespace": service.namespace, "port": port}
        return to | {"via": via or "clusterIP"} | ({"node": node} if node else {})
    if via or node:
        raise LiveLabError(f"--via and --node pick a Service's frontend; {name} is no Service")
    if not isinstance(port, int):
        raise LiveLabError(f"--to {text}: a named port belongs to a Service; give a number")
    if any(n.name == name for n in topo.nodes):
        return {"node": name, "port": port}
    addresses = {e.name: e.ip for e in topo.externals} | {p.name: p.ip for p in topo.built_pods}
    try:
        actor = actor_named(name, addresses, pod_aliases(topo.built_pods))
    except LiveLabError as exc:
        raise LiveLabError(f"--to {text}: {exc}") from None
    if actor is not None:
        return {"address": addresses[actor], "port": port}
    bracketed = name.startswith("[") and name.endswith("]")
    try:
        address = canonical_ip(name[1:-1] if bracketed else name)  # read as every address is (lab/describe/ip.py)
    except AddressError:
        known = [f"{s.namespace}/{s.name}" for s in topo.services] + [n.name for n in topo.nodes]
        known += sorted(p.name for p in topo.built_pods) + [e.name for e in topo.externals]
        raise LiveLabError(
            f"--to {text}: {name} is no Service, node, pod or host of the lab ({', '.join(known)})"
        ) from None
    if ":" in address and not bracketed:
        raise LiveLabError(f"--to {text}: write an IPv6 address in brackets, [ADDRESS]:PORT")
    return {"address": address, "port": port}


def _name_and_port(text: str) -> tuple[str, int | str]:
    """NAME and PORT of --to NAME:PORT, checked as Kubernetes checks them (lab/describe/names.py cites the rules):
    the port a number from 1 to 65535 (IsValidPortNum, in the same validation.go) or a Service port's name (a
    DNS-1123 label, validateServicePort); a name with a '/' is NAMESPACE/NAME, its namespace a DNS-1123 label and
    its name a Service's or a Pod's (a DNS-1123 subdomain, the looser of the two)."""
    name, sep, port_text = text.rpartition(":")
    if not sep or not name or not port_text:
        raise LiveLabError(f"--to {text}: {_FORMS}")
    if is_ascii_number(port_text):
        if not 1 <= int(port_text) <= 65535:
            raise LiveLabError(f"--to {text}: a port is a number from 1 to 65535 (or a Service port's name)")
        port: int | str = int(port_text)
    elif why := refusal(DNS1123_LABEL, "a Service port's name (or a number from 1 to 65535)", port_text):
        raise LiveLabError(f"--to {text}: {why}")
    else:
        port = port_text
    namespace, slash, own = name.rpartition("/")
    if slash and (
        why := refusal(DNS1123_LABEL, "NAMESPACE in NAMESPACE/NAME", namespace)
        or refusal(DNS1123_SUBDOMAIN, "NAME in NAMESPACE/NAME (a Service's or a pod's)", own)
    ):
        raise LiveLabError(f"--to {text}: {why}")
    return name, port


def _service(topo: Topology, text: str, name: str) -> ServiceSpec | None:
    """The Service `name` names: NAMESPACE/NAME; NAME.NAMESPACE, as a pod's kube DNS reaches another namespace's
    Service, when no pod of the lab is named so too (a pod's name may hold dots, a Service's never does); a bare
    NAME is default's Service, as a scenario's `to: {service: NAME}` is, else the only namespace's that has one."""
    namespace, slash, own = name.rpartition("/")
    if slash:
        return next((s for s in topo.services if (s.namespace, s.name) == (namespace, own)), None)
    own, dot, namespace = name.partition(".")
    if dot:
        found = next((s for s in topo.services if (s.name, s.namespace) == (own, namespace)), None)
        if found is not None and any(p.kube_name == name for p in topo.built_pods):
            raise LiveLabError(
                f"--to {text}: {name} names both Service {namespace}/{own} and pod {name}: write {namespace}/{own} "
                f"for the Service, NAMESPACE/{name} for the pod"
            )
        return found
    named = [s for s in topo.services if s.name == name]
    if len(named) > 1 and not any(s.namespace == "default" for s in named):
        each = ", ".join(f"{s.namespace}/{s.name}" for s in named)
        raise LiveLabError(
            f"--to {text}: Services of several namespaces are named {name} ({each}): write NAMESPACE/{name}"
        )
    return next((s for s in named if s.namespace == "default"), named[0] if named else None)


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
        # Against the workload as the lab started, as the Python API resolves its probes: the file's own probes,
        # whose steps a live lab never runs, are left out.
        scenario = load_scenario(
            path, matrix, extra_probes=(written,), kernel=running_kernel(), arch=machine_arch(), own_probes=False
        )
    except ScenarioError as exc:
        errors = exc.errors if isinstance(exc, ScenarioErrors) else [exc]
        raise LiveLabError("; ".join(_in_flags(e, 0, request) for e in errors)) from None
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
