"""Kubernetes API access for the k8s backend: config loading, request counting, errors.

Built on the official `kubernetes` client. The backend works on plain JSON dicts for pods
and TFJobs alike (raw responses, no generated models), through `KubeApi`. Every API
request goes through `CountingApiClient.call_api`, so `RequestCounter` sees all of them.

Every error message passes through `redact` (in `one_line`): the kubeconfig's bearer
tokens, passwords, client keys and auth-provider secrets, the token in use and any
"Bearer ..." or PEM private key never reach the terminal; nor do the control characters
of the server's words, which `one_line` shows as text (`terminal_safe`). The kubernetes client logs a
failing exec credential plugin's stderr at ERROR level; those records are withheld
(`_ExecPluginRecords`) and the launcher says only that the plugin failed and its exit code.
"""
from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import ssl
import sys
import threading
import warnings
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from ...events import terminal_safe
from ...spec import SpecError
from ..base import AlreadyExists, BackendError, CRDUnavailable, NotFound
from ..kubeconfig import LOCAL_HINT, check_kubeconfig
from . import table

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "tfjobs"
CONNECT_TIMEOUT = 10  # seconds to open a connection
CALL_TIMEOUT = 30  # default seconds to wait for the answer of a plain (non-streaming) call (--request-timeout)
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"  # Accept: the server's Table form (table.py)
SCHEDULING_EVENTS = "involvedObject.kind=Pod,reason=FailedScheduling"
_QUERY = {"label_selector": "labelSelector", "field_selector": "fieldSelector", "watch": "watch",
          "resource_version": "resourceVersion", "allow_watch_bookmarks": "allowWatchBookmarks",
          "timeout_seconds": "timeoutSeconds"}
_POOL_SIZE = 32  # log -f holds one connection per replica
REDACTED = "<redacted>"
_PATTERNS = (re.compile(r"(?i)\bbearer\s+[^\s\"',;]+"),
             re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.S))
_SECRET_KEYS = ("token", "password", "client-key-data", "id-token", "refresh-token", "access-token",
                "client-secret", "access_token", "refresh_token")
_SECRETS: set[str] = set()
_MIN_SECRET = 6  # shorter values would blank out ordinary words


def redact(text: str) -> str:
    """`text` without the known secrets of the loaded kubeconfig, bearer tokens or private keys."""
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(REDACTED, text)
    return text


def _secret_values(node, key: str = "") -> Iterator[str]:
    """Values under secret-looking keys of a kubeconfig (and base64-decoded key data)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _secret_values(v, str(k))
    elif isinstance(node, list):
        for v in node:
            yield from _secret_values(v, key)
    elif isinstance(node, str) and key in _SECRET_KEYS:
        yield node
        if key.endswith("-data"):
            try:
                decoded = base64.b64decode(node, validate=False).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                return
            yield decoded
            yield from (line for line in decoded.splitlines() if "-----" not in line)


def remember_secrets(paths: str, cfg: client.Configuration | None = None) -> None:
    """Note the secrets of the kubeconfig files in `paths` (and those `cfg` ended up with)."""
    for path in paths.split(os.pathsep):
        try:
            with open(os.path.expanduser(path)) as f:
                _SECRETS.update(v.strip() for v in _secret_values(yaml.safe_load(f)))
        except (OSError, yaml.YAMLError, ValueError):
            continue
    for value in ((cfg.api_key or {}).values() if cfg else ()):
        _SECRETS.add(str(value).split()[-1] if value else "")
    _SECRETS.difference_update({s for s in _SECRETS if len(s) < _MIN_SECRET})


class _ExecPluginRecords(logging.Filter):
    """Withholds the kubernetes client's log records of a failing exec plugin (they carry
    the plugin's stderr) and keeps their exit code."""

    def __init__(self) -> None:
        super().__init__()
        self.failures: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if "/kubernetes/config/" not in record.pathname.replace(os.sep, "/"):
            return True
        message = record.getMessage()
        if message.startswith("exec:") or "process returned" in message:
            code = re.search(r"process returned (-?\d+)", message)
            self.failures.append(code[1] if code else "")
        return False


_EXEC_RECORDS = _ExecPluginRecords()


