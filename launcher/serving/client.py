"""HTTP client for TensorFlow Serving's REST API (a local model server or KServe).

A server is anything with `url(path)` and `send(method, path, body, timeout)`:
`HttpServer` at an http(s) base URL (standard library only; loopback addresses never go
through a configured HTTP proxy), or an InferenceService's predictor reached through the
Kubernetes API server (launcher/serving/k8s.py `ServiceProxy`).
"""
from __future__ import annotations

import ipaddress
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Protocol

from ..backends.base import BackendError

TIMEOUT = 60.0


class ServingError(BackendError):
    """The model server answered with an error (`status`: its HTTP status) or could not be
    reached (`status` None)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class NoAnswer(ServingError):
    """The model server did not answer in time (it may have been reached: hung, or busy)."""


class Server(Protocol):
    def url(self, path: str) -> str:
        """Where `path` of the REST API is (for messages)."""

    def send(self, method: str, path: str, body: dict | None, timeout: float) -> tuple[int, bytes]:
        """(HTTP status, raw answer); ServingError when nothing answered."""


def _loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _opener(url: str) -> urllib.request.OpenerDirector:
    if _loopback(url):
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


class HttpServer:
    """A model server at an http(s) base URL (http://HOST:PORT); `timeout`, when given, bounds
    every answer in place of the caller's (predict's --request-timeout)."""

    def __init__(self, base: str, timeout: float | None = None):
        self.base, self.timeout = base.rstrip("/"), timeout

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    def send(self, method: str, path: str, body: dict | None, timeout: float) -> tuple[int, bytes]:
        url = self.url(path)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/json"} if data else {})
        try:
            timeout = self.timeout or timeout
            with _opener(url).open(request, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            if isinstance(reason, TimeoutError):  # reached, perhaps, but no answer (a hung or busy server)
                raise NoAnswer(f"{url}: the model server did not answer within {timeout:g} s") from None
            raise ServingError(f"{url}: cannot reach the model server ({reason})") from None


def call(server: Server, path: str, body: dict | None = None, timeout: float = TIMEOUT) -> dict:
    """GET (body None) or POST a JSON body; the JSON answer, or ServingError with the
    server's {"error": ...} message (or the Kubernetes Status message of a proxy)."""
    status, raw = server.send("GET" if body is None else "POST", path, body, timeout)
    if status >= 400:
        raise ServingError(f"{server.url(path)}: HTTP {status}: {error_text(raw)}", status)
    try:
        return json.loads(raw or b"{}")
    except ValueError:
        raise ServingError(f"{server.url(path)}: the answer is not JSON") from None


def error_text(raw: bytes) -> str:
    """The message of an error answer: TF Serving's {"error": ...}, a Kubernetes Status's
    message (the API server's own answer, e.g. no endpoints), else the body's start."""
    try:
        answer = json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace").strip()[:500] or "no message"
    if isinstance(answer, dict) and "error" not in answer and answer.get("kind") == "Status":
        return str(answer.get("message") or answer.get("reason") or answer)
    return str(answer.get("error", answer)) if isinstance(answer, dict) else str(answer)


def ready(server: Server, name: str, timeout: float = 5.0) -> bool:
    """True when GET /v1/models/NAME says ready."""
    try:
        return call(server, f"/v1/models/{name}", timeout=timeout).get("ready") is True
    except ServingError:
        return False


def metadata(server: Server, name: str) -> dict:
    """{signature name: sorted input names} from GET /v1/models/NAME/metadata."""
    answer = call(server, f"/v1/models/{name}/metadata")
    defs = answer.get("metadata", {}).get("signature_def", {}).get("signature_def", {})
    return {key: sorted(value.get("inputs", {})) for key, value in defs.items()}


def predict(server: Server, name: str, instances: list, signature: str | None = None) -> list:
    """The predictions for `instances` (row format)."""
    body: dict = {"instances": instances}
    if signature:
        body["signature_name"] = signature
    path = f"/v1/models/{name}:predict"
    answer = call(server, path, body)
    predictions = answer.get("predictions")
    if not isinstance(predictions, list) or len(predictions) != len(instances):
        raise ServingError(f"{server.url(path)}: expected {len(instances)} predictions, got {str(answer)[:200]}")
    return predictions
