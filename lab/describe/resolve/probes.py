"""The probes, against the resolved fabric and workload: each one's source actor, destination (an address, a
node's port, or a Service's port via clusterIP, NodePort, externalIP or load balancer IP), the expectation and
the steps before it that apply to this variant (their `when`)."""

from __future__ import annotations

import ipaddress
from dataclasses import replace

from lab.describe import schema
from lab.describe.kernel_when import KERNEL
from lab.describe.resolve.checks import node_names, unique
from lab.describe.resolve.matrix import Variant
from lab.describe.resolve.steps import Workload, resolve_steps
from lab.describe.topology import ENTRY, TUNNEL_NAME, Expected, ProbeSpec, ServiceSpec, StepSpec, Topology
from lab.describe.yamlsrc import FieldPath, Source

DEFAULT_EVERY_MS = 200  # a kept flow's exchange interval unless `every:` says


def resolve_probes(
    variant: Variant, declared: list[schema.Probe], topo: Topology, potential: tuple[ServiceSpec, ...]
) -> tuple[ProbeSpec, ...]:
    """Every probe of the file; `topo` is this variant's topology without them, `potential` its Services as if
    every built pod ran (where a scale-up's new replicas find their endpoints)."""
    src = variant.source
    actors = {p.name for p in topo.built_pods} | {n.name for n in topo.nodes} | {e.name for e in topo.externals}
    probes = []
    now = Workload(topo.pods, topo.services, pending=topo.pending_pods, potential=potential)
    kept: dict[str, ProbeSpec] = {}
    for i, p in enumerate(declared):
        path: FieldPath = ("probes", i)
        before, now = resolve_steps(variant, path, p, topo, now)
        if p.flow is not None:
            probes.append(_flow_check(variant, path, p, topo, kept, before, now))
            continue
        assert p.source is not None and p.to is not None  # the schema's check: from and to, or flow
        if gone := dict(now.deleted).get(p.source):
            raise src.error(
                (*path, "from"), f"pod {p.source} is deleted at line {src.line_of(gone)}, before this probe"
            )
        if p.source in {q.name for q in now.pending}:
            raise src.error((*path, "from"), f"pod {p.source} is created by a later scale step, not yet here")
        if p.source not in actors:
            raise src.error(
                (*path, "from"),
                f"unknown pod, node or external host {p.source!r}; expected one of {', '.join(sorted(actors))}",
            )
        dst_ip, dst_port, protocol, target = _target(src, (*path, "to"), p.to, topo)
        if p.craft and (p.protocol or protocol) != "TCP":
            raise src.error(
                (*path, "craft"), f"craft: {p.craft} acts on an established TCP connection; this probe is UDP"
            )
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
                expected=_expected(variant, path, p, topo),
                why=p.why,
                attempts=p.attempts,
                pause_ms=p.pause or 0,
                before=before,
                source_port=p.source_port or 0,
                craft=p.craft or "",
                source_address=p.source_address or "",
                keep_every=(p.every or DEFAULT_EVERY_MS) if p.keep else 0,
            )
        )
        if p.keep:
            kept[p.name] = probes[-1]
    unique(src, "probe name", [(("probes", i, "name"), p.name) for i, p in enumerate(probes)])
    return tuple(probes)


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
        expected=_expected(variant, path, p, topo),
        why=p.why,
        before=before,
        keep_every=0,
        flow=opener.name,
    )


def _target(src: Source, path: FieldPath, to: schema.Target, topo: Topology) -> tuple[str, int, str, str]:
    """Where the probe connects (address, port, the protocol the port says) and how reports describe it."""
    if to.address:
        return to.address, int(to.port), "TCP", f"{to.address}:{to.port}"
    node = None
    if to.node:
        node = next((n for n in topo.nodes if n.name == to.node), None)
        if node is None:
            raise src.error((*path, "node"), f"unknown node {to.node!r}")
    if not to.service:
        assert node is not None
        return node.ip, int(to.port), "TCP", f"{node.name}:{to.port}"
    svc = next((s for s in topo.services if s.name == to.service and s.namespace == to.namespace), None)
    if svc is None:
        raise src.error((*path, "service"), f"no Service {to.namespace}/{to.service} in the workload")
    port = svc.port(to.port)
    if port is None:
        known = ", ".join(f"{p.port}" + (f" ({p.name})" if p.name else "") for p in svc.ports)
        raise src.error((*path, "port"), f"Service {svc.name} has no port {to.port!r}; it has {known}")
    label = f"{svc.name}:{port.port} via {to.via}"
    if to.via == "clusterIP":
        return svc.cluster_ip, port.port, port.protocol, label
    if to.via == "nodePort":
        if not port.node_port:
            raise src.error((*path, "via"), f"Service {svc.name} is {svc.type}: it has no NodePort")
        assert node is not None
        return node.ip, port.node_port, port.protocol, f"{label} on {node.name}"
    vips = svc.external_ips if to.via == "externalIP" else svc.ingress_ips
    if not vips:
        raise src.error((*path, "via"), f"Service {svc.name} has no {to.via} address")
    return vips[0], port.port, port.protocol, f"{label} {vips[0]}"