class RequestCounter:
    """Counts API requests by "METHOD resource[ verb]", e.g. "GET pods watch"."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def record(self, method: str, url: str) -> None:
        key = f"{method.upper()} {request_kind(method, url)}"
        with self._lock:
            self._counts[key] += 1

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


def request_kind(method: str, url: str) -> str:
    """"pods watch", "pods list", "pods/log", "tfjobs create", "tfjobs item" (get, delete)."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    query = parts.query.lower()
    for resource in ("pods", "tfjobs", "events"):
        if resource in segments:
            rest = segments[segments.index(resource) + 1:]
            if len(rest) >= 2:
                return f"{resource}/{rest[1]}"
            if rest:
                return f"{resource} item"
            if method.upper() == "POST":
                return f"{resource} create"
            return f"{resource} {'watch' if 'watch=true' in query else 'list'}"
    return "/".join(segments) or "/"


class Received:
    """Bytes and changes received per watched kind ("pod", "tfjob", "event"), from lists
    and from watch streams apart, and how often each watch was opened again and why
    ("rewatches", "drops", "relists": watch.py): what following a job costs the client."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, Counter[str]] = {}

    def add(self, kind: str, **counts: int) -> None:
        with self._lock:
            self._counts.setdefault(kind, Counter()).update(counts)

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {kind: dict(counts) for kind, counts in self._counts.items()}

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def watch_bytes_per_change(self, kind: str) -> float:
        return watch_bytes_per_change(self.snapshot().get(kind, {}))


def watch_bytes_per_change(counts: dict[str, int]) -> float:
    """Bytes received on the watch stream per change, from one kind's `Received.snapshot()`
    (NaN: no change received, which no comparison passes)."""
    return counts["watch_bytes"] / counts["changes"] if counts.get("changes") else float("nan")


class NoReadTimeoutRetry(urllib3.Retry):
    """urllib3's retries, except after a read timeout: a server that accepted the request
    and did not answer in time would otherwise make the user wait several timeouts."""

    def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None):
        if isinstance(error, urllib3.exceptions.ReadTimeoutError):
            raise error
        return super().increment(method, url, response, error, _pool, _stacktrace)


class CountingApiClient(client.ApiClient):
    """The official ApiClient, counting every request it makes (plain, list, watch, log)."""

    def __init__(self, configuration: client.Configuration, counter: RequestCounter):
        super().__init__(configuration)
        self.counter = counter

    def call_api(self, method, url, *args, **kwargs):
        self.counter.record(method, url)
        return super().call_api(method, url, *args, **kwargs)


class _FullPool(logging.Filter):
    """Drops urllib3's "Connection pool is full, discarding connection": `logs -f` holds a
    connection per replica, more than the pool keeps, and each ended stream's connection is
    closed as it should be; a warning line per replica would only be noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Connection pool is full")


_FULL_POOL = _FullPool()


def load_configuration(kubeconfig: str | None = None, context: str | None = None) -> client.Configuration:
    """Kubeconfig (explicit path, $KUBECONFIG, ~/.kube/config; exec plugins such as
    gke-gcloud-auth-plugin included) or, when none exists, the in-cluster service account."""
    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    explicit = kubeconfig is not None or context is not None or bool(os.environ.get("KUBECONFIG"))
    exists = any(os.path.exists(os.path.expanduser(p)) for p in path.split(os.pathsep) if p)
    remember_secrets(path)
    root = logging.getLogger()
    if _EXEC_RECORDS not in root.filters:
        root.addFilter(_EXEC_RECORDS)  # stays: the client runs the plugin again to refresh
    pool_log = logging.getLogger("urllib3.connectionpool")
    if _FULL_POOL not in pool_log.filters:
        pool_log.addFilter(_FULL_POOL)
    del _EXEC_RECORDS.failures[:]
    if explicit or exists:
        check_kubeconfig(path, kubeconfig, context)
    try:
        if explicit or exists:
            config.load_kube_config(config_file=path, context=context, client_configuration=cfg,
                                    persist_config=False)
        else:
            config.load_incluster_config(client_configuration=cfg)
    except Exception as exc:  # ConfigException, OSError, YAML errors, a failing exec plugin
        where = f"kubeconfig {path}" if explicit or exists else "no kubeconfig at ~/.kube/config and not in a cluster"
        raise BackendError(f"no usable Kubernetes configuration ({where}: {one_line(exc)}); "
                           f"set KUBECONFIG or --kubeconfig, {LOCAL_HINT}") from None
    remember_secrets("", cfg)
    if _EXEC_RECORDS.failures:
        code = _EXEC_RECORDS.failures[-1]
        raise BackendError(f"kubeconfig {path}: the user's exec credential plugin failed"
                           f"{f' with exit code {code}' if code else ''}; its output is not shown (it may hold "
                           f"credentials): run the plugin's command yourself, {LOCAL_HINT}")
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, _POOL_SIZE)
    cfg.retries = NoReadTimeoutRetry(total=urllib3.Retry.DEFAULT.total)
    if not cfg.verify_ssl:  # say it once, instead of urllib3's warning on every request
        warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
        print(f"note: TLS certificates of {cfg.host} are not verified (insecure-skip-tls-verify in the "
              "kubeconfig)", file=sys.stderr)
    return cfg


