"""A small TLS-terminating HTTPS proxy for tests (the project's own; never used in production).

libcurl (and so TensorFlow's built-in gs:// filesystem) honours ``https_proxy``: it sends
``CONNECT host:443`` to the proxy and then speaks TLS *through* the tunnel. This proxy
answers the CONNECT for an allow-list of hosts, terminates TLS itself with a leaf
certificate signed by a throw-away CA (give the CA file to the client as
``CURL_CA_BUNDLE``), reads the plain HTTP/1.1 requests inside the tunnel and forwards
them to one plain-HTTP upstream (a local emulator), keeping the original ``Host``.

Fixes applied on the way (each one seen with TensorFlow + fake-gcs-server):
- ``Transfer-Encoding: identity`` (sent by TF on empty POSTs) is dropped; the request body
  is always forwarded with an exact ``Content-Length`` (chunked bodies are de-chunked).
- ``Location:`` headers the upstream returns as ``http://`` (on the Google host or on the
  upstream's own address) are rewritten to ``https://<host>/...`` so follow-up requests
  (resumable upload PUTs) stay on the proxy.

Opt-in fault injection (tests of retries): ``proxy.inject(Fault(503, ("POST",), "/upload/"))``
answers the next matching request(s) inside the tunnel with that status and a GCS-style JSON
error body instead of forwarding them; ``times=None`` fails every match until
``proxy.clear_faults()``. Injected answers are recorded in ``forwarded`` with ``injected=True``.
Without faults the proxy behaves exactly as before.
"""

from __future__ import annotations

import http.client
import http.server
import json
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tests.support.certs import Authority

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te",
     "trailer", "transfer-encoding", "upgrade", "expect"}
)
TUNNEL_IDLE_TIMEOUT_S = 120.0
UPSTREAM_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ForwardedRequest:
    """One request carried through a tunnel, as the upstream answered it."""

    method: str
    host: str
    path: str
    status: int
    injected: bool = False  # answered by an injected Fault, never reached the upstream


