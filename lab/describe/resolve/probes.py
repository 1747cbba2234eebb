"""The probes, against the resolved fabric and workload: each one's source actor, destination (an address, a
node's port, or a Service's port via clusterIP, NodePort, externalIP or load balancer IP), the expectation and
the steps before it that apply to this variant (their `when`)."""

from __future__ import annotations

from dataclasses import replace
from typing import get_args

from lab.describe import schema
from lab.describe.errors import ScenarioError, raise_all
from lab.describe.families import Family, family_of
from lab.describe.ip import AddressError, canonical_ip
from lab.describe.kernel_when import KERNEL
from lab.describe.resolve.checks import node_names, pod_named, unique
from lab.describe.resolve.matrix import Variant
from lab.describe.resolve.steps import Workload, resolve_steps
from lab.describe.topology import (
    ENTRY,
    Expected,
    NodeSpec,
    ProbeSpec,
    ServiceSpec,
    StepSpec,
    Topology,
    entry_suffix,
    of_family,
    tunnel_name,
)
from lab.describe.yamlsrc import FieldPath, Source

DEFAULT_EVERY_MS = 200  # a kept flow's exchange interval unless `every:` says


def resolve_probes(
    variant: Variant,
    declared: list[schema.Probe],
    topo: Topology,
    potential: tuple[ServiceSpec, ...],
    controllers: frozenset[tuple[str, str, str]],
) -> tuple[ProbeSpec, ...]:
    """Every probe of the file; `topo` is this variant's topology without them, `potential` its Services as if
    every built pod ran (where a scale-up's new replicas find their endpoints), `controllers` the Deployments
    and ReplicaSets a step may scale, (kind, namespace, name)."""
    src = variant.source
    actors = {p.name for p in topo.built_pods} | {n.name for n in topo.nodes} | {e.name for e in topo.externals}
    probes = []
    now = Workload(topo.pods, topo.services, pending=topo.pending_pods, potential=potential, controllers=controllers)
    kept: dict[str, ProbeSpec] = {}
    held: dict[tuple[str, int, str, int], FieldPath] = {}  # the TCP connections kept from a fixed port, by 4-tuple
    errors: list[ScenarioError] = []
    failed: set[str] = set()  # probes refused: a check of the flow one of them kept is not checked either
    for i, p in enumerate(declared):
        path: FieldPath = ("probes", i)
        try:
            before, now = resolve_steps(variant, path, p, topo, now)
        except ScenarioError as exc:
            # What the later probes run against is unknown past a step that cannot be done: they are not checked.
            raise_all([*errors, exc])
        if p.flow in failed:
            failed.add(p.name)
            continue
        try:
            _resolve_probe(variant, path, p, topo, now, before, kept, held, probes, actors)
        except ScenarioError as exc:  # the next probes are still checked
            errors.append(exc)
            failed.add(p.name)
    if not errors:
        unique(src, "probe name", [(("probes", i, "name"), p.name) for i, p in enumerate(probes)])
    raise_all(errors)
    return tuple(probes)


