"""What kube-proxy's health check server answers on a node's healthCheckNodePort, per release
(kubernetes/kubernetes pkg/proxy/healthcheck/service_health.go): the local endpoint count, the JSON body and
the headers. The server that sends it lives in lab/install/health.py."""

from __future__ import annotations

import json

from lab.describe.topology import Topology
from lab.render.kubeproxy.versions import Release


def local_endpoints(topo: Topology, service: str, node: str) -> int:
    """The count kube-proxy reports for `service` ("namespace/name") on `node`: distinct local endpoint IPs."""
    release = Release.of(topo.cluster.kube_version)
    svc = next(s for s in topo.services if f"{s.namespace}/{s.name}" == service)
    counted = (
        ep
        for port in svc.ports
        for ep in port.endpoints
        if ep.node == node and (ep.ready or not release.health_counts_ready_only)
    )
    return len({ep.ip for ep in counted})


def service_body(namespace: str, name: str, count: int, release: Release) -> str:
    """The body exactly as kube-proxy prints it: dedented, tab-indented JSON, no trailing newline."""
    fields = [f'\t"localEndpoints": {count}']
    if release.health_reports_proxy_healthy:
        fields = [f'\t"localEndpoints": {count},', '\t"serviceProxyHealthy": true']
    service = f'\t"service": {{\n\t\t"namespace": {json.dumps(namespace)},\n\t\t"name": {json.dumps(name)}\n\t}},'
    return "{\n" + service + "\n" + "\n".join(fields) + "\n}"


def service_headers(count: int, release: Release) -> list[tuple[str, str]]:
    """The headers after Content-Type and X-Content-Type-Options that this release adds."""
    return [("X-Load-Balancing-Endpoint-Weight", str(count))] if release.health_weight_header else []
