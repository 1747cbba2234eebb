"""describe: a scenario file in, one checked Topology per matrix variant out."""

from __future__ import annotations

import ipaddress
import shlex
from dataclasses import dataclass
from pathlib import Path

from lab.model import schema
from lab.model.resolve.actors import gateway_routes, resolve_egress, resolve_load_balancers, resolve_masq_agent
from lab.model.resolve.checks import node_names, unique
from lab.model.resolve.cluster import resolve_cluster
from lab.model.resolve.matrix import Variant, expand
from lab.model.resolve.network import resolve_externals, resolve_nodes
from lab.model.resolve.parse import check_manifests, parse
from lab.model.resolve.workload import resolve_pods, resolve_services
from lab.model.topology import (
    ENTRY,
    TUNNEL_NAME,
    Axis,
    Expected,
    ProbeSpec,
    StepSpec,
    Topology,
)
from lab.model.yamlsrc import FieldPath, load_yaml


@dataclass(frozen=True)
class Scenario:
    name: str
    file: str
    description: str
    variants: tuple[Topology, ...]


def load_scenario(path: Path | str, matrix: dict[str, list[Axis]] | None = None) -> Scenario:
    """Load, check and expand a scenario; `matrix` adds or replaces axes (e.g. proxyMode from the command line)."""
    source = load_yaml(path)
    if not isinstance(source.data, dict):
        raise source.error((), "expected a mapping with `name`, `nodes`, `workload` and `probes`")
    check_manifests(source)
    base = parse(source)
    variants = [
        _Resolver(v, parse(v.source) if v.values else base).topology()
        for v in expand(source, base.matrix, matrix or {})
    ]
    return Scenario(base.name, source.file, base.description, tuple(variants))


