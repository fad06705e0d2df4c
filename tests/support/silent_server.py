"""A TCP server that accepts connections and never answers (what a hung API server, or a
load balancer with no healthy backend, looks like to a client), for timeout tests.

    with SilentServer() as server:
        server.url          # http://127.0.0.1:PORT
        server.accepted     # connections accepted so far

Connections are held open (nothing is read or written) until the server closes; the
accept thread and every socket are closed on exit.

`run_client` runs a client command (a launcher) against it, and bounds the time from its
first connection to its end, not from its start: a Python process takes seconds to start
on a loaded machine (imports), which says nothing about its timeouts."""
from __future__ import annotations

import socket
import subprocess
import threading
import time

from tests.support.polling import wait_for

STARTUP_S = 120.0  # a client's start (interpreter, imports) until it connects, on a loaded machine


class SilentServer:
    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._held: list[socket.socket] = []
        self.first_accepted: float | None = None  # time.monotonic() of the first connection
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
                if self.first_accepted is None:
                    self.first_accepted = time.monotonic()

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


def run_client(server: SilentServer, command: list[str], bound: float, **popen) -> subprocess.CompletedProcess:
    """Run `command` (text output captured) to its end; fail unless it connects to `server`
    within STARTUP_S and ends within `bound` seconds of that first connection."""
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **popen)
    try:
        def not_ended_unconnected() -> None:
            if proc.poll() is not None and server.first_accepted is None:
                out, err = proc.communicate()
                raise AssertionError(f"{command} exited {proc.returncode} without connecting:\n{out}{err}")

        first = wait_for(lambda: server.first_accepted, f"{command} to connect", STARTUP_S, check=not_ended_unconnected)
        try:
            out, err = proc.communicate(timeout=max(0.0, first + bound - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"{command} still running {bound:g} s after it connected:\n{out}{err}") from None
        return subprocess.CompletedProcess(command, proc.returncode, out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