@dataclass
class Fault:
    """Answer requests matching ``methods`` (empty: any) and ``path`` (a substring of the
    URL-decoded request target, query included; the whole target when ``exact``, e.g. a
    bucket's metadata ``/storage/v1/b/NAME`` and not its objects) with ``status``, for the
    next ``times`` matches (None: every match). ``hits`` counts the requests it answered."""

    status: int
    methods: tuple[str, ...] = ()
    path: str = ""
    times: int | None = 1
    hits: int = 0
    exact: bool = False

    def matches(self, method: str, target: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        decoded = unquote(target)
        return (not self.methods or method in self.methods) and (
            decoded == self.path if self.exact else self.path in decoded)


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path
    leaf_cert: Path
    leaf_key: Path


def make_throwaway_tls(directory: Path, hosts: tuple[str, ...]) -> TlsFiles:
    """A throw-away CA and a leaf certificate for ``hosts`` (tests/support/certs.py), as PEM files."""
    ca = Authority()
    files = TlsFiles(ca.write(directory / "ca.pem"), directory / "leaf.pem", directory / "leaf-key.pem")
    ca.issue(files.leaf_cert, files.leaf_key, *hosts)
    return files


def phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def read_chunked(rfile) -> bytes:
    """Read a ``Transfer-Encoding: chunked`` body (and its trailers) from ``rfile``."""
    body = bytearray()
    while True:
        size_line = rfile.readline(65537)
        if not size_line:
            raise ConnectionError("client closed the connection inside a chunked body")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                pass  # trailers are dropped
            return bytes(body)
        body += rfile.read(size)
        rfile.readline(65537)  # CRLF after the chunk data


class _TunnelHandler(http.server.BaseHTTPRequestHandler):
    """CONNECT, then TLS, then each inner HTTP/1.1 request is forwarded upstream."""

    protocol_version = "HTTP/1.1"
    server: "_ProxyServer"
    tunnel_host: str | None = None
    upstream: http.client.HTTPConnection | None = None

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(TUNNEL_IDLE_TIMEOUT_S)
        self.server.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self.upstream is not None:
                self.upstream.close()
            self.server.untrack(self.connection)
            if self.tunnel_host is not None:
                # the server only closes the plain socket it accepted, which the TLS one detached
                self.connection.close()

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - stdlib signature
        pass  # requests are recorded in server.forwarded instead

    def do_CONNECT(self) -> None:
        if self.tunnel_host is not None:
            self.send_error(400, "CONNECT inside a tunnel")
            return
        host, _, port = self.path.rpartition(":")
        if host not in self.server.hosts or port != "443":
            self.server.refused.append(self.path)
            self.send_error(403, f"proxy only tunnels {sorted(self.server.hosts)} on 443")
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        self.wfile.flush()
        self.server.untrack(self.connection)
        tls = self.server.tls_context.wrap_socket(self.connection, server_side=True)
        self.connection = self.request = tls
        self.rfile = tls.makefile("rb", self.rbufsize)
        self.wfile = tls.makefile("wb", 0)
        self.tunnel_host = host
        self.server.track(tls)
        self.close_connection = False

    def _forward(self) -> None:
        if self.tunnel_host is None:
            self.send_error(405, "this proxy only serves CONNECT tunnels")
            return
        body = self._read_body()
        fault = self.server.take_fault(self.command, self.path)
        if fault is not None:
            self._answer_fault(fault)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        headers["Host"] = self.tunnel_host
        if body is not None:
            headers["Content-Length"] = str(len(body))
        try:
            status, reason, resp_headers, resp_body = self._send_upstream(body, headers)
        except (OSError, http.client.HTTPException) as exc:
            self.server.record(ForwardedRequest(self.command, self.tunnel_host, self.path, 502))
            self.send_error(502, f"upstream {self.server.upstream_netloc} failed: {exc!r}")
            return
        self.server.record(ForwardedRequest(self.command, self.tunnel_host, self.path, status))
        self.send_response(status, reason)
        for key, value in resp_headers:
            if key.lower() == "location":
                value = self._rewrite_location(value)
            if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                self.send_header(key, value)
        if self.command == "HEAD":
            length = dict((k.lower(), v) for k, v in resp_headers).get("content-length")
            if length is not None:
                self.send_header("Content-Length", length)
        elif status >= 200 and status not in (204, 304):
            self.send_header("Content-Length", str(len(resp_body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(resp_body)

    def _answer_fault(self, fault: Fault) -> None:
        self.server.record(ForwardedRequest(self.command, self.tunnel_host, self.path, fault.status, True))
        reason = phrase(fault.status)
        body = json.dumps({"error": {"code": fault.status, "message": f"injected fault: {reason}"}}).encode()
        self.send_response(fault.status, reason)
        self.send_header("Content-Type", "application/json")
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _forward

    def _read_body(self) -> bytes | None:
        encoding = self.headers.get("Transfer-Encoding", "").strip().lower()
        if encoding.endswith("chunked"):
            return read_chunked(self.rfile)
        length = self.headers.get("Content-Length")
        if length is not None:
            return self.rfile.read(int(length))
        if self.command in ("POST", "PUT", "PATCH"):
            return b""  # e.g. TF's empty POST with "Transfer-Encoding: identity"
        return None

    def _send_upstream(self, body, headers):
        """One request upstream on a kept-alive connection; reconnect once if it went stale."""
        for attempt in (1, 2):
            reused = self.upstream is not None
            if self.upstream is None:
                self.upstream = http.client.HTTPConnection(
                    self.server.upstream_host, self.server.upstream_port,
                    timeout=UPSTREAM_TIMEOUT_S)
            try:
                self.upstream.request(self.command, self.path, body=body, headers=headers)
                resp = self.upstream.getresponse()
                resp_body = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.upstream.close()
                self.upstream = None
                if reused and attempt == 1:
                    continue
                raise
            if resp.will_close:
                self.upstream.close()
                self.upstream = None
            return resp.status, resp.reason, resp.getheaders(), resp_body
        raise AssertionError("unreachable")

    def _rewrite_location(self, value: str) -> str:
        """http://<upstream or tunnelled host>/... -> https://<tunnelled host>/...

        fake-gcs-server builds upload session URLs from the request's Host with scheme http;
        libcurl would fetch such a URL without the https proxy (and fail to resolve it).
        """
        parts = urlsplit(value)
        if parts.scheme != "http":
            return value
        if parts.netloc in self.server.hosts:
            host = parts.netloc
        elif parts.netloc == self.server.upstream_netloc:
            host = self.tunnel_host
        else:
            return value
        return parts._replace(scheme="https", netloc=host).geturl()


class _ProxyServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, upstream: str, hosts: frozenset[str], tls_context: ssl.SSLContext):
        super().__init__(("127.0.0.1", 0), _TunnelHandler)
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"upstream must be http://host:port, got {upstream!r}")
        self.upstream_host, self.upstream_port = parts.hostname, parts.port
        self.upstream_netloc = f"{parts.hostname}:{parts.port}"
        self.hosts = hosts
        self.tls_context = tls_context
        self.forwarded: list[ForwardedRequest] = []
        self.refused: list[str] = []
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self.faults: list[Fault] = []

    def take_fault(self, method: str, target: str) -> Fault | None:
        """The first injected fault matching this request, its hit counted; None: forward it."""
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, target):
                    fault.hits += 1
                    return fault
        return None

    def record(self, request: ForwardedRequest) -> None:
        with self._lock:
            self.forwarded.append(request)

    def track(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)

    def close_all(self) -> None:
        with self._lock:
            socks, self._open = list(self._open), set()
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class TlsTerminatingProxy:
    """Run the proxy on 127.0.0.1 in a background thread. Use as a context manager."""

    def __init__(self, upstream: str, hosts: tuple[str, ...], workdir: Path):
        self.tls = make_throwaway_tls(workdir, hosts)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.tls.leaf_cert, self.tls.leaf_key)
        self._server = _ProxyServer(upstream, frozenset(hosts), context)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="tls-proxy", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def ca_file(self) -> Path:
        return self.tls.ca_cert

    @property
    def forwarded(self) -> list[ForwardedRequest]:
        return list(self._server.forwarded)

    @property
    def refused(self) -> list[str]:
        return list(self._server.refused)

    def inject(self, fault: Fault) -> Fault:
        """Fail matching requests from now on (see Fault); returns it (its ``hits`` count)."""
        with self._server._lock:
            self._server.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._server._lock:
            self._server.faults.clear()

    def start(self) -> "TlsTerminatingProxy":
        self._thread.start()  # the socket is already listening: no readiness wait needed
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.close_all()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> "TlsTerminatingProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
