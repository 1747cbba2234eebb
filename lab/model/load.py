"""describe: a scenario file in, one checked Topology per matrix variant out."""

from __future__ import annotations

import ipaddress
import itertools
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from lab.model import k8s, schema
from lab.model.resolve.checks import disjoint, hosts, inside, node_names, unique
from lab.model.resolve.cluster import honours_ip_mode, resolve_cluster
from lab.model.resolve.matrix import Variant, expand
from lab.model.resolve.network import resolve_externals, resolve_nodes
from lab.model.resolve.parse import check_manifests, parse
from lab.model.topology import (
    ENTRY,
    TUNNEL_NAME,
    Axis,
    ClusterSpec,
    EgressSpec,
    EndpointSpec,
    Expected,
    ExternalSpec,
    FrontendSpec,
    LoadBalancerSpec,
    MasqAgentSpec,
    NodeSpec,
    PodSpec,
    PortSpec,
    ProbeSpec,
    ServicePortSpec,
    ServiceSpec,
    StepSpec,
    Topology,
)
from lab.model.yamlsrc import FieldPath, load_yaml

NODE_PORT_RANGE = range(30000, 32768)


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
    variants = tuple(
        _Resolver(v, parse(v.source) if v.values else base).topology()
        for v in expand(source, base.matrix, matrix or {})
    )
    return Scenario(base.name, source.file, base.description, variants)