def absent(name: str, namespace: str) -> str:
    return f"tfjob {name} not found in namespace {namespace}"


def one_line(value: object) -> str:
    """`value` as one line, secrets redacted and control characters shown, not acted on
    (every error message of the backend goes here: the server's words may be anyone's)."""
    return terminal_safe(redact(" ".join(str(value).split())))


def status_of(exc: ApiException) -> dict:
    """The Kubernetes Status object of an error answer ({} when the body is not one)."""
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def server_message(exc: ApiException) -> str:
    """The server's reason and message, plus any field causes the message leaves out."""
    status = status_of(exc)
    message = status.get("message") or exc.reason or f"HTTP {exc.status}"
    reason = status.get("reason") or exc.reason or ""
    extra = [f"{c.get('field')}: {c.get('message')}"
             for c in (status.get("details") or {}).get("causes") or []
             if c.get("field") and c.get("field") not in message]
    text = f"{reason}: {message}" if reason and reason not in message else message
    return one_line("; ".join([text, *extra]))


_WEBHOOK_FAILED = re.compile(r'failed calling webhook "([^"]+)"')
# RBAC's 403 (the apiserver's forbiddenMessage); other 403s (an admission webhook's or a
# policy's denial, an exceeded ResourceQuota) are no missing right
_RBAC_FORBIDDEN = re.compile(r'forbidden: User "[^"]*" cannot ')
RBAC_HINT = "ask the cluster's admin for that right (the launcher's k8s/rbac.yaml has the Role it needs)"


TRAINING_OPERATOR = "the training-operator's: kubectl get pods -n kubeflow"  # whose webhook a TFJob meets


def refusal(action: str, exc: ApiException, host: str, webhook_owner: str = TRAINING_OPERATOR) -> BackendError:
    """The server's refusal of `action` in one line, with what to do about it when that is
    the user's to fix: credentials it does not accept (401), a right RBAC does not grant
    (RBAC's 403; another 403, a webhook's or policy's denial or an exceeded quota, is the
    server's line alone), an admission webhook nobody answers (500; `webhook_owner`: the
    controller that serves it, and how to look at it), a namespace that does not exist."""
    details = status_of(exc).get("details") or {}
    message = str(status_of(exc).get("message", ""))
    if exc.status == 401:
        fix = (f"the API server at {host} does not accept the kubeconfig's credentials (a token expired or unknown, "
               "or a client certificate it does not trust); renew them (GKE: gcloud container clusters "
               "get-credentials CLUSTER; kind: kind export kubeconfig) and retry")
    elif exc.status == 403 and _RBAC_FORBIDDEN.search(message):
        fix = RBAC_HINT
    elif exc.status == 500 and (hook := _WEBHOOK_FAILED.search(message)):
        fix = (f"the admission webhook {hook[1]} could not be called: the controller that serves it is down or "
               f"unreachable; check that it runs ({webhook_owner}) or ask the cluster's admin")
    elif exc.status == 404 and details.get("kind") == "namespaces":
        namespace = details.get("name", "")
        fix = f"create it (kubectl create namespace {namespace}) or give another with -n/--namespace"
    else:
        return BackendError(one_line(f"{action}: {server_message(exc)}"))
    return BackendError(one_line(f"{action}: {server_message(exc)}; {fix}"))