def _resolve_probe(
    variant: Variant,
    path: FieldPath,
    p: schema.Probe,
    topo: Topology,
    now: Workload,
    before: tuple[StepSpec, ...],
    kept: dict[str, ProbeSpec],
    held: dict[tuple[str, int, str, int], FieldPath],
    probes: list[ProbeSpec],
    actors: set[str],
) -> None:
    """One probe, appended to `probes` (and to `kept` when it keeps its flow)."""
    src = variant.source
    if p.flow is not None:
        probes.append(_flow_check(variant, path, p, topo, kept, before, now))
        return
    assert p.source is not None and p.to is not None  # the schema's check: from and to, or flow
    named = pod_named(src, (*path, "from"), p.source, topo)
    p = p.model_copy(update={"source": named.name}) if named else p
    if gone := dict(now.deleted).get(p.source):
        raise src.error((*path, "from"), f"pod {p.source} is deleted at line {src.line_of(gone)}, before this probe")
    if p.source in {q.name for q in now.pending}:
        raise src.error((*path, "from"), f"pod {p.source} is created by a later scale step, not yet here")
    _not_a_stand_in(src, (*path, "from"), p.source, topo, "no probe starts there")
    if p.source not in actors:
        raise src.error(
            (*path, "from"),
            f"unknown pod, node or external host {p.source!r}; expected one of {', '.join(sorted(actors))}",
        )
    dst_ip, dst_port, protocol, target = _target(src, (*path, "to"), p.to, topo, p.family)
    _source_has_family(src, path, p.source, family_of(dst_ip) or "IPv4", topo)
    if p.source_address and family_of(p.source_address) != (family_of(dst_ip) or "IPv4"):
        raise src.error(
            (*path, "sourceAddress"),
            f"{p.source_address} is not an {family_of(dst_ip) or 'IPv4'} address: the probe travels to {dst_ip}",
        )
    if p.craft and (p.protocol or protocol) != "TCP":
        raise src.error((*path, "craft"), f"craft: {p.craft} acts on an established TCP connection; this probe is UDP")
    if p.craft and p.attempts != 1:
        raise src.error((*path, "attempts"), f"craft: {p.craft} holds one connection: leave attempts out")
    options = p.expect if isinstance(p.expect, list) else [p.expect]
    if p.attempts == 1 and (k := next((k for k, e in enumerate(options) if e.same_backend), None)) is not None:
        where = (*path, "expect", k) if isinstance(p.expect, list) else (*path, "expect")
        raise src.error((*where, "sameBackend"), "sameBackend compares several connections: give attempts: N")
    probes.append(
        ProbeSpec(
            name=p.name,
            source=p.source,
            target=target,
            dst_ip=dst_ip,
            dst_port=dst_port,
            protocol=p.protocol or protocol,
            expected=_expected(variant, path, p, topo, family_of(dst_ip) or "IPv4"),
            why=p.why,
            question=p.question or "",
            attempts=p.attempts,
            pause_ms=p.pause or 0,
            before=before,
            source_port=p.source_port or 0,
            craft=p.craft or "",
            source_address=p.source_address or "",
            keep_every=(p.every or DEFAULT_EVERY_MS) if p.keep else 0,
            size=p.size or 0,
            every_choice=_every_choice(p),
        )
    )
    if probes[-1].protocol == "TCP" and p.source_port and not p.source_address:
        _port_free(src, path, probes[-1], held)
    if p.keep:
        kept[p.name] = probes[-1]


def _port_free(
    src: Source, path: FieldPath, probe: ProbeSpec, held: dict[tuple[str, int, str, int], FieldPath]
) -> None:
    """Refuse a TCP connection from the port a kept connection to the same destination holds: the kernel gives
    a connection's addresses and ports to one socket only, so its connect() would fail (EADDRNOTAVAIL), where a
    real client cannot open it either. A kept flow is checked with `flow:`, which is what such a probe means."""
    four = (probe.source, probe.source_port, probe.dst_ip, probe.dst_port)
    holder = held.get(four)
    if holder is not None:
        name = src.data["probes"][holder[1]]["name"]
        raise src.error(
            (*path, "sourcePort"),
            f"TCP from {probe.source} port {probe.source_port} to {probe.dst_ip}:{probe.dst_port} is the connection "
            f"probe {name!r} (line {src.line_of(holder)}) keeps open: the kernel refuses a second connection with "
            f"the same addresses and ports; check that connection with `flow: {name}`, or give another sourcePort",
        )
    if probe.keep_every:
        held[four] = path


def _flow_check(
    variant: Variant,
    path: FieldPath,
    p: schema.Probe,
    topo: Topology,
    kept: dict[str, ProbeSpec],
    before: tuple[StepSpec, ...],
    now: Workload,
) -> ProbeSpec:
    """A probe checking the flow an earlier probe kept: that probe's source and destination."""
    src = variant.source
    opener = kept.get(p.flow or "")
    if opener is None:
        said = f"; the kept ones are {', '.join(sorted(kept))}" if kept else ""
        raise src.error((*path, "flow"), f"no earlier probe named {p.flow!r} keeps its flow (keep: true){said}")
    if gone := dict(now.deleted).get(opener.source):
        raise src.error(
            (*path, "flow"), f"the flow's source, pod {opener.source}, is deleted at line {src.line_of(gone)}"
        )
    return replace(
        opener,
        name=p.name,
        expected=_expected(variant, path, p, topo, opener.family),
        why=p.why,
        question=p.question or "",
        before=before,
        keep_every=0,
        flow=opener.name,
    )


