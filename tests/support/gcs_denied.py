"""A test double of the GCS JSON API that denies every request (HTTP 403 in GCS's error
format), named as such: the real emulator (fake-gcs-server) has no IAM, so "permission
denied" cannot be reached with a real part here. Point a google-cloud-storage client at it
with STORAGE_EMULATOR_HOST=server.url.

    with DeniedGcs() as server:
        server.url          # http://127.0.0.1:PORT
        server.requests     # (method, path) of every request answered
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STOP_TIMEOUT_S = 10.0
BODY = json.dumps({"error": {"code": 403, "message": "anonymous caller does not have storage.objects.list "
                             "access to the Google Cloud Storage bucket. Permission denied.",
                             "errors": [{"domain": "global", "reason": "forbidden",
                                         "message": "Permission denied."}]}}).encode()


class _Deny(BaseHTTPRequestHandler):
    def _deny(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.requests.append((self.command, self.path))  # type: ignore[attr-defined]
        self.send_response(403)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _deny

    def log_message(self, *args) -> None:  # quiet
        pass


class DeniedGcs:
    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Deny)
        self._server.requests = []  # type: ignore[attr-defined]
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
