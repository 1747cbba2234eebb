"""kube-proxy's health check servers, per node, and the HTTP check a load balancer runs against them.

kube-proxy answers every Service with externalTrafficPolicy Local on its healthCheckNodePort (any path):
200 when the node has local endpoints, else 503, with the body and headers its release writes
(lab/render/kubeproxy/healthcheck.py), and its own /healthz on 10256. Like the echo backends, every
listener here is a socket made inside the node's namespace and served by one thread.
"""

from __future__ import annotations

import email.utils
import socket
import time
from dataclasses import dataclass
from ipaddress import ip_address

from lab.describe.refs import ObjectRef
from lab.install.loop import SocketLoop
from lab.realize.enter import in_netns
from lab.render.kubeproxy.addresses import host_port
from lab.render.kubeproxy.healthcheck import service_body, service_headers
from lab.render.kubeproxy.versions import Release

HEALTHZ_PORT = 10256  # kube-proxy --healthz-bind-address default


@dataclass(frozen=True)
class HealthListener:
    node: str
    netns: str
    port: int
    service: str = ""  # namespace/name; "" for kube-proxy's own /healthz
    local_endpoints: int = 0
    release: Release = Release(31)  # the body and headers changed over time


def response(listener: HealthListener, now: float | None = None) -> bytes:
    """The whole HTTP answer for one request."""
    date = email.utils.formatdate(now, usegmt=True)
    headers = [("Content-Type", "application/json"), ("X-Content-Type-Options", "nosniff")]
    if listener.service:
        service = ObjectRef.parse(listener.service)
        body = service_body(service.namespace, service.name, listener.local_endpoints, listener.release)
        status = "200 OK" if listener.local_endpoints > 0 else "503 Service Unavailable"
        headers += service_headers(listener.local_endpoints, listener.release)
    else:
        # Go's time.Time.String(), as kube-proxy's healthz handler prints it with %q.
        stamp = time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(now))
        body = f'{{"lastUpdated": "{stamp}","currentTime": "{stamp}"}}'
        status = "200 OK"
    headers += [("Date", date), ("Content-Length", str(len(body.encode())))]
    head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "Connection: close\r\n\r\n"
    return head.encode() + body.encode()


def listening_socket(port: int) -> socket.socket:
    """Go's net.Listen("tcp", "0.0.0.0:PORT"), as kube-proxy's servers listen (the health check node ports, and
    --healthz-bind-address 0.0.0.0:10256): Go takes a wildcard of either family for every address of both ("It
    doesn't matter whether we listen on "0.0.0.0", "::", or ""; go treats them all the same": newServiceHealthServer
    in kubernetes/kubernetes pkg/proxy/healthcheck/service_health.go at 124526cf4904abf16a60f7cfb3404f1bfd3d8e5e),
    so one IPv6 socket that takes IPv4 too (IPV6_V6ONLY off) answers an IPv6 load balancer or probe as well."""
    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind(("::", port))
    sock.listen(16)
    return sock


class HealthServers(SocketLoop):
    def __init__(self) -> None:
        super().__init__("health")

    def listen(self, listener: HealthListener) -> None:
        self.register(in_netns(listener.netns, lambda: listening_socket(listener.port)), listener)

    def handle(self, sock: socket.socket, listener: HealthListener) -> None:
        try:
            conn, _ = sock.accept()
            with conn:
                conn.settimeout(1)
                request = b""
                while b"\r\n\r\n" not in request and len(request) < 8192:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    request += chunk
                conn.sendall(response(listener))
        except OSError:
            return


@dataclass(frozen=True)
class CheckResult:
    node: str
    url: str
    status: int  # 0: no answer
    body: str = ""
    error: str = ""

    @property
    def healthy(self) -> bool:
        return self.status == 200


def http_check(netns: str, source: str, node: str, address: str, port: int, path: str, timeout: float) -> CheckResult:
    """GET http://address:port/path from `source` inside netns, as a load balancer's health check does."""
    authority = host_port(address, port)  # an IPv6 address in brackets, as a URL and a Host header write it
    url = f"http://{authority}{path}"

    def get() -> CheckResult:
        family = socket.AF_INET6 if ip_address(address).version == 6 else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            try:
                sock.bind((source, 0))
                sock.connect((address, port))
                sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: lab-lb\r\n\r\n".encode())
                data = b""
                while True:
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except OSError as exc:
                return CheckResult(node, url, 0, error=str(exc) or type(exc).__name__)
        head, _, body = data.partition(b"\r\n\r\n")
        try:
            status = int(head.split(b" ", 2)[1])
        except (IndexError, ValueError):
            return CheckResult(node, url, 0, error=f"not HTTP: {data[:40]!r}")
        return CheckResult(node, url, status, body.decode(errors="replace"))

    return in_netns(netns, get)
