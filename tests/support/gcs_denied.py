"""A test double of the GCS JSON API that refuses every request with one status (403 by
default) in GCS's error format, named as such: the real emulator (fake-gcs-server) has no
IAM and never fails, so "permission denied" and a failing GCS cannot be reached with a
real part here. Point a google-cloud-storage client at it with STORAGE_EMULATOR_HOST=server.url.

    with DeniedGcs() as server:         # or DeniedGcs(status=400)
        server.url          # http://127.0.0.1:PORT
        server.requests     # (method, path) of every request answered
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STOP_TIMEOUT_S = 10.0
MESSAGES = {403: ("forbidden", "anonymous caller does not have storage.objects.list access to the Google Cloud "
                  "Storage bucket. Permission denied."),
            400: ("invalid", "Invalid argument.")}


def body(status: int) -> bytes:
    reason, message = MESSAGES.get(status, ("backendError", "Backend error."))
    return json.dumps({"error": {"code": status, "message": message,
                                 "errors": [{"domain": "global", "reason": reason, "message": message}]}}).encode()


class _Deny(BaseHTTPRequestHandler):
    def _deny(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.requests.append((self.command, self.path))  # type: ignore[attr-defined]
        status = self.server.status  # type: ignore[attr-defined]
        answer = body(status)
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _deny

    def log_message(self, *args) -> None:  # quiet
        pass


class DeniedGcs:
    def __init__(self, status: int = 403) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Deny)
        self._server.requests = []  # type: ignore[attr-defined]
        self._server.status = status  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="denied-gcs", daemon=True)

    @property
    def requests(self) -> list[tuple[str, str]]:
        return list(self._server.requests)  # type: ignore[attr-defined]

    def __enter__(self) -> "DeniedGcs":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=STOP_TIMEOUT_S)
