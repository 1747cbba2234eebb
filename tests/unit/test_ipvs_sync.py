"""kube-proxy's ipvs sync after a change (render/kubeproxy/ipvs.py sync_lines): it diffs the virtual servers, so
unchanged real servers keep their connections; a TCP real server that leaves stays at weight 0 (graceful
termination), a UDP one goes at once."""

from __future__ import annotations

from lab.render.kubeproxy.ipvs import render_ipvs, sync_lines
from lab.render.kubeproxy.service import Endpoint, ProxyConfig, ServicePort

A = Endpoint("10.244.1.2", 8080, is_local=True)
B = Endpoint("10.244.2.2", 8080, is_local=False)


def web(protocol: str, *endpoints: Endpoint) -> ServicePort:
    return ServicePort("default", "web", "", protocol, 80, "10.96.0.10", endpoints=endpoints)  # type: ignore[arg-type]


def lines(protocol: str, before: tuple[Endpoint, ...], after: tuple[Endpoint, ...]) -> list[str]:
    old, new = (render_ipvs([web(protocol, *eps)], ProxyConfig(), ["192.168.56.11"]) for eps in (before, after))
    return sync_lines(old, new)


def test_unchanged_service_changes_nothing():
    assert lines("TCP", (A, B), (A, B)) == []


def test_tcp_real_server_leaves_gracefully():
    assert lines("TCP", (A, B), (B,)) == ["-e -t 10.96.0.10:80 -r 10.244.1.2:8080 -m -w 0"]


def test_udp_real_server_goes_at_once():
    assert lines("UDP", (A, B), (B,)) == ["-d -u 10.96.0.10:80 -r 10.244.1.2:8080"]


def test_real_server_added():
    assert lines("TCP", (A,), (A, B)) == ["-a -t 10.96.0.10:80 -r 10.244.2.2:8080 -m -w 1"]


def test_virtual_server_deleted_and_added():
    old = render_ipvs([web("TCP", A)], ProxyConfig(), ["192.168.56.11"])
    new = render_ipvs([], ProxyConfig(), ["192.168.56.11"])
    assert sync_lines(old, new) == ["-D -t 10.96.0.10:80"]
    assert sync_lines(new, old) == ["-A -t 10.96.0.10:80 -s rr", "-a -t 10.96.0.10:80 -r 10.244.1.2:8080 -m -w 1"]