def _expected(variant: Variant, path: FieldPath, probe: schema.Probe, topo: Topology) -> Expected:
    """The first expectation whose `when` this variant matches."""
    options = probe.expect if isinstance(probe.expect, list) else [probe.expect]
    for k, e in enumerate(options):
        epath: FieldPath = (*path, "expect", k) if isinstance(probe.expect, list) else (*path, "expect")
        if variant.applies(epath, e.when):
            if e.affinity is not None:
                _affinity_judgeable(variant.source, (*epath, "affinity"), probe.attempts, topo)
            chosen = _expectation(variant.source, epath, e, topo)
            if any(KERNEL in o.when for o in options):  # the expectation depends on the kernel: the verdict names it
                written = e.when.get(KERNEL)
                said = ", which is " + " and ".join(written if isinstance(written, list) else [str(written)])
                return replace(chosen, kernel=f"{variant.kernel or 'none'}{said if written else ''}")
            return chosen
    raise variant.source.error(
        (*path, "expect"), f"no expectation applies to variant {topo.variant_label}; add one without `when`"
    )


def _expectation(src: Source, path: FieldPath, e: schema.Expectation, topo: Topology) -> Expected:
    """An expectation whose names (backends, node, entries, source) are the topology's; the source resolved to an
    address unless it depends on the entry node."""
    # A backend is a pod, or an external host a hand-written EndpointSlice names.
    known = {p.name for p in topo.built_pods} | {
        ep.pod for s in topo.services for port in s.ports for ep in port.endpoints
    }
    backends = tuple([e.backend] if isinstance(e.backend, str) else e.backend or [])
    for b in backends:
        if b not in known:
            raise src.error((*path, "backend"), f"unknown pod {b!r}; expected one of {', '.join(sorted(known))}")
    nodes = [n.name for n in topo.nodes]
    if e.node and e.node not in nodes and e.node != ENTRY:
        raise src.error((*path, "node"), f"unknown node {e.node!r}")
    entries = node_names(src, (*path, "entries"), e.entries, topo.nodes)
    source = source_ip = local = remote = None
    if isinstance(e.source, schema.SourceByPlacement):
        _source_name(src, (*path, "source", "local"), e.source.local, topo)
        _source_name(src, (*path, "source", "remote"), e.source.remote, topo)
        local, remote = e.source.local, e.source.remote
        source = f"{local} (backend on the entry node) or {remote} (elsewhere)"
    elif e.source:
        source, source_ip = e.source, _source_name(src, (*path, "source"), e.source, topo)
    first, *also = e.outcome if isinstance(e.outcome, list) else [e.outcome]
    if first != "delivered" and (backends or e.node or e.source or e.same_backend or e.affinity is not None):
        raise src.error(
            (*path, "outcome"), "backend, node, source, sameBackend and affinity only make sense when delivered"
        )
    return Expected(
        first, backends, e.node, source, source_ip, local, remote, entries, e.same_backend, e.affinity, tuple(also)
    )


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


def _source_name(src: Source, path: FieldPath, name: str, topo: Topology) -> str | None:
    """The address of a source name; None for a name relative to the entry node (checked here)."""
    if name == ENTRY or name.startswith(ENTRY + "/"):
        suffix = name[len(ENTRY) :]
        allowed = {"", "/eth0", "/cni0" if topo.cluster.cni == "bridge" else f"/{TUNNEL_NAME}"}
        if suffix not in allowed:
            raise src.error(path, f"{name!r}: expected one of {', '.join(sorted(ENTRY + a for a in allowed))}")
        return None
    by_name = {n: ip for ip, n in topo.address_names().items()}
    by_name.update({f"{n.name}/eth0": n.ip for n in topo.nodes})
    if name in by_name:
        return by_name[name]
    try:
        return str(ipaddress.IPv4Address(name))
    except ValueError:
        tunnel = f", node/{TUNNEL_NAME}" if topo.cluster.cni == "routed-tunnel" else ""
        raise src.error(
            path,
            f"{name!r} is neither an address nor a known name (a pod, node, node/cni0, node/eth0{tunnel}, "
            f"external host, or {ENTRY}, {ENTRY}/...: the node the connection entered through)",
        ) from None
