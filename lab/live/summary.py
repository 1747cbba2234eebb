"""What `lab up` prints: what was built, with addresses, the Services and their frontends, and commands that reach
them (pure: from the Topology and the run's prefix)."""

from __future__ import annotations

from lab.describe.topology import ServiceSpec, Topology


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


def _reach(topo: Topology, client: str) -> list[str]:
    """A curl (TCP) or the lab's own probe command (UDP) per Service, from `client`."""
    outside = client in {e.name for e in topo.externals}
    lines = []
    for svc in topo.services:
        port = svc.ports[0]
        if outside and port.node_port:
            address = f"{topo.nodes[-1].ip}:{port.node_port}"
            how = f"{svc.name} through {topo.nodes[-1].name}'s NodePort"
        elif outside and (svc.external_ips or svc.ingress_ips):
            address = f"{(svc.external_ips or svc.ingress_ips)[0]}:{port.port}"
            how = f"{svc.name} through its external address"
        elif outside:
            continue  # a ClusterIP is not reachable from outside the cluster
        else:
            address, how = f"{svc.cluster_ip}:{port.port}", f"{svc.name}'s ClusterIP"
        if port.protocol == "TCP":
            lines.append(f"lab exec {client} -- curl -s http://{address}/    # {how}")
        else:
            lines.append(f"lab probe --from {client} --to {address} --protocol UDP    # {how}")
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
    probes = [f"lab probe {p.name}" for p in topo.probes[:3]]
    lines += [
        "",
        "Reach it:",
        *(f"  {line}" for line in _reach(topo, client)),
        *(f"  {line}    # a scenario probe: verdict and evidence as lab run" for line in probes),
        f"  lab shell {topo.nodes[0].name}    # conntrack -L, iptables-save -c, nft list ruleset, tcpdump -ni eth0",
        "  lab ls",
        f"  lab down {prefix}",
    ]
    return lines
