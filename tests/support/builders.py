"""The one set of ServicePort / Endpoint builders the render tests share, shaped like kube-proxy's test helpers
(makeTestService, makeTestEndpointSlice): defaults port 80 named "p80", TCP; an endpoint's serving condition
defaults to its readiness, as EndpointConditions do when unset."""

from __future__ import annotations

from typing import Any

from lab.render.kubeproxy.service import Endpoint, ServicePort


def svc(
    namespace: str,
    name: str,
    cluster_ip: str | None,
    port: int = 80,
    port_name: str = "p80",
    protocol: Any = "TCP",
    **kw: Any,
) -> ServicePort:
    return ServicePort(namespace, name, port_name, protocol, port, cluster_ip, **kw)


def ep(ip: str, port: int = 80, local: bool = False, ready: bool = True, **conditions: Any) -> Endpoint:
    serving = conditions.pop("serving", ready)
    return Endpoint(ip=ip, port=port, is_local=local, ready=ready, serving=serving, **conditions)


def terminating(ip: str, local: bool, serving: bool = True) -> Endpoint:
    return ep(ip, local=local, ready=False, serving=serving, terminating=True)