@contextmanager
def api_errors(host: str, action: str, missing_api: str, not_found: str | None = None, exists: str | None = None,
               webhook_owner: str = TRAINING_OPERATOR) -> Iterator[None]:
    """The one reading of a failed call to the API server at `host` for `action`, for the
    TFJob and the InferenceService alike: `missing_api`, the line's end when the server
    lacks the resource type (its CRD); NotFound / AlreadyExists with their lines when given;
    else refusal(); a server not reached, unreachable()."""
    try:
        yield
    except ApiException as exc:
        if is_missing_api(exc):
            raise BackendError(f"{action}: {missing_api}") from None
        if exc.status == 404 and not_found:
            raise NotFound(not_found) from None
        if exc.status == 409 and exists:
            raise AlreadyExists(exists) from None
        raise refusal(action, exc, host, webhook_owner) from None
    except TRANSPORT_ERRORS as exc:
        raise unreachable(host, exc) from None


def is_missing_api(exc: ApiException) -> bool:
    """404 for the resource type itself (CRD not installed), not for one object."""
    return exc.status == 404 and not (status_of(exc).get("details") or {}).get("name")


def timed_out(exc: Exception) -> bool:
    reason = getattr(exc, "reason", None)
    return any(isinstance(e, (urllib3.exceptions.ReadTimeoutError, TimeoutError)) for e in (exc, reason))


def untrusted(exc: Exception) -> bool:
    """Whether the TLS handshake failed on the server's certificate (the kubeconfig's CA does
    not verify it, or it does not name the server's address)."""
    reason = getattr(exc, "reason", None)
    return any(isinstance(e, ssl.SSLCertVerificationError)
               for e in (exc, reason, *getattr(exc, "args", ()), *getattr(reason, "args", ())))


def unreachable(host: str, exc: Exception) -> BackendError:
    reason = getattr(exc, "reason", None) or exc
    if untrusted(exc):
        return BackendError(one_line(f"the Kubernetes API server at {host} answered with a certificate the kubeconfig "
                                     f"does not trust ({reason}); fix the cluster's certificate-authority-data (or "
                                     "certificate-authority) in the kubeconfig, e.g. fetch it again (GKE: gcloud "
                                     "container clusters get-credentials CLUSTER; kind: kind export kubeconfig)"))
    if timed_out(exc):
        return BackendError(one_line(f"the Kubernetes API server at {host} did not answer in time ({reason}); "
                                     f"check that it is up (kubectl get --raw /readyz), raise --request-timeout, "
                                     f"{LOCAL_HINT}"))
    return BackendError(one_line(f"cannot reach the Kubernetes API server at {host} ({reason}); "
                                 f"check your kubeconfig context, {LOCAL_HINT}"))


TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, OSError)


