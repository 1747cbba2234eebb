"""`lab import`: a cluster's kubectl objects made a scenario file of the lab's own format.

Services are written without their selectors, each with the EndpointSlices kube-proxy read (a Service without a
selector takes hand-written slices in the lab): the endpoints, their conditions, nodes and hints are the cluster's,
not recomputed. The pods at those endpoints are written with their node and address, and one pod per node probed
as a client where the node runs none of them. Everything the lab leaves out or changes is said in `notes`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from lab.describe.errors import ScenarioError
from lab.describe.families import Family, family_of
from lab.describe.kubectl.addresses import Anonymizer, PoolExhausted, covering
from lab.describe.kubectl.announcers import announce, read_announcers
from lab.describe.kubectl.calico import KIND as IP_POOL
from lab.describe.kubectl.calico import calico_fields
from lab.describe.kubectl.cluster import (
    FAMILIES,
    ZONE_LABEL,
    Node,
    Pod,
    detect_cni,
    pod_ip_problem,
    read_node,
    read_pod,
)
from lab.describe.kubectl.consistency import (
    refuse_conflicting_ports,
    refuse_reused_allocations,
    refuse_shared_addresses,
)
from lab.describe.kubectl.flannel import check_net_conf, is_flannel_config
from lab.describe.kubectl.names import Names
from lab.describe.kubectl.nodestate import DRAINING_GATE, Pool, left_out_of_pool, node_notes
from lab.describe.kubectl.nodestate import Release as NodeRelease
from lab.describe.kubectl.objects import Inputs, Obj
from lab.describe.kubectl.origins import CLUSTER_FIELDS, NODE_FIELDS, Origin
from lab.describe.kubectl.podblocks import free_blocks
from lab.describe.kubectl.probes import probed_nodes, probes_for
from lab.describe.kubectl.proxyconfig import (
    GIT_VERSION,
    ProxyConfig,
    config_key,
    kube_proxy_config,
    release,
    release_at,
    version_of,
)
from lab.describe.kubectl.servicecidrs import KIND as SERVICE_CIDR
from lab.describe.kubectl.servicecidrs import ServiceRange, read_service_ranges, service_range
from lab.describe.kubectl.services import SERVICE_NAME_LABEL, Service, Slice, read_service, read_slice
from lab.describe.kubectl.slicing import built_nodes, probed_within, sliced_note, stand_in_endpoint
from lab.describe.kubectl.unrouted import external_ip_notes
from lab.describe.releases import check_version
from lab.describe.resolve.workload import NODE_PORT_RANGE
from lab.describe.yamlsrc import FieldPath

KUBE_PROXY_VERSION = ("status", "nodeInfo", "kubeProxyVersion")
OUTSIDE = "client"  # the external host every frontend from outside is probed from
# Per family: the networks an import takes where the objects name none (the lab's own examples'), and how long a
# covering network may be (podCIDR blocks, the cluster's pod network, its Service network, the nodes' network).
_DEFAULT_NETWORKS = {
    "IPv4": {"cluster": "10.244.0.0/16", "service": "10.96.0.0/16", "underlay": "192.168.56.0/24"},
    "IPv6": {"cluster": "fd00:10:244::/56", "service": "fd00:10:96::/112", "underlay": "fd00:56::/64"},
}
_LONGEST = {
    "IPv4": {"block": 24, "cluster": 16, "service": 16, "underlay": 24},
    "IPv6": {"block": 64, "cluster": 56, "service": 112, "underlay": 64},
}


@dataclass
class Options:
    services: list[str] = field(default_factory=list)  # NAMESPACE/NAME; every Service when empty
    kube_version: str | None = None
    anonymize: bool = False
    name: str = "imported"
    nodes: list[str] = field(default_factory=list)  # the nodes built, the others stand-ins; empty: chosen by size


@dataclass
class Imported:
    scenario: dict[str, Any]
    notes: list[str]
    origins: dict[FieldPath, Origin] = field(default_factory=dict)  # each node's and manifest's input object


def import_cluster(inputs: Inputs, options: Options) -> Imported:
    notes = inputs.notes()
    names = Names(options.anonymize)
    version, said = _version(inputs, options)
    notes.append(said)
    config = _proxy_config(inputs, version, notes)
    cni = detect_cni(inputs.objects["Pod"])
    notes += cni.notes

    nodes = {n.name: n for obj in _unique(inputs, "Node") if (n := read_node(obj, notes)) is not None}
    if not nodes:
        said = "".join(f"; {n}" for n in inputs.notes())
        raise ScenarioError("lab import", None, "", f"no Node in the input (give kubectl get nodes,... -o yaml){said}")
    families = _families(config, list(nodes.values()), cni.value, notes)
    pods = [read_pod(obj, notes) for obj in _unique(inputs, "Pod")]
    placed = _placeable(pods, nodes, cni.value, families, notes)
    services = _services(inputs, options, families, notes)
    by_ip = {ip: p for p in placed for ip in p.ips.values()}
    for obj in inputs.objects["EndpointSlice"]:
        key = f"{obj.namespace or 'default'}/{obj.get(('metadata', 'labels', SERVICE_NAME_LABEL), str, '')}"
        if key in services and (s := read_slice(obj, by_ip, nodes, notes, families)) is not None:
            services[key].slices.append(s)
    for key, svc in list(services.items()):
        if not svc.slices:
            notes.append(
                svc.obj.note(
                    (),
                    "no EndpointSlice of it in the input: written without endpoints, as kube-"
                    "proxy would reject its traffic (kubectl get endpointslices gives them)",
                )
            )
        elif any(s.had_endpoints for s in svc.slices) and not any(s.endpoints for s in svc.slices):
            notes.append(svc.obj.note((), "skipped: none of its endpoints is a pod the lab can build (see above)"))
            del services[key]

    backends = {id(ep.pod): ep.pod for svc in services.values() for s in svc.slices for ep in s.endpoints}
    wanted = _nodes_involved(services, nodes, bool(options.services))
    clients = _clients(wanted, backends, placed)
    with_pod = {n for n, p in clients.items() if p is not None}
    zones = {n: nodes[n].zone for n in wanted}
    probed = {key: probed_nodes(svc, wanted, zones, with_pod) for key, svc in services.items()}
    built = built_nodes(options.nodes, wanted, probed)
    if built is not None:
        probed = probed_within(probed, built)
        notes.append(sliced_note(built, len(wanted), len(probed), len(services)))
        backends = {k: p for k, p in backends.items() if p.node in built}  # a stand-in's pods are addresses
    real = built if built is not None else wanted
    used = {n for chosen in probed.values() for n in chosen}
    clients = {n: p for n, p in clients.items() if n in used}  # a client no probe is sent from is not written
    written_pods = list(backends.values()) + [p for p in clients.values() if p is not None and id(p) not in backends]
    ranges = read_service_ranges(inputs.objects[SERVICE_CIDR], notes)
    networks = {f: _networks(f, config, [nodes[n] for n in wanted], services, ranges, notes) for f in families}
    outside = ",".join(_outside_address(networks[f].underlay, {nodes[n].ip_of(f) for n in wanted}) for f in families)
    external_ip_notes(services.values(), [nodes[n] for n in wanted], {f: networks[f].underlay for f in families}, notes)

    cluster = {
        **config.cluster,
        "kubeVersion": version,
        "clusterCIDR": ",".join(networks[f].cluster for f in families),
        "serviceCIDR": ",".join(networks[f].service for f in families),
        "underlay": ",".join(networks[f].underlay for f in families),
    }
    if cni.value != "bridge":
        cluster["cni"] = cni.value
    if cni.value == "routed-tunnel":  # Calico's: IPv4 alone (_families)
        cluster |= calico_fields(inputs.objects[IP_POOL], networks[families[0]].cluster, notes)
    elif inputs.objects[IP_POOL]:
        notes.append(inputs.objects[IP_POOL][0].note((), "not read: the lab recognised no Calico in the cluster"))
    flannel_configs = [o for o in inputs.objects["ConfigMap"] if is_flannel_config(o)]
    if cni.value == "flannel":  # IPv4 alone (_families)
        check_net_conf(flannel_configs, networks[families[0]].cluster, notes)
    elif flannel_configs:
        notes.append(flannel_configs[0].note((), "not read: the lab recognised no flannel pods in the cluster"))
    stand_ins = set(wanted) - set(real)
    lab_nodes = [
        _node(nodes[n], [networks[f].blocks[n] for f in families], families, names)
        | ({"standIn": True} if n in stand_ins else {})
        for n in wanted
    ]
    workload: list[dict[str, Any]] = [_pod(p, families, names) for p in written_pods]
    origins = {("nodes", i): Origin(nodes[n].obj, NODE_FIELDS) for i, n in enumerate(wanted)}
    if config.conf is not None:
        origins[("cluster",)] = Origin(config.conf, CLUSTER_FIELDS, only=True)
    origins |= {("workload", i): Origin(p.obj) for i, p in enumerate(written_pods)}
    announced = announce(
        read_announcers(inputs, nodes, notes),
        services.values(),
        nodes,
        real,
        {f: networks[f].underlay for f in families},
        names,
        notes,
    )
    outside_host = _outside_name({n["name"] for n in lab_nodes})
    probes = []
    client_of = {
        names.node(n): f"{names.namespace(p.namespace)}/{names.pod(p.namespace, p.name)}" if p else names.node(n)
        for n, p in clients.items()
    }
    for svc in services.values():
        manifest = _service(svc, names, notes)
        origins |= {("workload", len(workload) + i): Origin(o.obj) for i, o in enumerate([svc, *svc.slices])}
        workload.append(manifest)
        workload += [_slice(svc, s, names, stand_ins) for s in svc.slices]
        if svc.key in probed:
            ns = names.namespace(svc.namespace)
            through = [names.node(n) for n in probed[svc.key]]
            probes += probes_for(manifest, ns, client_of, through, outside_host, svc.source_ranges)
    for original, label, why in names.renamed_nodes():  # every node named is one of the input's (read_slice checks)
        notes.append(nodes[original].obj.note(("metadata", "name"), f"named {label} in the scenario: {why}"))
    if not probes:
        raise ScenarioError("lab import", None, "", "no Service to reproduce: the input holds none kube-proxy serves")
    scenario = {
        "name": options.name,
        "description": f"Imported by lab import from {len(nodes)} node(s), {len(pods)} pod(s) and "
        f"{len(inputs.objects['Service'])} Service(s); Services without their selectors, with the EndpointSlices "
        "kube-proxy read. Every probe only observes: write what each should do.",
        "cluster": cluster,
        "nodes": lab_nodes,
        "externalHosts": [{"name": outside_host, "ip": outside}],
        "workload": workload,
        "probes": probes,
    }
    if cni.masquerades:
        scenario |= _masquerade_agent({f: networks[f].cluster for f in families}, notes)
    release = NodeRelease(version, _gate(config, DRAINING_GATE))
    if (lb := _load_balancer(services, [nodes[n] for n in real], names, release, notes)) is not None:
        scenario["loadBalancers"] = [lb]
    if announced.balancers:
        scenario["loadBalancers"] = scenario.get("loadBalancers", []) + announced.balancers
    if announced.routes:
        scenario["externalHosts"][0]["routes"] = announced.routes
    if options.anonymize:
        try:
            anonymizer = Anonymizer({f: (n.cluster, n.service, n.underlay) for f, n in networks.items()})
            scenario = anonymizer.walk(scenario)
        except (ValueError, PoolExhausted) as exc:
            raise ScenarioError("lab import", None, "--anonymize", str(exc)) from None
        notes += [f"lab import: --anonymize: {line}" for line in anonymizer.summary()]
    return Imported(scenario, notes, origins)


def _masquerade_agent(pod_networks: dict[Family, str], notes: list[str]) -> dict[str, Any]:
    """kindnet's masquerade of what pods send out of the pod network, as the scenario's ipMasqAgent (the same rules
    under another chain's name); IPv4's alone, as the lab's ipMasqAgent is."""
    if "IPv6" in pod_networks:
        notes.append(f"lab import: kindnet masquerades IPv6 out of {pod_networks['IPv6']}: not modelled (IPv4 only)")
    if "IPv4" not in pod_networks:
        return {}
    cidr = pod_networks["IPv4"]
    notes.append(
        f"lab import: kindnet masquerades what leaves the pod network {cidr} (its nat chain KIND-MASQ-AGENT): built as "
        f"ipMasqAgent with nonMasqueradeCIDRs [{cidr}], the same rules"
    )
    return {"ipMasqAgent": {"nonMasqueradeCIDRs": [cidr]}}


def _gate(config: ProxyConfig, gate: str) -> bool | None:
    """A feature gate as kube-proxy's configuration sets it (None when it does not)."""
    return config.conf.get(("featureGates", gate), bool) if config.conf is not None else None


def _load_balancer(
    services: dict[str, Service], nodes: list[Node], names: Names, release: NodeRelease, notes: list[str]
) -> dict[str, Any] | None:
    """The load balancer standing in for the cloud's, for the Services whose load balancer address has ipMode Proxy
    (kube-proxy writes nothing for one: a load balancer must take it to a NodePort), with the nodes the cloud's
    service controller would give it; what each node's state means is said either way."""
    proxied = [s for s in services.values() if any(i["ipMode"] == "Proxy" for i in s.ingress)]
    pool = Pool(bool(proxied), all(s.spec.get("externalTrafficPolicy") != "Local" for s in proxied))
    kept = []
    for node in nodes:
        left_out = left_out_of_pool(node.obj, release, pool)
        notes += node_notes(node.obj, release, pool, left_out)
        if left_out is None:
            kept.append(names.node(node.name))
    if not proxied:
        return None
    lb: dict[str, Any] = {
        "name": "lb",
        "services": [f"{names.namespace(s.namespace)}/{names.service(s.namespace, s.name)}" for s in proxied],
    }
    if not kept:
        notes.append(
            "lab import: every node is left out of the load balancer's pool (see above), where the cloud's load "
            "balancer would have none to send to: the lab's keeps them all"
        )
    elif len(kept) < len(nodes):
        lb["nodes"] = kept
    return lb


def _unique(inputs: Inputs, kind: str) -> list[Obj]:
    seen: dict[str, Obj] = {}
    for obj in inputs.objects[kind]:
        if obj.key in seen:
            first = seen[obj.key]
            raise obj.error((), f"given twice (first in {first.src.file} at line {first.src.line_of(first.path)})")
        seen[obj.key] = obj
    return list(seen.values())


def _version(inputs: Inputs, options: Options) -> tuple[str, str]:
    """kube-proxy's release, and a note saying where it was taken from."""
    running = _kube_proxy_releases(inputs.objects["Node"])
    if options.kube_version is not None:
        found, where = release(options.kube_version), f"--kube-version {options.kube_version}"
        if found is None:
            said = repr(options.kube_version[:60])
            raise ScenarioError("lab import", None, "--kube-version", f"expected 1.MINOR such as 1.31, got {said}")
        said = f"lab import: kubeVersion {found}: from --kube-version, whatever the inputs say"
    elif inputs.versions:
        found, where = _server_version(inputs.versions), f"{inputs.versions[0].src.file}: serverVersion"
        said = replace(inputs.versions[0], label="kubectl version").note(
            GIT_VERSION,
            f"{inputs.versions[0].get(GIT_VERSION, str)}: kubeVersion {found}: the API server's release, taken as "
            "kube-proxy's" + _other_releases(running, found),
        )
    else:
        for obj in inputs.objects["Node"]:
            release_at(obj, KUBE_PROXY_VERSION)  # a version, or refused: the release is taken from them
        if not running:
            raise ScenarioError(
                "lab import",
                None,
                "",
                "which Kubernetes release? give kubectl version -o yaml's output or --kube-version 1.MINOR",
            )
        found, where = next(iter(running)), "the nodes' status.nodeInfo.kubeProxyVersion"
        first = running[found][0]
        said = first.note(
            KUBE_PROXY_VERSION,
            f"{first.get(KUBE_PROXY_VERSION, str)}: kubeVersion {found}: no kubectl version given, the release of "
            f"the kube-proxy of {len(running[found])} of {sum(len(n) for n in running.values())} node(s)"
            + _other_releases(running, found),
        )
    if problem := check_version(found):
        raise ScenarioError("lab import", None, "", f"{where}: {problem}; --kube-version 1.MINOR reproduces another")
    return found, said


def _kube_proxy_releases(nodes: list[Obj]) -> dict[str, list[Obj]]:
    """The nodes by the release of their kube-proxy (status.nodeInfo.kubeProxyVersion), the most common first; one
    that names none (empty from 1.33, or text of no version) is not counted."""
    found: dict[str, list[Obj]] = {}
    for obj in nodes:
        if (minor := release(obj._text(*KUBE_PROXY_VERSION))) is not None:
            found.setdefault(minor, []).append(obj)
    return dict(sorted(found.items(), key=lambda item: -len(item[1])))


def _other_releases(running: dict[str, list[Obj]], taken: str) -> str:
    """The other releases the nodes' kube-proxy runs (a cluster mid-upgrade, kube-proxy older than the API server),
    each a scenario of its own."""
    others = [f"{minor} on {len(objs)} node(s)" for minor, objs in running.items() if minor != taken]
    if not others:
        return ""
    return f"; the nodes' kube-proxy runs {', '.join(others)}: --kube-version 1.MINOR reproduces another"


def _server_version(versions: list[Obj]) -> str:
    """The release every `kubectl version` given names: two that differ are two clusters (or one, upgraded between
    them), and which one kube-proxy runs is not for the import to guess."""
    first = version_of(versions[0])
    for other in versions[1:]:
        if (found := version_of(other)) != first:
            where = f"{versions[0].src.file} at line {versions[0].src.line_of((*versions[0].path, *GIT_VERSION))}"
            raise other.error(
                GIT_VERSION,
                f"{found}, but {where} says {first}: give one cluster's version (or --kube-version 1.MINOR)",
            )
    return first


def _proxy_config(inputs: Inputs, version: str, notes: list[str]) -> ProxyConfig:
    configs = inputs.objects["KubeProxyConfiguration"] + [
        o for o in inputs.objects["ConfigMap"] if config_key(o) is not None
    ]
    for obj in inputs.objects["ConfigMap"]:
        if obj not in configs and not is_flannel_config(obj):  # flannel's is read with its CNI (check_net_conf)
            notes.append(obj.note(("data",), "not read: no KubeProxyConfiguration in its data"))
    if not configs:
        notes.append("lab import: no kube-proxy ConfigMap given: iptables mode and kube-proxy's defaults assumed")
        return ProxyConfig(cluster={"proxyMode": "iptables"})
    if len(configs) > 1:
        raise configs[1].error((), "a second kube-proxy configuration: give one")
    config = kube_proxy_config(configs[0], version)
    notes += config.notes
    return config


_IPV4_ONLY = {"routed-tunnel": "Calico", "flannel": "flannel"}  # the CNIs the lab builds for IPv4 alone, by whose


def _families(config: ProxyConfig, nodes: list[Node], cni: str, notes: list[str]) -> tuple[Family, ...]:
    """The families the cluster is imported in: those every node has an address of, the primary first. The primary
    is the first of a node's podCIDRs (kube-controller-manager allocates them in its --cluster-cidr order), else of
    kube-proxy's clusterCIDR, else IPv4."""
    order = next((list(n.pod_cidrs) for n in nodes if len(n.pod_cidrs) == 2), None) or list(config.cluster_cidrs)
    order = [f for f in order if f in FAMILIES] + [f for f in FAMILIES if f not in order]
    families = tuple(f for f in order if all(f in n.addresses for n in nodes))
    if not families:
        raise ScenarioError(
            "lab import", None, "", "the nodes share no address family: some have only IPv4 addresses, some only IPv6"
        )
    why = {f: f"{n.name} has no {f} address" for f in FAMILIES for n in nodes if f not in n.addresses}
    if cni in _IPV4_ONLY and "IPv6" in families:
        if families == ("IPv6",):
            raise ScenarioError(
                "lab import",
                None,
                "",
                f"an IPv6 cluster on {_IPV4_ONLY[cni]}: the lab builds cni {cni} for IPv4 only yet",
            )
        families, why["IPv6"] = ("IPv4",), f"the lab builds cni {cni} ({_IPV4_ONLY[cni]}'s) for IPv4 only yet"
    imported = f"the cluster is imported {' and '.join(families)}; left out"
    for node in nodes:
        for family, ip in node.addresses.items():
            if family not in families:
                notes.append(node.obj.note(("status", "addresses"), f"{ip}: {why[family]}, so {imported}"))
    for family, cidr in config.cluster_cidrs.items():
        if family not in families:
            notes.append(config.note(("clusterCIDR",), f"{cidr}: {imported}"))
    return families


def _placeable(
    pods: list[Pod], nodes: dict[str, Node], cni: str, families: tuple[Family, ...], notes: list[str]
) -> list[Pod]:
    """The pods the lab can build where the cluster runs them: on a node of the input, at their own addresses (of
    the imported families; one of the primary at least)."""
    kept = []
    for pod in pods:
        node = nodes.get(pod.node)
        if pod.host_network or pod.ip_of(families[0]) is None or node is None or not pod.running:
            continue  # never an endpoint the lab builds; an endpoint at its address is told as such
        if node.pod_cidr_of(families[0]) is None:
            notes.append(pod.obj.note(("spec", "nodeName"), f"left out: its node {node.name} has no podCIDR"))
            continue
        ips = {}
        for family in families:
            ip, cidr = pod.ip_of(family), node.pod_cidr_of(family)
            problem = pod_ip_problem(ip, cidr, cni) if ip and cidr else None
            if problem and family == families[0]:
                notes.append(pod.obj.note(("status", "podIP"), f"left out: {problem}"))
                break
            if problem or (ip and not cidr):
                notes.append(pod.obj.note(("status", "podIPs"), f"{ip}: {problem or 'its node has no podCIDR of it'}"))
            elif ip:
                ips[family] = ip
        else:
            kept.append(replace(pod, ips=ips))
    refuse_shared_addresses(kept)
    return kept


def _services(inputs: Inputs, options: Options, families: tuple[Family, ...], notes: list[str]) -> dict[str, Service]:
    objs = {f"{o.namespace or 'default'}/{o.name}": o for o in _unique(inputs, "Service")}
    for asked in options.services:
        if asked not in objs:
            raise ScenarioError("lab import", None, "--service", f"no Service {asked} in the input (NAMESPACE/NAME)")
    refuse_reused_allocations(list(objs.values()))
    chosen = [objs[k] for k in options.services] if options.services else list(objs.values())
    found = {}
    for obj in chosen:
        refuse_conflicting_ports(obj)
        if (svc := read_service(obj, notes, families)) is not None:
            found[svc.key] = svc
    return found


def _nodes_involved(services: dict[str, Service], nodes: dict[str, Node], asked: bool) -> list[str]:
    """Every node; with --service, those of the Services' endpoints and one more (a path through a node without
    an endpoint), in the input's order."""
    if not asked:
        return list(nodes)
    endpoints = [ep for svc in services.values() for s in svc.slices for ep in s.endpoints]
    used = {n for ep in endpoints for n in (ep.pod.node, ep.node, *ep.nodes)}  # where they run, and their hints
    other = next((n for n in nodes if n not in used), None)
    return [n for n in nodes if n in used or n == other]


def _clients(wanted: list[str], backends: dict[int, Pod], pods: list[Pod]) -> dict[str, Pod | None]:
    """A pod per node to probe cluster IPs from: a backend there, else any pod there, else the node itself."""
    serving, present = _by_node(backends.values()), _by_node(pods)  # once, not a scan of every pod per node
    chosen: dict[str, Pod | None] = {}
    for node in wanted:
        here = serving.get(node) or present.get(node)
        chosen[node] = min(here, key=lambda p: (p.namespace, p.name)) if here else None
    return chosen


def _by_node(pods: Iterable[Pod]) -> dict[str, list[Pod]]:
    grouped: dict[str, list[Pod]] = {}
    for pod in pods:
        grouped.setdefault(pod.node, []).append(pod)
    return grouped


@dataclass(frozen=True)
class Networks:
    """One family's networks of the imported cluster, and each node's podCIDR block of it."""

    cluster: str
    service: str
    underlay: str
    blocks: dict[str, str]


def _networks(
    family: Family,
    config: ProxyConfig,
    nodes: list[Node],
    services: dict[str, Service],
    ranges: dict[Family, list[ServiceRange]],
    notes: list[str],
) -> Networks:
    longest, default = _LONGEST[family], _DEFAULT_NETWORKS[family]
    cluster = _cluster_cidr(family, config, nodes, notes)
    ips = [ip for svc in services.values() for ip in svc.cluster_ips if family_of(ip) == family]
    if family in ranges:
        service = service_range(family, ranges[family], ips, notes)
    else:
        service = str(covering(ips, longest["service"]) or default["service"])
        if config.cluster.get("proxyMode") == "nftables":
            notes.append(
                f"lab import: no {family} ServiceCIDR in the input: serviceCIDR {service} holds the Services' "
                "ClusterIPs, where the cluster's own range may be wider, and nftables kube-proxy (1.33 on) drops "
                "traffic to its unallocated addresses (kubectl get servicecidrs -o yaml gives it)"
            )
    underlay = str(covering([n.ip_of(family) for n in nodes], longest["underlay"]) or default["underlay"])
    return Networks(cluster, service, underlay, _pod_cidrs(family, nodes, cluster, notes))


def _cluster_cidr(family: Family, config: ProxyConfig, nodes: list[Node], notes: list[str]) -> str:
    """kube-proxy's clusterCIDR of the family when every podCIDR of it is inside, else the smallest network holding
    them."""
    cidrs = [ipaddress.ip_network(c) for n in nodes if (c := n.pod_cidr_of(family))]
    given = config.cluster_cidrs.get(family)
    if given and all(c.subnet_of(ipaddress.ip_network(given)) for c in cidrs):  # type: ignore[arg-type]
        return given
    found = covering([str(c) for c in cidrs], _LONGEST[family]["cluster"]) or _DEFAULT_NETWORKS[family]["cluster"]
    if given:
        notes.append(
            f"lab import: kube-proxy's clusterCIDR {given} does not hold every node's "
            f"podCIDR: the scenario's clusterCIDR is {found}"
        )
    return str(found)


def _pod_cidrs(family: Family, nodes: list[Node], cluster_cidr: str, notes: list[str]) -> dict[str, str]:
    """Each node's podCIDR of the family; a node without one gets a free block of the cluster's pod network."""
    taken = [ipaddress.ip_network(c) for n in nodes if (c := n.pod_cidr_of(family))]
    network = ipaddress.ip_network(cluster_cidr)
    block_bits = max(_LONGEST[family]["block"], network.prefixlen)  # a pod network smaller than a block is one
    free = free_blocks(network, block_bits, taken)
    cidrs = {}
    for node in nodes:
        if (cidr := node.pod_cidr_of(family)) is None:
            if (block := next(free, None)) is None:
                raise node.obj.error(
                    ("spec", "podCIDR"),
                    f"no {family} podCIDR, and the cluster's pod network {cluster_cidr} has no /{block_bits} left "
                    "that no other node's podCIDR takes: give the node its podCIDR (kubectl get nodes -o yaml shows "
                    "it once kube-controller-manager has allocated it)",
                )
            cidrs[node.name] = str(block)
            notes.append(node.obj.note(("spec", "podCIDR"), f"no {family} one: the lab gives it {cidrs[node.name]}"))
        else:
            cidrs[node.name] = cidr
    return cidrs


def _outside_name(nodes: set[str]) -> str:
    """The client's name: OUTSIDE, or OUTSIDE-N when a node of the cluster is named so (a host's name is one of
    its own, nodes and external hosts alike; a pod of that name is told apart by its namespace)."""
    name, n = OUTSIDE, 1
    while name in nodes:
        n += 1
        name = f"{OUTSIDE}-{n}"
    return name


def _outside_address(underlay: str, taken: set[str]) -> str:
    """The client's address: the highest free one of the nodes' network (the lowest is the lab's gateway)."""
    net = ipaddress.ip_network(underlay)
    candidate = net.broadcast_address - 1
    while str(candidate) in taken:
        candidate -= 1
    return str(candidate)


def _node(node: Node, pod_cidrs: list[str], families: tuple[Family, ...], names: Names) -> dict[str, Any]:
    labels = dict(node.labels)
    if names.anonymize:  # the zone only: other labels (instance types, pools, hostnames) tell who runs it
        labels = {ZONE_LABEL: names.zone(node.zone)} if node.zone else {}
    else:
        labels.pop("kubernetes.io/hostname", None)  # the lab's own: the node's name
        labels.pop("kubernetes.io/arch", None)  # the lab's own: this machine's
    ip = ",".join(node.ip_of(f) for f in families)
    out: dict[str, Any] = {"name": names.node(node.name), "ip": ip, "podCIDR": ",".join(pod_cidrs)}
    if labels:
        out["labels"] = labels
    return out


def _pod(pod: Pod, families: tuple[Family, ...], names: Names) -> dict[str, Any]:
    containers: dict[str, list[dict[str, Any]]] = {}
    for port in pod.ports:
        if port["protocol"] not in ("TCP", "UDP"):
            continue
        entry = {k: port[k] for k in ("name", "containerPort", "protocol") if port[k] is not None}
        containers.setdefault(names.container(port["container"]), []).append(entry)
    metadata: dict[str, Any] = {"name": names.pod(pod.namespace, pod.name), "namespace": names.namespace(pod.namespace)}
    labels = pod.obj.get(("metadata", "labels"), dict, {})
    if labels and not names.anonymize:
        metadata["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "nodeName": names.node(pod.node),
            "containers": [{"name": c, "ports": ports} for c, ports in containers.items()] or [{"name": "main"}],
        },
        "status": _pod_status(pod, families),
    }