def _source_has_family(src: Source, path: FieldPath, name: str, family: Family, topo: Topology) -> None:
    """The probe's source has an address of the family it travels in."""
    pod = next((q for q in topo.built_pods if q.name == name), None)
    node = next((n for n in topo.nodes if n.name == name), None)
    ext = next((e for e in topo.externals if e.name == name), None)
    own = pod.ips if pod else (node.ip, node.secondary_ip) if node else (ext.ip, ext.secondary_ip) if ext else ()
    if own and not of_family(family, *own):
        raise src.error((*path, "from"), f"{name} has no {family} address ({', '.join(a for a in own if a)})")


def _target(
    src: Source, path: FieldPath, to: schema.Target, topo: Topology, family: Family | None
) -> tuple[str, int, str, str]:
    """Where the probe connects (address, port, the protocol the port says) and how reports describe it, in the
    probe's family: the one written, the literal address's, or the Service's primary (the cluster's for a node)."""
    if to.address:
        stand_in = next((n.name for n in topo.stand_ins if to.address == n.ip), None)
        _not_a_stand_in(src, (*path, "address"), stand_in or "", topo, "its node IP answers nothing")
        if family and family_of(to.address) != family:
            raise src.error((*path, "address"), f"{to.address} is not an {family} address (family: {family})")
        return to.address, int(to.port), "TCP", f"{to.address}:{to.port}"
    node = None
    if to.node:
        _not_a_stand_in(src, (*path, "node"), to.node, topo, "nothing enters it")
        node = next((n for n in topo.nodes if n.name == to.node), None)
        if node is None:
            raise src.error((*path, "node"), f"unknown node {to.node!r}")
    if not to.service:
        assert node is not None
        return (
            _node_ip(src, path, node, family or topo.cluster.families[0]),
            int(to.port),
            "TCP",
            f"{node.name}:{to.port}",
        )
    svc = next((s for s in topo.services if s.name == to.service and s.namespace == to.namespace), None)
    if svc is None:
        raise src.error((*path, "service"), f"no Service {to.namespace}/{to.service} in the workload")
    port = svc.port(to.port)
    if port is None:
        known = ", ".join(f"{p.port}" + (f" ({p.name})" if p.name else "") for p in svc.ports)
        raise src.error((*path, "port"), f"Service {svc.name} has no port {to.port!r}; it has {known}")
    label = f"{svc.name}:{port.port} via {to.via}"
    family = family or svc.ip_families[0]
    dual = len(topo.cluster.families) > 1
    label += f" ({family})" if dual else ""
    if to.via == "clusterIP":
        if not (cluster_ip := svc.cluster_ip_of(family)):
            raise src.error(path, f"Service {svc.name} has no {family} clusterIP: its ipFamilies are {_listed(svc)}")
        return cluster_ip, port.port, port.protocol, label
    if to.via == "nodePort":
        if not port.node_port:
            raise src.error((*path, "via"), f"Service {svc.name} is {svc.type}: it has no NodePort")
        assert node is not None
        if family not in svc.ip_families:
            raise src.error(path, f"Service {svc.name} has no {family} NodePort: its ipFamilies are {_listed(svc)}")
        return _node_ip(src, path, node, family), port.node_port, port.protocol, f"{label} on {node.name}"
    vips = [ip for ip in (svc.external_ips if to.via == "externalIP" else svc.ingress_ips) if family_of(ip) == family]
    if not vips:
        raise src.error((*path, "via"), f"Service {svc.name} has no {family + ' ' if dual else ''}{to.via} address")
    return vips[0], port.port, port.protocol, f"{label} {vips[0]}"


def _listed(svc: ServiceSpec) -> str:
    return ", ".join(svc.ip_families)


def _not_a_stand_in(src: Source, path: FieldPath, name: str, topo: Topology, why: str) -> None:
    """Refuse a probe that would need a stand-in node to act as a node: it has no namespace, no kube-proxy and no
    rules of its own in the lab (docs/scenarios.md, "Stand-in nodes"); a probe may only end at its pods."""
    if any(n.name == name for n in topo.stand_ins):
        raise src.error(
            path,
            f"{name} is a stand-in node (standIn: true): the lab builds no node there, so {why}; probe from and "
            "through a built node (a probe may end at a stand-in's pods)",
        )


