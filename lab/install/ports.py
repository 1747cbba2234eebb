"""The sockets kube-proxy itself has on each node: the ports it holds open up to 1.23 (lab/render/kubeproxy/ports.py
says which), and 1.37's localhost NodePort proxy (lab/install/localhost_proxy.py).

Made the way k8s.io/utils/net's ListenPortOpener makes them, inside the node's namespace: a TCP socket bound and
listening with the kernel's largest backlog (Go's net.Listen, SO_REUSEADDR as Go sets it on listeners), a UDP
socket bound; neither is ever read. They close when the variant ends, before its namespaces go.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from lab.install.localhost_proxy import LocalhostProxy
from lab.realize.build import Realized
from lab.realize.enter import in_netns
from lab.render.dataplane import NodeDataplane
from lab.render.kubeproxy.ports import HeldPort


def _open(port: HeldPort) -> socket.socket:
    """A "tcp4"/"udp4" socket, or for the IPv6 proxier's port a "tcp6"/"udp6" one (Go sets IPV6_V6ONLY on those)."""
    family = socket.AF_INET6 if port.family == "IPv6" else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM if port.protocol == "TCP" else socket.SOCK_DGRAM)
    try:
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        if port.protocol == "TCP":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((port.address, port.port))
        if port.protocol == "TCP":
            sock.listen(socket.SOMAXCONN)
    except OSError:
        sock.close()
        raise
    return sock


class PortHolder:
    """kube-proxy's held sockets on every node, kept in step with each sync as kube-proxy keeps its portsMap: a
    port still needed stays open (its queued connections with it), a new one is opened, one no Service needs any
    more is closed. A restarted kube-proxy is a new process: its old sockets all closed, then opened anew."""

    def __init__(self, realized: Realized) -> None:
        self.realized = realized
        self.held: dict[tuple[str, HeldPort], socket.socket] = {}
        self.localhost = LocalhostProxy(realized)

    def sync(self, planes: Mapping[str, NodeDataplane], restart: bool = False) -> None:
        self.localhost.sync(planes, restart)
        if restart:
            self._release()
        wanted = {(node, port) for node, plane in planes.items() for p in plane.proxiers for port in p.held_ports}
        for key in [key for key in self.held if key not in wanted]:
            self.held.pop(key).close()
        for node, port in sorted(wanted - self.held.keys(), key=str):
            try:
                self.held[node, port] = in_netns(self.realized.namespaces[node], lambda port=port: _open(port))
            except OSError:
                # kube-proxy logs "can't open port ..., skipping it" and writes the rules anyway; so does the
                # lab (two Services with one externalIP:port are the case: the second one's port is taken).
                continue

    def _release(self) -> None:
        for sock in self.held.values():
            sock.close()
        self.held.clear()

    def close(self) -> None:
        self._release()
        self.localhost.close()
