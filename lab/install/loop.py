"""One thread serving many non-blocking sockets (made in many namespaces), stoppable at once."""

from __future__ import annotations

import selectors
import socket
import threading
from typing import Any


class SocketLoop:
    """Subclasses implement `handle(sock, data)`; every registered socket is closed on `close()`."""

    def __init__(self, name: str) -> None:
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._sockets: dict[socket.socket, Any] = {}
        self._stop_r, self._stop_w = socket.socketpair()
        self._selector.register(self._stop_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def register(self, sock: socket.socket, data: Any) -> None:
        sock.setblocking(False)
        self._sockets[sock] = data
        self._selector.register(sock, selectors.EVENT_READ, data)

    def unregister(self, sock: socket.socket) -> None:
        self._selector.unregister(sock)
        self._sockets.pop(sock, None)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop_w.send(b"x")
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        self.close_sockets(list(self._sockets))
        self._stop_r.close()
        self._stop_w.close()
        self._selector.close()

    def close_sockets(self, sockets: list[socket.socket]) -> None:
        """Close the registered sockets, one after another (a TCP or UDP socket closes at once)."""
        for sock in sockets:
            sock.close()

    def handle(self, sock: socket.socket, data: Any) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while True:
            for key, _ in self._selector.select():
                if key.data is None:
                    return
                self.handle(key.fileobj, key.data)  # type: ignore[arg-type]