def _node_ip(src: Source, path: FieldPath, node: NodeSpec, family: Family) -> str:
    if not (ip := node.ip_of(family)):
        raise src.error(path, f"node {node.name} has no {family} address")
    return ip


def _expected(variant: Variant, path: FieldPath, probe: schema.Probe, topo: Topology, family: Family) -> Expected:
    """The first expectation whose `when` this variant matches, its names resolved to their addresses of the
    probe's `family`."""
    options = probe.expect if isinstance(probe.expect, list) else [probe.expect]
    for k, e in enumerate(options):
        epath: FieldPath = (*path, "expect", k) if isinstance(probe.expect, list) else (*path, "expect")
        if variant.applies(epath, e.when):
            if e.affinity is not None:
                _affinity_judgeable(variant.source, (*epath, "affinity"), probe.attempts, topo)
            chosen = _expectation(variant.source, epath, e, topo, family)
            if any(KERNEL in o.when for o in options):  # the expectation depends on the kernel: the verdict names it
                written = e.when.get(KERNEL)
                said = ", which is " + " and ".join(written if isinstance(written, list) else [str(written)])
                return replace(chosen, kernel=f"{variant.kernel or 'none'}{said if written else ''}")
            return chosen
    raise variant.source.error(
        (*path, "expect"), f"no expectation applies to variant {topo.variant_label}; add one without `when`"
    )


def _expectation(src: Source, path: FieldPath, e: schema.Expectation, topo: Topology, family: Family) -> Expected:
    """An expectation whose names (backends, node, entries, source) are the topology's; the source resolved to an
    address unless it depends on the entry node."""
    # A backend is a pod, or an external host a hand-written EndpointSlice names.
    known = {p.name for p in topo.built_pods} | {
        ep.pod for s in topo.services for port in s.ports for ep in port.endpoints
    }
    written = [e.backend] if isinstance(e.backend, str) else e.backend or []
    backends = tuple(_backend(src, (*path, "backend"), b, topo, known) for b in written)
    nodes = [n.name for n in topo.nodes]
    if e.node and e.node not in nodes and e.node != ENTRY:
        raise src.error((*path, "node"), f"unknown node {e.node!r}")
    if e.node == ENTRY and ENTRY in nodes:
        raise src.error(
            (*path, "node"),
            f"{ENTRY!r} is the node the connection entered through, and also the node {ENTRY}: the lab "
            "cannot tell which is meant",
        )
    entries = node_names(src, (*path, "entries"), e.entries, topo.nodes)
    source = source_ip = local = remote = None
    if isinstance(e.source, schema.SourceByPlacement):
        _source_name(src, (*path, "source", "local"), e.source.local, topo, family)
        _source_name(src, (*path, "source", "remote"), e.source.remote, topo, family)
        local, remote = e.source.local, e.source.remote
        source = f"{local} (backend on the entry node) or {remote} (elsewhere)"
    elif e.source:
        source, source_ip = e.source, _source_name(src, (*path, "source"), e.source, topo, family)
    if e.outcome == schema.OBSERVE:
        if backends or e.node or e.source or e.entries or e.same_backend or e.affinity is not None:
            raise src.error(
                (*path, "outcome"),
                "observe accepts whatever happens: backend, node, source, entries, sameBackend "
                "and affinity go with an outcome the probe must have",
            )
        return Expected("delivered", also=tuple(o for o in get_args(schema.Outcome) if o != "delivered"), observe=True)
    first, *also = e.outcome if isinstance(e.outcome, list) else [e.outcome]
    if first != "delivered" and (backends or e.node or e.source or e.same_backend or e.affinity is not None):
        raise src.error(
            (*path, "outcome"), "backend, node, source, sameBackend and affinity only make sense when delivered"
        )
    return Expected(
        first, backends, e.node, source, source_ip, local, remote, entries, e.same_backend, e.affinity, tuple(also)
    )


def _backend(src: Source, path: FieldPath, name: str, topo: Topology, known: set[str]) -> str:
    """The lab's name of a backend: a pod (NAMESPACE/NAME or NAME), or an external host a slice names."""
    pod = pod_named(src, path, name, topo)
    if pod is not None:
        return pod.name
    if name not in known:
        raise src.error(path, f"unknown pod {name!r}; expected one of {', '.join(sorted(known))}")
    return name


