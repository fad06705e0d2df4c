"""HTTP plumbing of the FAKE API server (tests/support/apiserver/): a threaded
HTTP/1.1 server, JSON answers, and chunked streams (watch, log -f) that can be ended,
cut mid-way, or noticed to have lost their client."""
from __future__ import annotations

import json
import select
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .rules import ApiError


class Server(ThreadingHTTPServer):
    """Serves `app.handle(handler, method)` on 127.0.0.1 (free port), a thread per connection."""

    daemon_threads = True

    def __init__(self, app):
        super().__init__(("127.0.0.1", 0), Handler)
        self.app = app
        self.connections: set[socket.socket] = set()

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client hanging up is normal
            super().handle_error(request, client_address)

    def close_connections(self) -> None:
        for conn in list(self.connections):
            shutdown(conn)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"
    timeout = 120  # idle keep-alive connections end

    def setup(self) -> None:
        super().setup()
        self.server.connections.add(self.connection)

    def finish(self) -> None:
        self.server.connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def do_GET(self) -> None:
        self.server.app.handle(self, "GET")

    def do_POST(self) -> None:
        self.server.app.handle(self, "POST")

    def do_DELETE(self) -> None:
        self.server.app.handle(self, "DELETE")

    def log_message(self, *args) -> None:
        pass


class Chunked:
    """A chunked (Transfer-Encoding) 200 answer, as watch and log -f streams are."""

    def __init__(self, h: Handler, content_type: str = "application/json"):
        self.h = h
        h.send_response(200)
        h.send_header("Content-Type", content_type)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

    def write(self, text: str) -> bool:
        """False when the client has gone away."""
        data = text.encode()
        return self._raw(b"%x\r\n%s\r\n" % (len(data), data)) if data else True

    def event(self, kind: str, obj: dict) -> bool:
        return self.write(json.dumps({"type": kind, "object": obj}) + "\n")

    def end(self) -> None:
        self._raw(b"0\r\n\r\n")

    def client_gone(self) -> bool:
        """The client closed its end (what the apiserver notices as a cancelled request)."""
        conn = self.h.connection
        try:
            if not select.select([conn], [], [], 0)[0]:
                return False
            return conn.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def cut(self) -> None:
        """Drop the stream mid-way: no final chunk, connection shut down."""
        self.h.close_connection = True
        shutdown(self.h.connection)

    def _raw(self, data: bytes) -> bool:
        try:
            self.h.wfile.write(data)
            return True
        except OSError:  # the client went away
            self.h.close_connection = True
            return False


def shutdown(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def send(h: Handler, code: int, content_type: str, body: bytes) -> None:
    h.send_response(code)
    h.send_header("Content-Type", content_type)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def send_json(h: Handler, code: int, obj: dict) -> None:
    send(h, code, "application/json", json.dumps(obj).encode())


def read_body(h: Handler) -> dict:
    raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
    try:
        body = json.loads(raw or b"{}")
    except ValueError as exc:
        raise ApiError(400, "BadRequest", f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "BadRequest", "the body must be a JSON object")
    return body
