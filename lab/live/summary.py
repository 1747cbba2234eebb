"""What `lab up` prints: what was built, with addresses, the Services and their frontends, and commands that reach
them (pure: from the Topology and the run's prefix). Every command names the run (`--run`): it works whatever other
labs are up on the machine."""

from __future__ import annotations

from lab.describe.topology import ProbeSpec, ServicePortSpec, ServiceSpec, Topology
from lab.report.records import expectation_text
from lab.report.sliced import sliced_line


def _frontends(svc: ServiceSpec) -> list[str]:
    said = []
    for port in svc.ports:
        proto = f"{port.port}/{port.protocol}"
        said.append(f"{svc.cluster_ip}:{proto}")
        said += [f"{ip}:{proto} (externalIP)" for ip in svc.external_ips]
        said += [f"{ip}:{proto} (load balancer)" for ip in svc.ingress_ips]
        if port.node_port:
            said.append(f"NodePort {port.node_port}/{port.protocol} on every node")
    return said


def _client(topo: Topology) -> str:
    """The actor to reach Services from: an external host, else a pod that serves nothing, else a node."""
    serving = {ep.pod for svc in topo.services for port in svc.ports for ep in port.endpoints}
    if topo.externals:
        return next((e.name for e in topo.externals if not e.is_router), topo.externals[0].name)
    idle = [p.name for p in topo.built_pods if p.name not in serving and not p.host_network]
    return idle[0] if idle else topo.nodes[-1].name


CURL_LIMIT = 3  # seconds: a printed curl gives up after this instead of hanging on a dropped SYN

# What each outcome looks like from a printed `curl -s -m CURL_LIMIT` (curl's exit statuses, man curl).
_CURL_SHOWS = {
    "delivered": "a JSON line naming the backend and the source it saw",
    "dropped": f"nothing, then exit 28 after {CURL_LIMIT} s (timed out)",
    "accepted": f"nothing, then exit 28 after {CURL_LIMIT} s (a socket took the connection, nobody answers)",
    "refused": "exit 7 at once (connection refused)",
    "unreachable": "exit 7 at once (no route to host)",
    "reset": "exit 56 (connection reset by peer)",
}


def _frontend_addresses(topo: Topology, svc: ServiceSpec, port: ServicePortSpec) -> set[tuple[str, int]]:
    """Every address:port the port of the Service answers on."""
    found = {(svc.cluster_ip, port.port)} | {(ip, port.port) for ip in (*svc.external_ips, *svc.ingress_ips)}
    if port.node_port:
        found |= {(node.ip, port.node_port) for node in topo.nodes}
    return found


def _stated(topo: Topology, client: str, svc: ServiceSpec, port: ServicePortSpec) -> ProbeSpec | None:
    """A probe of the scenario from `client` to the Service that runs on the lab as built (no steps before it,
    no flow of another probe): what it expects is what the printed command should meet."""
    frontends = _frontend_addresses(topo, svc, port)
    return next(
        (
            p
            for p in topo.probes
            if p.source == client
            and (p.dst_ip, p.dst_port) in frontends
            and p.protocol == port.protocol
            and not p.before
            and not p.flow
            and not p.source_address
            and not p.craft
        ),
        None,
    )


def _expectation(probe: ProbeSpec | None, protocol: str) -> str:
    if probe is None:
        what = "no probe of the scenario says what to expect"
        return what + (f"; curl gives up after {CURL_LIMIT} s" if protocol == "TCP" else "")
    if probe.expected.observe:  # every outcome would do: what curl may show is README's, not a paragraph here
        return "observe: no expectation yet"
    said = f"expected {expectation_text(probe.expected)}"
    if protocol == "TCP":
        said += ": curl shows " + " or ".join(_CURL_SHOWS[o] for o in probe.expected.outcomes)
    return said


def _reach(topo: Topology, client: str, run: str) -> list[str]:
    """A curl (TCP, with a time limit) or the lab's own probe command (UDP) per Service, from `client`, each
    saying what it should meet when a probe of the scenario says so."""
    outside = client in {e.name for e in topo.externals}
    lines = []
    for svc in topo.services:
        port = svc.ports[0]
        stated = _stated(topo, client, svc, port)
        if stated is not None:
            address, how = f"{stated.dst_ip}:{stated.dst_port}", f"{svc.name} as probe {stated.name} reaches it"
        elif outside and port.node_port:
            address = f"{topo.nodes[-1].ip}:{port.node_port}"
            how = f"{svc.name} through {topo.nodes[-1].name}'s NodePort"
        elif outside and (svc.external_ips or svc.ingress_ips):
            address = f"{(svc.external_ips or svc.ingress_ips)[0]}:{port.port}"
            how = f"{svc.name} through its external address"
        elif outside:
            continue  # a ClusterIP is not reachable from outside the cluster
        else:
            address, how = f"{svc.cluster_ip}:{port.port}", f"{svc.name}'s ClusterIP"
        expect = _expectation(stated, port.protocol)
        if port.protocol == "TCP":
            command = f"lab exec --run {run} {client} -- curl -s -m {CURL_LIMIT} http://{address}/"
        else:
            command = f"lab probe --run {run} --from {client} --to {address} --protocol UDP"
        lines.append(f"{command}    # {how}; {expect}")
    return lines


def summary(topo: Topology, prefix: str) -> list[str]:
    """What was built and how to reach it, one line each."""
    variant = ", ".join(f"{k}={v}" for k, v in topo.variant) or "no matrix"
    cluster = topo.cluster
    lines = [
        f"{prefix}: {topo.scenario} ({variant}): kube-proxy {cluster.kube_version}, {cluster.proxy_mode} mode",
        "",
    ]
    for node in topo.nodes:
        lines.append(f"  node      {node.name:<12} {node.ip:<16} pods {node.pod_cidr}")
    if topo.stand_ins:  # the nodes above are the built ones: say the others stand in
        lines.append(f"  {sliced_line(topo)}")
    for pod in topo.built_pods:
        ports = " ".join(f"{p.port}/{p.protocol}" for p in pod.ports)
        state = "" if pod.ready else " (not ready)"
        lines.append(f"  pod       {pod.name:<12} {pod.ip:<16} on {pod.node}{state}{'  ' + ports if ports else ''}")
    for ext in topo.externals:
        kind = "router" if ext.is_router else "external"
        lines.append(f"  {kind:<9} {ext.name:<12} {ext.ip}")
    for lb in topo.load_balancers:
        lines.append(f"  lb        {lb.name:<12} {lb.address:<16} " + ", ".join(f.vip for f in lb.frontends))
    for svc in topo.services:
        lines.append(f"  service   {svc.namespace}/{svc.name} ({svc.type}): " + ", ".join(_frontends(svc)))
    client = _client(topo)
    probes = [f"lab probe --run {prefix} {p.name}" for p in topo.probes[:3]]
    lines += [
        "",
        "Reach it:",
        *(f"  {line}" for line in _reach(topo, client, prefix)),
        *(f"  {line}    # a scenario probe: verdict and evidence as lab run" for line in probes),
        f"  lab shell --run {prefix} {topo.nodes[0].name}    # conntrack -L, iptables-save -c, nft list ruleset, "
        "tcpdump -ni eth0",
        "  lab ls",
        f"  lab down {prefix}",
    ]
    return lines