def _pod_status(pod: Pod, families: tuple[Family, ...]) -> dict[str, Any]:
    """status.podIP, and a dual-stack pod's podIPs (both families, the primary first)."""
    ips = [ip for f in families if (ip := pod.ip_of(f))]
    return {"podIP": ips[0], "podIPs": [{"ip": ip} for ip in ips]} if len(ips) > 1 else {"podIP": ips[0]}


def _service(svc: Service, names: Names, notes: list[str]) -> dict[str, Any]:
    ports = []
    for port in svc.ports:
        if "nodePort" in port and port["nodePort"] not in NODE_PORT_RANGE:
            notes.append(
                svc.obj.note(
                    ("spec", "ports"),
                    f"nodePort {port['nodePort']} is outside the lab's NodePort "
                    "range 30000-32767: the lab allocates one",
                )
            )
            port = {k: v for k, v in port.items() if k != "nodePort"}
        ports.append(port)
    spec: dict[str, Any] = {"type": svc.type, "clusterIP": svc.cluster_ip, "ports": ports, **svc.spec}
    if svc.external_ips:
        spec["externalIPs"] = svc.external_ips
    if svc.source_ranges:
        spec["loadBalancerSourceRanges"] = svc.source_ranges
    metadata: dict[str, Any] = {
        "name": names.service(svc.namespace, svc.name),
        "namespace": names.namespace(svc.namespace),
    }
    if svc.annotations:
        metadata["annotations"] = svc.annotations
    manifest: dict[str, Any] = {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}
    if svc.ingress:
        manifest["status"] = {"loadBalancer": {"ingress": svc.ingress}}
    return manifest


def _slice(svc: Service, s: Slice, names: Names, stand_ins: set[str]) -> dict[str, Any]:
    endpoints = []
    for ep in s.endpoints:
        out: dict[str, Any] = {"addresses": [ep.address], "conditions": ep.conditions, "nodeName": names.node(ep.node)}
        if ep.zone:
            out["zone"] = names.zone(ep.zone)
        hints = {}
        if ep.zones:
            hints["forZones"] = [{"name": names.zone(z)} for z in ep.zones]
        if ep.nodes:
            hints["forNodes"] = [{"name": names.node(n)} for n in ep.nodes]
        if hints:
            out["hints"] = hints
        endpoints.append(stand_in_endpoint(out) if ep.pod.node in stand_ins else out)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": names.slice(s.obj.namespace or "default", s.obj.name),
            "namespace": names.namespace(svc.namespace),
            "labels": {SERVICE_NAME_LABEL: names.service(svc.namespace, svc.name)},
        },
        "addressType": s.family,
        "endpoints": endpoints,
        "ports": s.ports,
    }
