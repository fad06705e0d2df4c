"""A TCP server that accepts connections and never answers (what a hung API server, or a
load balancer with no healthy backend, looks like to a client), for timeout tests.

    with SilentServer() as server:
        server.url          # http://127.0.0.1:PORT
        server.accepted     # connections accepted so far

Connections are held open (nothing is read or written) until the server closes; the
accept thread and every socket are closed on exit."""
from __future__ import annotations

import socket
import threading


class SilentServer:
    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="silent-server", daemon=True)

    @property
    def accepted(self) -> int:
        with self._lock:
            return len(self._held)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                self._held.append(conn)

    def kubeconfig(self) -> dict:
        return {"apiVersion": "v1", "kind": "Config", "current-context": "silent",
                "clusters": [{"name": "silent", "cluster": {"server": self.url}}],
                "users": [{"name": "silent", "user": {"token": "t"}}],
                "contexts": [{"name": "silent", "context": {"cluster": "silent", "user": "silent"}}]}

    def __enter__(self) -> "SilentServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self._thread.join(timeout=5)
        with self._lock:
            for conn in self._held:
                conn.close()
            self._held.clear()