class _Resolver:
    """Binds every name to an address, reporting the first inconsistency with its line."""

    def __init__(self, variant: Variant, parsed: schema.ScenarioFile) -> None:
        self.src = variant.source
        self.f = parsed
        self.variant = variant

    def topology(self) -> Topology:
        cluster = resolve_cluster(self.src, self.f.cluster)
        nodes = resolve_nodes(self.src, self.f.nodes, cluster)
        externals = resolve_externals(self.src, self.f.external_hosts, cluster, nodes)
        pods = resolve_pods(self.src, self.f.workload, cluster, nodes)
        services = resolve_services(self.src, self.f.workload, cluster, pods)
        egress = resolve_egress(self.src, self.f.egress_gateway, cluster, nodes)
        balancers = resolve_load_balancers(self.src, self.f.load_balancers, cluster, nodes, externals, services, egress)
        topo = Topology(
            scenario=self.f.name,
            file=self.src.file,
            variant=self.variant.values,
            cluster=cluster,
            nodes=nodes,
            pods=pods,
            externals=externals,
            services=services,
            probes=(),
            description=self.f.description,
            lb_routes=gateway_routes(nodes, services, balancers),
            load_balancers=balancers,
            egress=egress,
            masq_agent=resolve_masq_agent(self.src, self.f.ip_masq_agent, nodes),
        )
        return Topology(**{**topo.__dict__, "probes": self._probes(topo)})

    def _probes(self, topo: Topology) -> tuple[ProbeSpec, ...]:
        actors = {p.name for p in topo.pods} | {n.name for n in topo.nodes} | {e.name for e in topo.externals}
        probes = []
        for i, p in enumerate(self.f.probes):
            path: FieldPath = ("probes", i)
            if p.source not in actors:
                raise self.src.error(
                    (*path, "from"),
                    f"unknown pod, node or external host {p.source!r}; expected one of {', '.join(sorted(actors))}",
                )
            dst_ip, dst_port, protocol, target = self._target((*path, "to"), p.to, topo)
            probes.append(
                ProbeSpec(
                    name=p.name,
                    source=p.source,
                    target=target,
                    dst_ip=dst_ip,
                    dst_port=dst_port,
                    protocol=p.protocol or protocol,
                    expected=self._expected(path, p, topo),
                    why=p.why,
                    attempts=p.attempts,
                    before=self._steps(path, p, topo),
                )
            )
        unique(self.src, "probe name", [(("probes", i, "name"), p.name) for i, p in enumerate(probes)])
        return tuple(probes)

    def _target(self, path: FieldPath, to: schema.Target, topo: Topology) -> tuple[str, int, str, str]:
        if to.address:
            return to.address, int(to.port), "TCP", f"{to.address}:{to.port}"
        node = None
        if to.node:
            node = next((n for n in topo.nodes if n.name == to.node), None)
            if node is None:
                raise self.src.error((*path, "node"), f"unknown node {to.node!r}")
        if not to.service:
            assert node is not None
            return node.ip, int(to.port), "TCP", f"{node.name}:{to.port}"
        svc = next((s for s in topo.services if s.name == to.service and s.namespace == to.namespace), None)
        if svc is None:
            raise self.src.error((*path, "service"), f"no Service {to.namespace}/{to.service} in the workload")
        port = svc.port(to.port)
        if port is None:
            known = ", ".join(f"{p.port}" + (f" ({p.name})" if p.name else "") for p in svc.ports)
            raise self.src.error((*path, "port"), f"Service {svc.name} has no port {to.port!r}; it has {known}")
        label = f"{svc.name}:{port.port} via {to.via}"
        if to.via == "clusterIP":
            return svc.cluster_ip, port.port, port.protocol, label
        if to.via == "nodePort":
            if not port.node_port:
                raise self.src.error((*path, "via"), f"Service {svc.name} is {svc.type}: it has no NodePort")
            assert node is not None
            return node.ip, port.node_port, port.protocol, f"{label} on {node.name}"
        vips = svc.external_ips if to.via == "externalIP" else svc.ingress_ips
        if not vips:
            raise self.src.error((*path, "via"), f"Service {svc.name} has no {to.via} address")
        return vips[0], port.port, port.protocol, f"{label} {vips[0]}"

    def _applies(self, path: FieldPath, item: schema.Conditional) -> bool:
        return self.variant.applies(path, item.when)

    def _expected(self, path: FieldPath, probe: schema.Probe, topo: Topology) -> Expected:
        options = probe.expect if isinstance(probe.expect, list) else [probe.expect]
        for k, e in enumerate(options):
            epath: FieldPath = (*path, "expect", k) if isinstance(probe.expect, list) else (*path, "expect")
            if self._applies(epath, e):
                return self._expectation(epath, e, topo)
        raise self.src.error(
            (*path, "expect"), f"no expectation applies to variant {topo.variant_label}; add one without `when`"
        )

    def _steps(self, path: FieldPath, probe: schema.Probe, topo: Topology) -> tuple[StepSpec, ...]:
        steps = []
        for k, step in enumerate(probe.before):
            spath: FieldPath = (*path, "before", k)
            if not self._applies(spath, step):
                continue
            if step.delete is not None:
                steps.append(StepSpec(delete_service=self._deleted_service((*spath, "delete"), step.delete, topo)))
                continue
            assert step.run is not None
            try:
                argv = tuple(shlex.split(step.run))
            except ValueError as exc:
                raise self.src.error((*spath, "run"), f"cannot split the command line: {exc}") from None
            if not argv:
                raise self.src.error((*spath, "run"), "expected a command, e.g. `ip addr del 10.0.0.1/32 dev eth0`")
            nodes = node_names(self.src, (*spath, "nodes"), step.nodes, topo.nodes) or tuple(n.name for n in topo.nodes)
            steps.append(StepSpec(argv=argv, nodes=nodes))
        return tuple(steps)

    def _deleted_service(self, path: FieldPath, text: str, topo: Topology) -> tuple[str, str]:
        kind, _, rest = text.partition("/")
        namespace, _, name = rest.rpartition("/")
        if kind != "Service" or not name:
            raise self.src.error(path, f"expected Service/NAME or Service/NAMESPACE/NAME, got {text!r}")
        wanted = (namespace or "default", name)
        if wanted not in {(s.namespace, s.name) for s in topo.services}:
            known = ", ".join(f"{s.namespace}/{s.name}" for s in topo.services)
            raise self.src.error(path, f"no Service {'/'.join(wanted)} in the workload; it has {known}")
        return wanted

    def _source_name(self, path: FieldPath, name: str, topo: Topology) -> str | None:
        """The address of a source name; None for a name relative to the entry node (checked here)."""
        if name == ENTRY or name.startswith(ENTRY + "/"):
            suffix = name[len(ENTRY) :]
            allowed = {"", "/eth0", "/cni0" if topo.cluster.cni == "bridge" else f"/{TUNNEL_NAME}"}
            if suffix not in allowed:
                raise self.src.error(path, f"{name!r}: expected one of {', '.join(sorted(ENTRY + a for a in allowed))}")
            return None
        by_name = {n: ip for ip, n in topo.address_names().items()}
        by_name.update({f"{n.name}/eth0": n.ip for n in topo.nodes})
        if name in by_name:
            return by_name[name]
        try:
            return str(ipaddress.IPv4Address(name))
        except ValueError:
            tunnel = f", node/{TUNNEL_NAME}" if topo.cluster.cni == "routed-tunnel" else ""
            raise self.src.error(
                path,
                f"{name!r} is neither an address nor a known name (a pod, node, node/cni0, node/eth0{tunnel}, "
                f"external host, or {ENTRY}, {ENTRY}/...: the node the connection entered through)",
            ) from None

    def _expectation(self, path: FieldPath, e: schema.Expectation, topo: Topology) -> Expected:
        pods = {p.name for p in topo.pods}
        backends = tuple([e.backend] if isinstance(e.backend, str) else e.backend or [])
        for b in backends:
            if b not in pods:
                raise self.src.error(
                    (*path, "backend"), f"unknown pod {b!r}; expected one of {', '.join(sorted(pods))}"
                )
        nodes = [n.name for n in topo.nodes]
        if e.node and e.node not in nodes and e.node != ENTRY:
            raise self.src.error((*path, "node"), f"unknown node {e.node!r}")
        entries = node_names(self.src, (*path, "entries"), e.entries, topo.nodes)
        source = source_ip = local = remote = None
        if isinstance(e.source, schema.SourceByPlacement):
            self._source_name((*path, "source", "local"), e.source.local, topo)
            self._source_name((*path, "source", "remote"), e.source.remote, topo)
            local, remote = e.source.local, e.source.remote
            source = f"{local} (backend on the entry node) or {remote} (elsewhere)"
        elif e.source:
            source, source_ip = e.source, self._source_name((*path, "source"), e.source, topo)
        if e.outcome != "delivered" and (backends or e.node or e.source):
            raise self.src.error((*path, "outcome"), "backend, node and source only make sense when delivered")
        return Expected(e.outcome, backends, e.node, source, source_ip, local, remote, entries)