class _PodPlan(NamedTuple):
    """A pod the workload asks for, placed on its node, before it has an address."""

    path: FieldPath  # its manifest (a Pod, or the Deployment or ReplicaSet it is a replica of)
    name: str
    namespace: str
    node: NodeSpec
    labels: dict[str, str]
    spec: k8s.PodSpec
    ip: str | None = None  # status.podIP
    ready: bool = True


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
        pods = self._pods(cluster, nodes)
        services = self._services(cluster, nodes, pods)
        egress = self._egress(cluster, nodes)
        balancers = self._load_balancers(cluster, nodes, externals, services, egress)
        claimed = {f.vip for lb in balancers for f in lb.frontends}
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
            lb_routes=tuple(r for r in self._lb_routes(nodes, services) if r[0] not in claimed),
            load_balancers=balancers,
            egress=egress,
            masq_agent=self._masq_agent(nodes),
        )
        return Topology(**{**topo.__dict__, "probes": self._probes(topo)})

    def _place(self, path: FieldPath, spec: k8s.PodSpec, nodes: tuple[NodeSpec, ...]) -> list[NodeSpec]:
        if spec.node_name:
            match = [n for n in nodes if n.name == spec.node_name]
            if not match:
                known = ", ".join(n.name for n in nodes)
                raise self.src.error((*path, "nodeName"), f"unknown node {spec.node_name!r}; expected one of {known}")
            return match
        match = [n for n in nodes if set(spec.node_selector.items()) <= set(n.labels)]
        if not match:
            raise self.src.error((*path, "nodeSelector"), f"{spec.node_selector} matches no node's labels")
        return match

    def _pods(self, cluster: ClusterSpec, nodes: tuple[NodeSpec, ...]) -> tuple[PodSpec, ...]:
        wanted: list[_PodPlan] = []
        for i, m in enumerate(self.f.workload):
            path: FieldPath = ("workload", i)
            if isinstance(m, k8s.Pod):
                node = self._place((*path, "spec"), m.spec, nodes)[0]
                meta, status = m.metadata, m.status
                wanted.append(
                    _PodPlan(path, meta.name, meta.namespace, node, meta.labels, m.spec, status.pod_ip, status.ready)
                )
            elif isinstance(m, k8s.Deployment):
                tpl = m.spec.template
                if not set(m.spec.selector.match_labels.items()) <= set(tpl.metadata.labels.items()):
                    raise self.src.error((*path, "spec", "selector"), "selector does not match the template's labels")
                placed = self._place((*path, "spec", "template", "spec"), tpl.spec, nodes)
                for r in range(m.spec.replicas):
                    node = placed[r % len(placed)]
                    name = f"{m.metadata.name}-{r}"
                    wanted.append(_PodPlan(path, name, m.metadata.namespace, node, tpl.metadata.labels, tpl.spec))
        addresses = self._pod_addresses(wanted, nodes, cluster)
        pods = []
        for w, address in zip(wanted, addresses, strict=True):
            ports = tuple(PortSpec(p.container_port, p.protocol, p.name) for c in w.spec.containers for p in c.ports)
            labels = tuple(sorted(w.labels.items()))
            pods.append(PodSpec(w.name, w.namespace, w.node.name, address, labels, ports, w.spec.host_network, w.ready))
        unique(self.src, "pod name", [(w.path, f"{w.namespace}/{w.name}") for w in wanted])
        return tuple(pods)

    def _pod_addresses(self, wanted: list[_PodPlan], nodes: tuple[NodeSpec, ...], cluster: ClusterSpec) -> list[str]:
        """Each pod's address: its node's with hostNetwork, else status.podIP, else the next free one in its node's
        podCIDR."""
        given: dict[str, FieldPath] = {}
        for w in wanted:
            if w.ip and not w.spec.host_network:
                self._check_pod_ip((*w.path, "status", "podIP"), w.ip, w.node, given)
                given[w.ip] = (*w.path, "status", "podIP")
        # The bridge takes the block's first host address; routed-tunnel's tunnel device takes the network address.
        skip = 0 if cluster.cni == "routed-tunnel" else 1
        free = {n.name: (a for a in itertools.islice(hosts(n.pod_cidr), skip, None) if a not in given) for n in nodes}
        addresses = []
        for w in wanted:
            address = w.node.ip if w.spec.host_network else w.ip or next(free[w.node.name], None)
            if address is None:
                room = sum(1 for _ in itertools.islice(hosts(w.node.pod_cidr), skip, None))
                placed = sum(1 for o in wanted if o.node == w.node and not o.spec.host_network)
                raise self.src.error(
                    w.path,
                    f"{w.node.name}'s podCIDR {w.node.pod_cidr} has room for {room} pods, and {placed} are placed "
                    f"there; no address is left for {w.name} (give {w.node.name} a larger podCIDR)",
                )
            addresses.append(address)
        return addresses

    def _check_pod_ip(self, path: FieldPath, ip: str, node: NodeSpec, given: dict[str, FieldPath]) -> None:
        net = ipaddress.IPv4Network(node.pod_cidr)
        if not inside(ip, node.pod_cidr):
            raise self.src.error(path, f"{ip} is outside {node.name}'s podCIDR {node.pod_cidr}")
        if ip in given:
            raise self.src.error(path, f"{ip} is already a pod's podIP at line {self.src.line_of(given[ip])}")
        if ip in (str(net.network_address), str(net.broadcast_address), node.bridge_ip, node.tunnel_ip):
            raise self.src.error(
                path, f"{ip} is reserved in {node.pod_cidr}: network, broadcast or {node.name}'s own (cni0, tunnel)"
            )

    def _services(
        self, cluster: ClusterSpec, nodes: tuple[NodeSpec, ...], pods: tuple[PodSpec, ...]
    ) -> tuple[ServiceSpec, ...]:
        manifests = [(i, m) for i, m in enumerate(self.f.workload) if isinstance(m, k8s.Service)]
        taken_ips = {m.spec.cluster_ip for _, m in manifests if m.spec.cluster_ip}
        free_ips = (ip for ip in itertools.islice(hosts(cluster.service_cidr), 9, None) if ip not in taken_ips)
        taken_ports = {p.node_port for _, m in manifests for p in m.spec.ports if p.node_port}
        taken_ports |= {m.spec.health_check_node_port for _, m in manifests if m.spec.health_check_node_port}
        free_ports = (p for p in NODE_PORT_RANGE if p not in taken_ports)
        services = []
        for i, m in manifests:
            path: FieldPath = ("workload", i, "spec")
            spec = m.spec
            cluster_ip = spec.cluster_ip or next(free_ips)
            if not inside(cluster_ip, cluster.service_cidr):
                raise self.src.error(
                    (*path, "clusterIP"), f"{cluster_ip} is outside serviceCIDR {cluster.service_cidr}"
                )
            selected = [
                p
                for p in pods
                if p.namespace == m.metadata.namespace and spec.selector and set(spec.selector.items()) <= set(p.labels)
            ]
            if not selected:
                raise self.src.error(
                    (*path, "selector"), f"{spec.selector or '{}'} selects no pod in namespace {m.metadata.namespace!r}"
                )
            external = spec.type != "ClusterIP"
            ports = []
            for j, p in enumerate(spec.ports):
                self._check_node_port((*path, "ports", j, "nodePort"), p.node_port)
                node_port = (p.node_port or next(free_ports)) if external else 0
                eps = self._endpoints((*path, "ports", j), p, selected)
                ports.append(ServicePortSpec(p.name, p.port, p.protocol, node_port, eps))
            ingress = [ing.ip for ing in m.status.load_balancer.ingress]
            lb_ips = [
                ing.ip for ing in m.status.load_balancer.ingress if ing.ip_mode == "VIP" or not honours_ip_mode(cluster)
            ]
            if spec.load_balancer_ip and not ingress:
                lb_ips = ingress = [spec.load_balancer_ip]
            if ingress and spec.type != "LoadBalancer":
                raise self.src.error((*path, "type"), "a load balancer IP needs `type: LoadBalancer`")
            for k, ip in enumerate(spec.external_ips + ingress):
                if inside(ip, cluster.service_cidr) or inside(ip, cluster.cluster_cidr):
                    raise self.src.error((*path, "externalIPs", k), f"{ip} is inside the cluster's own networks")
            self._check_node_port((*path, "healthCheckNodePort"), spec.health_check_node_port)
            local_lb = spec.type == "LoadBalancer" and spec.external_traffic_policy == "Local"
            hcnp = (spec.health_check_node_port or next(free_ports)) if local_lb else 0
            services.append(
                ServiceSpec(
                    name=m.metadata.name,
                    namespace=m.metadata.namespace,
                    type=spec.type,
                    cluster_ip=cluster_ip,
                    ports=tuple(ports),
                    external_ips=tuple(spec.external_ips),
                    load_balancer_ips=tuple(lb_ips),
                    load_balancer_source_ranges=tuple(spec.load_balancer_source_ranges),
                    external_policy=spec.external_traffic_policy,
                    internal_policy=spec.internal_traffic_policy,
                    health_check_node_port=hcnp,
                    affinity_timeout=spec.session_affinity_config.client_ip.timeout_seconds
                    if spec.session_affinity == "ClientIP"
                    else 0,
                    ingress_ips=tuple(ingress),
                )
            )
        unique(
            self.src,
            "Service",
            [(("workload", i, "metadata", "name"), f"{m.metadata.namespace}/{m.metadata.name}") for i, m in manifests],
        )
        unique(
            self.src,
            "clusterIP",
            [
                (("workload", i, "spec", "clusterIP"), s.cluster_ip)
                for (i, _), s in zip(manifests, services, strict=True)
            ],
        )
        return tuple(services)

    def _check_node_port(self, path: FieldPath, port: int | None) -> None:
        if port is not None and port not in NODE_PORT_RANGE:
            first, last = NODE_PORT_RANGE.start, NODE_PORT_RANGE.stop - 1
            raise self.src.error(
                path, f"expected a port in {first}-{last} (kube-apiserver's --service-node-port-range)"
            )

    def _endpoints(self, path: FieldPath, port: k8s.ServicePortSpec, pods: list[PodSpec]) -> tuple[EndpointSpec, ...]:
        target = port.target_port if port.target_port is not None else port.port
        eps = []
        for pod in pods:
            if isinstance(target, int):
                number: int | None = target
            else:
                number = next((p.port for p in pod.ports if p.name == target and p.protocol == port.protocol), None)
            if number is not None:
                eps.append(EndpointSpec(pod.name, pod.node, pod.ip, number, pod.ready))
        if isinstance(target, str) and not eps:
            raise self.src.error((*path, "targetPort"), f"no selected pod has a container port named {target!r}")
        return tuple(eps)

    def _lb_routes(self, nodes: tuple[NodeSpec, ...], services: tuple[ServiceSpec, ...]) -> tuple[tuple[str, str], ...]:
        """Where the gateway (standing in for a pass-through load balancer) sends each VIP.

        Like a cloud LB health-checking healthCheckNodePort, a Local Service's VIP goes to a node
        with a ready local endpoint; otherwise to the first node.
        """
        routes = {}
        for svc in services:
            target = nodes[0]
            if svc.external_policy == "Local":
                hosting = {ep.node for p in svc.ports for ep in p.endpoints if ep.ready}
                target = next((n for n in nodes if n.name in hosting), nodes[0])
            for vip in svc.external_ips + svc.load_balancer_ips:
                if vip not in {n.ip for n in nodes}:
                    routes.setdefault(vip, target.ip)
        return tuple(routes.items())

    def _egress(self, cluster: ClusterSpec, nodes: tuple[NodeSpec, ...]) -> EgressSpec | None:
        g = self.f.egress_gateway
        if g is None:
            return None
        path: FieldPath = ("egressGateway",)
        for k, cidr in enumerate(g.destinations):
            disjoint(self.src, (*path, "destinations", k), cidr, cluster, "destination")
        known = {n.name for n in nodes}
        for node, address in g.node_addresses.items():
            if node not in known:
                raise self.src.error(
                    (*path, "nodeAddresses", node), f"unknown node {node!r}; expected one of {', '.join(sorted(known))}"
                )
            try:
                ipaddress.IPv4Address(address)
            except ValueError:
                raise self.src.error((*path, "nodeAddresses", node), f"{address!r} is not an IPv4 address") from None
        public = [((*path, "address"), g.address)] if g.address else []
        public += [((*path, "nodeAddresses", n), a) for n, a in g.node_addresses.items()]
        for where, address in public:
            for net in (cluster.underlay, cluster.cluster_cidr, cluster.service_cidr):
                if inside(address, net):
                    raise self.src.error(where, f"{address} is inside {net}: a public address is outside the cluster")
        unique(self.src, "public address", [(where, a) for where, a in public])
        if not public:
            raise self.src.error(path, "give `address` (every node's) or `nodeAddresses` (an elastic IP per node)")
        return EgressSpec(tuple(g.destinations), g.address or "", tuple(g.node_addresses.items()))

    def _masq_agent(self, nodes: tuple[NodeSpec, ...]) -> MasqAgentSpec | None:
        a = self.f.ip_masq_agent
        if a is None:
            return None
        chosen = node_names(self.src, ("ipMasqAgent", "nodes"), a.nodes, nodes) if a.nodes is not None else None
        return MasqAgentSpec(tuple(a.non_masquerade_cidrs), chosen or tuple(n.name for n in nodes))

    def _load_balancers(
        self,
        cluster: ClusterSpec,
        nodes: tuple[NodeSpec, ...],
        externals: tuple[ExternalSpec, ...],
        services: tuple[ServiceSpec, ...],
        egress: EgressSpec | None,
    ) -> tuple[LoadBalancerSpec, ...]:
        lb_services = [s for s in services if s.type == "LoadBalancer" and s.ingress_ips]
        claimed: dict[str, FieldPath] = {}
        wanted: list[tuple[int, schema.LoadBalancer, list[ServiceSpec]]] = []
        for i, lb in enumerate(self.f.load_balancers):
            path: FieldPath = ("loadBalancers", i)
            if lb.services is None:
                wanted.append((i, lb, []))
                continue
            chosen = []
            for k, ref in enumerate(lb.services):
                ns, _, name = ref.rpartition("/")
                svc = next((s for s in services if s.name == name and s.namespace == (ns or "default")), None)
                spath: FieldPath = (*path, "services", k)
                if svc is None:
                    raise self.src.error(spath, f"no Service {ns or 'default'}/{name} in the workload")
                if svc.type != "LoadBalancer" or not svc.ingress_ips:
                    raise self.src.error(
                        spath,
                        f"Service {svc.namespace}/{svc.name} has no load balancer IP (type LoadBalancer, "
                        "status.loadBalancer.ingress or loadBalancerIP)",
                    )
                key = f"{svc.namespace}/{svc.name}"
                if key in claimed:
                    raise self.src.error(
                        spath, f"{key} is already served by the load balancer at line {self.src.line_of(claimed[key])}"
                    )
                claimed[key] = spath
                chosen.append(svc)
            wanted.append((i, lb, chosen))
        defaults = [i for i, lb, _ in wanted if lb.services is None]
        if len(defaults) > 1:
            raise self.src.error(("loadBalancers", defaults[1]), "only one load balancer may leave out `services`")
        balancers = []
        for i, lb, chosen in wanted:
            path = ("loadBalancers", i)
            if lb.services is None:
                chosen = [s for s in lb_services if f"{s.namespace}/{s.name}" not in claimed]
            pool = node_names(self.src, (*path, "nodes"), lb.nodes, nodes) if lb.nodes is not None else None
            if lb.forward == "vip" and lb.avoid_source_backend:
                raise self.src.error(
                    (*path, "avoidSourceBackend"), "needs `forward: nodePort` (a routed VIP has one next hop)"
                )
            address = lb.address or cluster.gateway_ip
            taken = {n.ip: n.name for n in nodes} | {e.ip: e.name for e in externals}
            if address in taken:
                raise self.src.error((*path, "address"), f"{address} is already {taken[address]}'s address")
            for net in (cluster.cluster_cidr, cluster.service_cidr):
                if inside(address, net):
                    raise self.src.error((*path, "address"), f"{address} is inside {net}")
            frontends = []
            for svc in chosen:
                for vip in svc.ingress_ips:
                    if inside(vip, cluster.underlay):
                        raise self.src.error(
                            (*path, "services"),
                            f"{svc.name}'s load balancer IP {vip} is inside the underlay {cluster.underlay}: nodes "
                            "would look for it on their own link instead of routing it to the load balancer",
                        )
                    behind = bool(egress) and any(inside(vip, d) for d in egress.destinations)  # type: ignore[union-attr]
                    for port in svc.ports:
                        if lb.forward == "nodePort" and not port.node_port:
                            raise self.src.error((*path, "services"), f"{svc.name} has no NodePort to forward to")
                        frontends.append(
                            FrontendSpec(
                                f"{svc.namespace}/{svc.name}",
                                vip,
                                port.port,
                                port.protocol,
                                port.node_port,
                                svc.health_check_node_port if svc.external_policy == "Local" else 0,
                                behind,
                            )
                        )
            balancers.append(
                LoadBalancerSpec(
                    name=lb.name,
                    address=address,
                    source=lb.source,
                    forward=lb.forward,
                    pool=pool or tuple(n.name for n in nodes),
                    health_check=lb.health_check,
                    avoid_source_backend=lb.avoid_source_backend,
                    frontends=tuple(frontends),
                )
            )
        unique(self.src, "load balancer name", [(("loadBalancers", i, "name"), lb.name) for i, lb, _ in wanted])
        vips = [
            (("loadBalancers", i), f.vip + f":{f.port}/{f.protocol}")
            for (i, _, _), b in zip(wanted, balancers, strict=True)
            for f in b.frontends
        ]
        unique(self.src, "load balancer frontend", vips)
        return tuple(balancers)

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