class KubeApi:
    """The calls the backend makes, on JSON dicts, with errors turned into BackendError."""

    def __init__(self, api_client: CountingApiClient, request_timeout: float = CALL_TIMEOUT):
        self.client = api_client
        self.timeout = (min(CONNECT_TIMEOUT, request_timeout), request_timeout)  # (connect, read) of plain calls
        self.log_options: dict = {}  # previous / since_seconds / timestamps for pod_log (see with_log_options)
        self.host = api_client.configuration.host
        self.received = Received()
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.networking = client.NetworkingV1Api(api_client)
        self.extensions = client.ApiextensionsV1Api(api_client)

    def errors(self, action: str, not_found: str | None = None, exists: str | None = None):
        """api_errors() of a TFJob call."""
        return api_errors(self.host, action, f"the server has no {PLURAL}.{GROUP}/{VERSION} API; install the "
                          f"Kubeflow training-operator v1.9 (it brings the TFJob CRD), {LOCAL_HINT}", not_found, exists)

    # ---- CRDs ---------------------------------------------------------------------
    def get_crd(self, crd_name: str) -> dict:
        """The CustomResourceDefinition object; CRDUnavailable when missing or forbidden."""
        try:
            return read_json(self.extensions.read_custom_resource_definition(
                crd_name, _preload_content=False, _request_timeout=self.timeout))
        except ApiException as exc:
            if exc.status == 401:  # credentials the server does not accept: nothing else will work either
                raise refusal(f"reading CRD {crd_name}", exc, self.host) from None
            why = {403: "not permitted to read it", 404: "not installed"}.get(exc.status, server_message(exc))
            raise CRDUnavailable(f"cannot read CRD {crd_name} from {self.host} ({why})") from None
        except TRANSPORT_ERRORS as exc:
            raise unreachable(self.host, exc) from None

    # ---- TFJobs -------------------------------------------------------------------
    def create_tfjob(self, tfjob: dict, dry_run: bool = False) -> dict:
        namespace = tfjob["metadata"].get("namespace", "default")
        return self.custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, tfjob, dry_run="All" if dry_run else None,
            _request_timeout=self.timeout)

    def get_tfjob(self, name: str, namespace: str) -> dict:
        """The TFJob; NotFound (with the name and namespace) when there is none."""
        with self.errors(f"reading tfjob {name}", not_found=absent(name, namespace)):
            return self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _request_timeout=self.timeout)

    def delete_tfjob(self, name: str, namespace: str, propagation: str) -> dict:
        return self.custom.delete_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, propagation_policy=propagation,
            _request_timeout=self.timeout)

    def tfjobs(self, namespace: str | None, **params) -> urllib3.BaseHTTPResponse:
        """List or (watch=True) watch TFJobs; the raw response."""
        params.setdefault("_request_timeout", self.timeout)
        if namespace is None:
            return self.custom.list_custom_object_for_all_namespaces(
                GROUP, VERSION, PLURAL, _preload_content=False, **params)
        return self.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, _preload_content=False, **params)

    # ---- NetworkPolicies ----------------------------------------------------------
    def create_network_policy(self, policy: dict, dry_run: bool = False) -> dict:
        return self.networking.create_namespaced_network_policy(
            policy["metadata"]["namespace"], policy, dry_run="All" if dry_run else None, _preload_content=False,
            _request_timeout=self.timeout)

    def replace_network_policy(self, policy: dict, dry_run: bool = False) -> dict:
        meta = policy["metadata"]
        return self.networking.replace_namespaced_network_policy(
            meta["name"], meta["namespace"], policy, dry_run="All" if dry_run else None, _preload_content=False,
            _request_timeout=self.timeout)

    # ---- pods ---------------------------------------------------------------------
    def pod_rows(self, namespace: str, _request_timeout=None, **params) -> urllib3.BaseHTTPResponse:
        """List or (watch=True) watch pods as Table rows without their objects
        (includeObject=None): the server's summary of each pod, not the pod (`table.py`).
        The generated client has no includeObject, so this is its low-level call."""
        query = [(_QUERY[key], value) for key, value in params.items()] + [("includeObject", "None")]
        return self._get("/api/v1/namespaces/{namespace}/pods", {"namespace": namespace}, query, TABLE,
                         _request_timeout or self.timeout)

    def _get(self, path: str, path_params: dict, query: list[tuple[str, object]], accept: str,
             timeout) -> urllib3.BaseHTTPResponse:
        """A GET below the generated client (for the query parameters it lacks): `query`'s
        None values left out, booleans as true/false, a 0 kept; the streamed answer, or the
        ApiException of an error status."""
        query = [(key, str(value).lower() if isinstance(value, bool) else str(value))
                 for key, value in query if value is not None]
        request = self.client.param_serialize("GET", path, path_params=path_params, query_params=query,
                                              header_params={"Accept": accept}, auth_settings=["BearerToken"])
        response = self.client.call_api(*request, _request_timeout=timeout)
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response.response

    def list_pod_rows(self, namespace: str, label_selector: str) -> list[table.PodRow]:
        """The pods of a label selector as they are now, one list, as rows."""
        return self.list_pod_table(namespace, label_selector)[0]

    def list_pod_table(self, namespace: str, label_selector: str) -> tuple[list[table.PodRow], str]:
        """`list_pod_rows` and the list's resourceVersion."""
        body = read_json(self.pod_rows(namespace, label_selector=label_selector))
        return table.rows(body)[0], str((body.get("metadata") or {}).get("resourceVersion") or "")

    def get_pod(self, name: str, namespace: str) -> dict | None:
        """One pod object (None when it is gone)."""
        try:
            return read_json(self.core.read_namespaced_pod(name, namespace, _preload_content=False,
                                                           _request_timeout=self.timeout))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def scheduling_events(self, namespace: str, **params) -> urllib3.BaseHTTPResponse:
        """List or (watch=True) watch the scheduler's FailedScheduling events of pods."""
        params.setdefault("_request_timeout", self.timeout)
        return self.core.list_namespaced_event(namespace, field_selector=SCHEDULING_EVENTS,
                                               _preload_content=False, **params)

    def scheduling_messages(self, namespace: str) -> list[dict]:
        """The FailedScheduling events of the namespace; [] where RBAC does not allow them."""
        try:
            return read_json(self.scheduling_events(namespace)).get("items") or []
        except ApiException as exc:
            if exc.status == 403:
                return []
            raise

    def warnings_of(self, kind: str, uid: str, namespace: str) -> list[dict]:
        """The Warning events of one object (a controller's, e.g. the training-operator's
        FailedCreatePod on a TFJob); [] where RBAC does not allow reading events."""
        selector = f"involvedObject.kind={kind},involvedObject.uid={uid},type=Warning"
        try:
            return read_json(self.core.list_namespaced_event(namespace, field_selector=selector, _preload_content=False,
                                                             _request_timeout=self.timeout)).get("items") or []
        except ApiException as exc:
            if exc.status == 403:
                return []
            raise

    def pod_log(self, name: str, namespace: str, container: str, follow: bool,
                tail_lines: int | None = None, since_time: str | None = None,
                timestamps: bool | None = None, previous: bool | None = None) -> urllib3.BaseHTTPResponse:
        """The current container instance's log (kubelet rules), its last `tail_lines` lines
        only when given (kubectl's --tail: tailLines); streamed when `follow` (without a read
        timeout: a training step may print nothing for a long time). `since_time` (RFC 3339,
        whole seconds as the API takes it: the kubelet serves the lines at or after it) takes
        the place of the options' since_seconds, the two being exclusive; `timestamps` and
        `previous` override the options'. The generated client has no sinceTime, so this is
        its low-level call."""
        options = {**self.log_options, **{k: v for k, v in (("timestamps", timestamps), ("previous", previous))
                                          if v is not None}}
        if since_time is not None:
            options.pop("since_seconds", None)
        query = [("container", container), ("follow", follow or None), ("previous", options.get("previous") or None),
                 ("sinceSeconds", options.get("since_seconds")), ("sinceTime", since_time),
                 ("timestamps", options.get("timestamps") or None), ("tailLines", tail_lines)]  # a flag off: left out
        return self._get("/api/v1/namespaces/{namespace}/pods/{name}/log", {"namespace": namespace, "name": name},
                         query, "*/*", None if follow else self.timeout)

    def with_log_options(self, previous: bool = False, since_seconds: int | None = None,
                         timestamps: bool = False) -> "KubeApi":
        """The same API (same client) whose pod_log asks the kubelet for these options."""
        import copy

        api = copy.copy(self)
        api.log_options = {k: v for k, v in (("previous", previous), ("since_seconds", since_seconds),
                                             ("timestamps", timestamps)) if v}
        return api

    def current_container(self) -> "KubeApi":
        """The same API with the same log options, but for the current container (not previous)."""
        return self.with_log_options(**{**self.log_options, "previous": False})

    def close(self) -> None:
        self.client.close()


def read_json(response: urllib3.BaseHTTPResponse) -> dict:
    try:
        return json.loads(response.data)
    finally:
        response.release_conn()


def iter_lines(response: urllib3.BaseHTTPResponse) -> Iterator[str]:
    """Lines of a streamed answer as they arrive (a last line without newline included)."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=True):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            yield line.decode("utf-8", errors="replace")
    if buffer:
        yield buffer.decode("utf-8", errors="replace")


def finish(response: urllib3.BaseHTTPResponse) -> None:
    """Give a streamed answer's connection back, closed: a stream stopped before its end
    (or shut down by `abort`) must never be reused for the next request."""
    response.close()
    response.release_conn()


def abort(response: urllib3.BaseHTTPResponse | None) -> None:
    """Unblock a thread reading `response` (from another thread): shut the socket down."""
    if response is None:
        return
    try:
        response.shutdown()
    except Exception:  # already released or closed: nothing is blocked on it
        pass
