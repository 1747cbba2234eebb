"""kube-proxy 1.37's userspace proxy for localhost NodePorts (KubeProxyNFTablesLocalhostNodePorts), on the nodes
whose render says it runs (lab/render/kubeproxy/nftables.py: LocalhostNodePort).

As pkg/proxy/localnodeportproxy/proxy.go does it (kubernetes/kubernetes@0cee7368): one TCP listener per NodePort on
127.0.0.1 inside the node's namespace; each accepted connection gets an endpoint (at random, or the one pinned for
ClientIP affinity while it keeps being used within the timeout) and a new connection to it, dialled from the node
within 5 s, so the backend sees the node's own address on the route to it, not 127.0.0.1; bytes are copied both ways
and each side's end is passed on (a half close). A failed dial closes the client's connection. Listeners follow each
sync (new ones opened, gone ones closed, endpoints replaced) and all close, with their connections, when kube-proxy
restarts or the variant ends. The sockets are made in the node's namespace like the echo backends'; one thread
accepts, a connection's two copies run in threads of their own, as kube-proxy's in goroutines.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from lab.install.loop import SocketLoop
from lab.realize.build import Realized
from lab.realize.enter import in_netns
from lab.render.dataplane import NodeDataplane
from lab.render.kubeproxy.nftables import LocalhostNodePort

# IPv4 alone: the gate serves 127.0.0.0/8, and the IPv6 proxier no NodePort on ::1 (lab/render/kubeproxy/nftables.py).
LISTEN_ADDRESS = "127.0.0.1"
DIAL_TIMEOUT = 5.0  # dialTimeout


@dataclass
class _Listener:
    """One NodePort's listener: what the latest sync gave it, and the ClientIP pin."""

    netns: str
    spec: LocalhostNodePort
    lock: threading.Lock = field(default_factory=threading.Lock)
    pinned: str = ""
    pinned_at: float = 0.0

    def pick(self) -> str:
        """pickEndpoint: the pinned endpoint while it is still one and was used within the timeout, else a random
        one (pinned anew under affinity)."""
        with self.lock:
            endpoints, timeout, now = self.spec.endpoints, self.spec.affinity_timeout, time.monotonic()
            if timeout and self.pinned in endpoints and now - self.pinned_at <= timeout:
                self.pinned_at = now
                return self.pinned
            chosen = random.choice(endpoints)
            if timeout:
                self.pinned, self.pinned_at = chosen, now
            return chosen

    def update(self, spec: LocalhostNodePort) -> None:
        with self.lock:
            if spec.affinity_timeout != self.spec.affinity_timeout:
                self.pinned = ""
            self.spec = spec


class LocalhostProxy(SocketLoop):
    def __init__(self, realized: Realized) -> None:
        super().__init__("localhost-proxy")
        self.realized = realized
        self.listeners: dict[tuple[str, int], tuple[socket.socket, _Listener]] = {}
        self.connections: set[socket.socket] = set()
        self.started = False

    def sync(self, planes: Mapping[str, NodeDataplane], restart: bool = False) -> None:
        """SyncNodePorts on every node (restart: a new kube-proxy process, whose listeners all start anew)."""
        if restart:
            self._close_listeners()
        wanted = {(node, spec.node_port): spec for node, plane in planes.items() for spec in plane.localhost_proxy}
        for key in [key for key in self.listeners if key not in wanted]:
            sock, _ = self.listeners.pop(key)
            self.unregister(sock)
            sock.close()
        for (node, port), spec in sorted(wanted.items()):
            if (node, port) in self.listeners:
                self.listeners[node, port][1].update(spec)
                continue
            netns = self.realized.namespaces[node]
            try:
                sock = in_netns(netns, lambda port=port: _listen(port))
            except OSError:
                continue  # "Failed to create localhost nodeport proxy": kube-proxy logs it and goes on
            listener = _Listener(netns, spec)
            self.listeners[node, port] = (sock, listener)
            self.register(sock, listener)
        if self.listeners and not self.started:
            self.started = True
            self.start()

    def handle(self, sock: socket.socket, listener: _Listener) -> None:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        conn.setblocking(True)
        threading.Thread(target=self._forward, args=(conn, listener), daemon=True).start()

    def _forward(self, conn: socket.socket, listener: _Listener) -> None:
        """handleTCPConn: dial the endpoint from the node, then copy both ways until both sides ended."""
        host, _, port = listener.pick().rpartition(":")
        backend = in_netns(listener.netns, lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        self._track(conn, backend)
        try:
            backend.settimeout(DIAL_TIMEOUT)
            backend.connect((host, int(port)))
            backend.settimeout(None)
        except OSError:
            self._untrack(conn, backend)
            return
        back = threading.Thread(target=_copy, args=(backend, conn), daemon=True)
        back.start()
        _copy(conn, backend)
        back.join()
        self._untrack(conn, backend)

    def _track(self, *socks: socket.socket) -> None:
        with self._lock:
            self.connections.update(socks)

    def _untrack(self, *socks: socket.socket) -> None:
        with self._lock:
            self.connections.difference_update(socks)
        for sock in socks:
            sock.close()

    def _close_listeners(self) -> None:
        """Shutdown: every listener and every connection through it."""
        for sock, _ in self.listeners.values():
            self.unregister(sock)
            sock.close()
        self.listeners.clear()
        with self._lock:
            connections, self.connections = self.connections, set()
        for sock in connections:
            _shut(sock)

    def close(self) -> None:
        self._close_listeners()
        super().close()


def _listen(port: int) -> socket.socket:
    """net.Listen("tcp", "127.0.0.1:PORT"): Go sets SO_REUSEADDR on listeners."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LISTEN_ADDRESS, port))
        sock.listen(socket.SOMAXCONN)
    except OSError:
        sock.close()
        raise
    return sock


def _copy(source: socket.socket, destination: socket.socket) -> None:
    """io.Copy, then CloseWrite on the destination: its reader sees the end the source sent."""
    try:
        while data := source.recv(65536):
            destination.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        destination.shutdown(socket.SHUT_WR)


def _shut(sock: socket.socket) -> None:
    """Ends a connection another thread is copying on: its blocked recv returns, and that thread closes it."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