def _affinity_judgeable(src: Source, path: FieldPath, attempts: int, topo: Topology) -> None:
    """`affinity:` is judged from the rule that looks the client up in kube-proxy's affinity state, which the
    iptables and nftables modes have and ipvs (connection templates) has not."""
    if attempts == 1:
        raise src.error(path, "affinity is judged on the attempts after the first: give attempts: N")
    if topo.cluster.proxy_mode == "ipvs":
        raise src.error(
            path,
            "ipvs keeps ClientIP affinity in its connection templates, not in a rule the lab sees a packet meet: "
            "judge it there with sameBackend (give this variant its own expectation with when: {proxyMode: ipvs})",
        )


def _every_choice(p: schema.Probe) -> bool:
    """A probe without `attempts` whose every connection is a new one from a port of the kernel's choosing: the
    draw of a load-balancing rule may differ each time, so it is sent until each endpoint has been drawn. A fixed
    source port, a kept or checked flow, a crafted segment or a spoofed source is one flow by design."""
    one_flow = p.source_port or p.keep or p.flow or p.craft or p.source_address
    return "attempts" not in p.model_fields_set and not one_flow


def _device_suffixes(cni: str) -> tuple[str, ...]:
    """The devices of a node besides eth0 whose address a source may be named by: cni0 (bridge, flannel), the
    tunnel device (routed-tunnel, flannel)."""
    bridge = ("/cni0",) if cni != "routed-tunnel" else ()
    tunnel = (f"/{tunnel_name(cni)}",) if cni != "bridge" else ()
    return bridge + tunnel


def _named_once(src: Source, path: FieldPath, name: str, topo: Topology) -> None:
    """Refuse a source name that two addresses of one family bear: the lab's own words are names a user may give
    too (the underlay's `gateway` and a pod named gateway, a load balancer named as a node)."""
    by_family: dict[Family, list[str]] = {}
    for ip, named in topo.address_names().items():
        if named == name:
            by_family.setdefault(family_of(ip) or "IPv4", []).append(ip)
    if clash := next((ips for ips in by_family.values() if len(ips) > 1), None):
        raise src.error(path, f"{name!r} names more than one address ({', '.join(clash)}): write the one meant")


def _entry_named_once(src: Source, path: FieldPath, topo: Topology) -> None:
    """Refuse a source named after `entry` (the node the connection entered through) where an actor of the
    scenario is named so."""
    hosts = {n.name: "node" for n in (*topo.nodes, *topo.stand_ins)} | {e.name: "external host" for e in topo.externals}
    if (kind := hosts.get(ENTRY)) is not None:
        raise src.error(
            path,
            f"{ENTRY!r} is the node the connection entered through, and also the {kind} {ENTRY}: write the "
            f"{kind}'s address",
        )
    if (pod := next((p for p in topo.built_pods if p.name == ENTRY), None)) is not None:
        raise src.error(
            path,
            f"{ENTRY!r} is the node the connection entered through, and also a pod: write {pod.namespace}/{ENTRY} "
            "for the pod",
        )


def _source_name(src: Source, path: FieldPath, name: str, topo: Topology, family: Family) -> str | None:
    """The address of a source name, of the probe's family where the name has one; None for a name relative to
    the entry node (checked here)."""
    if (suffix := entry_suffix(name)) is not None:
        allowed = {"", "/eth0", *_device_suffixes(topo.cluster.cni)}
        if suffix not in allowed:
            raise src.error(path, f"{name!r}: expected one of {', '.join(sorted(ENTRY + a for a in allowed))}")
        _entry_named_once(src, path, topo)
        return None
    _named_once(src, path, name, topo)
    if (pod := pod_named(src, path, name, topo)) is not None and not pod.host_network:
        return of_family(family, *pod.ips) or pod.ip
    if (address := topo.address_of(name, family)) is not None:
        return address
    try:
        return canonical_ip(name)
    except AddressError:
        devices = ", ".join(f"node{suffix}" for suffix in ("/eth0", *_device_suffixes(topo.cluster.cni)))
        raise src.error(
            path,
            f"{name!r} is neither an address nor a known name (a pod, node, {devices}, "
            f"external host, or {ENTRY}, {ENTRY}/...: the node the connection entered through)",
        ) from None
