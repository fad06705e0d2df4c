"""HTTP client for TensorFlow Serving's REST API (a local model server or KServe).

Standard library only. Loopback addresses never go through a configured HTTP proxy.
"""
from __future__ import annotations

import ipaddress
import json
import urllib.error
import urllib.parse
import urllib.request

from ..backends.base import BackendError

TIMEOUT = 60.0


class ServingError(BackendError):
    """The model server answered with an error or could not be reached."""


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


def call(url: str, body: dict | None = None, timeout: float = TIMEOUT) -> dict:
    """GET (body None) or POST a JSON body; the JSON answer, or ServingError with the
    server's {"error": ...} message."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"} if data else {})
    try:
        with _opener(url).open(request, timeout=timeout) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        raise ServingError(f"{url}: HTTP {error.code}: {_error_text(error)}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise ServingError(f"{url}: cannot reach the model server ({reason})") from None
    except ValueError:
        raise ServingError(f"{url}: the answer is not JSON") from None


def _error_text(error: urllib.error.HTTPError) -> str:
    raw = error.read()
    try:
        answer = json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace").strip()[:500] or error.reason
    return str(answer.get("error", answer)) if isinstance(answer, dict) else str(answer)


def ready(base: str, name: str, timeout: float = 5.0) -> bool:
    """True when GET /v1/models/NAME says ready."""
    try:
        return call(f"{base}/v1/models/{name}", timeout=timeout).get("ready") is True
    except ServingError:
        return False


def metadata(base: str, name: str) -> dict:
    """{signature name: sorted input names} from GET /v1/models/NAME/metadata."""
    answer = call(f"{base}/v1/models/{name}/metadata")
    defs = answer.get("metadata", {}).get("signature_def", {}).get("signature_def", {})
    return {key: sorted(value.get("inputs", {})) for key, value in defs.items()}


def predict(base: str, name: str, instances: list, signature: str | None = None) -> list:
    """The predictions for `instances` (row format)."""
    body: dict = {"instances": instances}
    if signature:
        body["signature_name"] = signature
    answer = call(f"{base}/v1/models/{name}:predict", body)
    predictions = answer.get("predictions")
    if not isinstance(predictions, list) or len(predictions) != len(instances):
        raise ServingError(f"{base}/v1/models/{name}:predict: expected {len(instances)} predictions, "
                           f"got {str(answer)[:200]}")
    return predictions
