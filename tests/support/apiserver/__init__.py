"""FAKE Kubernetes API server for tests: a test double, not a Kubernetes.

A small threaded HTTP server on 127.0.0.1 (free port) speaking the real Kubernetes REST
and watch protocol for exactly what `launcher.backends.k8s` uses, so the backend runs
unchanged against it through a kubeconfig (bearer token or exec plugin):

- TFJobs (kubeflow.org/v1): create (dryRun=All; 409 AlreadyExists; 422 Invalid after a
  check against the openAPIV3Schema of the CRD file the e2e control plane installs,
  launcher/schemas/kubeflow.org_tfjobs.yaml, read here as data, and its defaults filled in; status dropped as a
  status subresource does), get, list (one or all namespaces), watch, delete
  (propagationPolicy Foreground or Background, doing the garbage collector's part).
- services: get, list, watch (the operator's headless services, written by FakeOperator).
- pods: get, list, watch, log (follow, tailLines, previous, timestamps, sinceSeconds and
  sinceTime; the kubelet's rules for which container instance a waiting, restarted or
  terminated container serves, and for which lines a time keeps). Pods are written
  by `FakeOperator` (tests/support/fakes/operator.py), not over HTTP.
- pods as Tables (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, includeObject):
  list and watch, rendered as kube-apiserver's pod printer does (apiserver_table.py).
- events (core/v1): list and watch, fieldSelector on involvedObject / reason; written by
  `FakeOperator.unschedulable` as the scheduler's FailedScheduling event; `forbidden`
  answers 403 for a resource, as RBAC does.
- Lists and watches take labelSelector (equality only) and fieldSelector
  (metadata.name / metadata.namespace). resourceVersion is one counter for every object,
  like etcd's revision. A watch from a version replays the changes after it as chunked,
  newline-delimited JSON events; a version older than the last `compact()` gets 410 Gone
  as an ERROR event in a 200 stream (what the apiserver's watch cache does) or, with
  `gone_mode = "http"`, as an HTTP 410.
- Test controls: `drop_watches()` cuts open watch streams mid-stream (no final chunk),
  optionally holding new watches until `release_watches()`; `compact()`; `requests`
  records every request; `auto_gc = False` leaves foreground deletions pending until
  `collect_garbage()`.

Not implemented because the backend does not use them: update/patch, pod writes over
HTTP, other resources (networkpolicies: create, get, delete only), bookmarks, paged lists, set-based selectors, server-side pruning.
"""
from __future__ import annotations

import bisect
import copy
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from .http import Chunked, Handler, Server, read_body, send, send_json
from .table import table, wants_table
from .rules import (TFJOB_API, ApiError, apply_defaults, check_tfjob, details, group_resource, kubelet_log_source,
                    log_container, log_since, not_found, now, rfc3339_nano, selector, verb_of)

TOKEN = "fake-apiserver-token"
HOLD_LIMIT = 30.0  # seconds a held watch waits for release_watches()
POLL = 0.1  # seconds between checks that a streaming client is still there
_ROUTES = [
    ("pods", "collection", re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods$")),
    ("pods", "item", re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)$")),
    ("pods", "log", re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/log$")),
    ("services", "collection", re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/services$")),
    ("services", "item", re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/services/(?P<name>[^/]+)$")),
    ("events", "collection", re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/events$")),
    ("tfjobs", "collection", re.compile(r"^/apis/kubeflow\.org/v1/tfjobs$")),
    ("tfjobs", "collection", re.compile(r"^/apis/kubeflow\.org/v1/namespaces/(?P<ns>[^/]+)/tfjobs$")),
    ("tfjobs", "item", re.compile(r"^/apis/kubeflow\.org/v1/namespaces/(?P<ns>[^/]+)/tfjobs/(?P<name>[^/]+)$")),
    ("networkpolicies", "collection",
     re.compile(r"^/apis/networking\.k8s\.io/v1/namespaces/(?P<ns>[^/]+)/networkpolicies$")),
    ("networkpolicies", "item",
     re.compile(r"^/apis/networking\.k8s\.io/v1/namespaces/(?P<ns>[^/]+)/networkpolicies/(?P<name>[^/]+)$")),
]
_KINDS = {"pods": ("v1", "Pod", "PodList"), "services": ("v1", "Service", "ServiceList"), "events": ("v1", "Event", "EventList"),
          "tfjobs": (TFJOB_API, "TFJob", "TFJobList"),
          "networkpolicies": ("networking.k8s.io/v1", "NetworkPolicy", "NetworkPolicyList")}
_READ_ONLY = {"pods": ("list", "watch", "get", "log"), "services": ("list", "watch", "get"),
              "events": ("list", "watch")}  # written by FakeOperator


@dataclass(frozen=True)
class Change:
    version: int
    resource: str
    type: str  # ADDED, MODIFIED, DELETED
    object: dict


@dataclass(frozen=True)
class Request:
    method: str
    resource: str
    verb: str  # list, watch, get, create, delete, log
    query: dict


@dataclass
class ContainerLog:
    """The log of one container instance (one container ID)."""
    lines: list[str] = field(default_factory=list)
    times: list[int] = field(default_factory=list)  # each line's time as the runtime recorded it (ns since the epoch)
    done: bool = False
    lost: int = 0  # answers still to give as the kubelet does for a container the runtime no longer has
    removed: bool = False  # every answer so: the kubelet removed the container (see FakeOperator.exit_in_back_off)


class FakeApiServer:
    """FAKE kube-apiserver (see the module docstring for what it does and does not do)."""

    def __init__(self, token: str = TOKEN, namespaces: tuple[str, ...] = ("default", "kubeflow")):
        self.token = token
        self.namespaces = set(namespaces)
        self.resources = {"pods", "services", "events", "tfjobs", "networkpolicies"}  # discard "tfjobs" for a cluster without the CRD
        self.forbidden: set[str] = set()  # resources RBAC does not let the client read (403)
        self.unavailable: set[tuple[str, str]] = set()  # (resource, verb) answered 503, as by a server restarting
        self.cond = threading.Condition()
        self.version = 1
        self.objects: dict[tuple[str, str, str], dict] = {}
        self.history: list[Change] = []
        self.floor = 0  # watches from an older version get 410 Gone
        self.gone_mode = "event"
        self.auto_gc = True
        self.requests: list[Request] = []
        self.logs: dict[str, ContainerLog] = {}  # container ID -> log
        self._pending_gc: list[tuple[str, tuple[str, str, str] | None]] = []
        self._drops = 0
        self.open_watches = 0
        self._held = False
        self._lagging: set[str] = set()  # resources whose open watches deliver nothing new for now
        self._stopping = False
        self._httpd: Server | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle ----------------------------------------------------------------
    def start(self) -> "FakeApiServer":
        self._httpd = Server(self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(POLL,), name="fake-apiserver",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self.cond:
            self._stopping = True
            self.cond.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.close_connections()
        self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def kubeconfig(self, user: dict | None = None, namespace: str = "default") -> dict:
        """A kubeconfig for this server; `user` defaults to the bearer token."""
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": user or {"token": self.token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}],
        }

    def write_kubeconfig(self, path: Path, user: dict | None = None) -> Path:
        path.write_text(yaml.safe_dump(self.kubeconfig(user)))
        return path

    # ---- the store (HTTP handlers and FakeOperator write through these) -------------
    def get(self, resource: str, namespace: str, name: str) -> dict | None:
        with self.cond:
            obj = self.objects.get((resource, namespace, name))
            return copy.deepcopy(obj)

    def create(self, resource: str, obj: dict, dry_run: bool = False) -> dict:
        """Store a new object (ADDED); with `dry_run`, only answer what would be stored."""
        meta = obj["metadata"]
        with self.cond:
            if (resource, meta["namespace"], meta["name"]) in self.objects:
                raise ApiError(409, "AlreadyExists", f'{group_resource(resource)} "{meta["name"]}" already exists',
                               details(resource, meta["name"]))
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
            return copy.deepcopy(obj) if dry_run else self._commit(resource, "ADDED", obj)

    def update(self, resource: str, namespace: str, name: str, change) -> dict:
        """Apply `change(obj)` to a copy of the stored object and store it (MODIFIED)."""
        with self.cond:
            obj = copy.deepcopy(self.objects[(resource, namespace, name)])
            change(obj)
            return self._commit(resource, "MODIFIED", obj)

    def remove(self, resource: str, namespace: str, name: str) -> dict:
        with self.cond:
            obj = copy.deepcopy(self.objects[(resource, namespace, name)])
            if resource == "pods":
                for log in self._container_logs(obj):
                    log.done = True
            return self._commit(resource, "DELETED", obj)

    def _commit(self, resource: str, kind: str, obj: dict) -> dict:
        meta = obj["metadata"]
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        key = (resource, meta["namespace"], meta["name"])
        if kind == "DELETED":
            self.objects.pop(key)
        else:
            self.objects[key] = obj
        self.history.append(Change(self.version, resource, kind, copy.deepcopy(obj)))
        self.cond.notify_all()
        return copy.deepcopy(obj)

    def collect_garbage(self) -> None:
        """The garbage collector: delete the pods of deleted TFJobs, then finish
        foreground deletions (the owner goes after its dependents)."""
        with self.cond:
            pending, self._pending_gc = self._pending_gc, []
            for owner_uid, owner_key in pending:
                for key, obj in list(self.objects.items()):
                    owners = obj["metadata"].get("ownerReferences") or []
                    if key[0] in ("pods", "services", "networkpolicies") and any(o.get("uid") == owner_uid for o in owners):
                        self.remove(*key)
                if owner_key and owner_key in self.objects:
                    self.remove(*owner_key)

    # ---- container logs (written by FakeOperator) ---------------------------------
    def append_log(self, container_id: str, *lines: str) -> None:
        with self.cond:
            log = self.logs.setdefault(container_id, ContainerLog())
            log.lines.extend(lines)
            log.times.extend(time.time_ns() for _ in lines)
            self.cond.notify_all()

    def end_log(self, container_id: str) -> None:
        with self.cond:
            self.logs.setdefault(container_id, ContainerLog()).done = True
            self.cond.notify_all()

    def lose_log(self, container_id: str, answers: int) -> None:
        """The next `answers` log requests for this container get what kubelet v1.36.3 gives
        when its status still names a container the runtime has removed (its garbage
        collection, right after a restart): a 200, committed by the zero-byte write of
        pkg/kubelet/kubelet_pods.go GetKubeletContainerLogs, whose body is the error of
        pkg/kubelet/kuberuntime/kuberuntime_container.go GetContainerLogs (go-restful's
        WriteError after the header: the text alone, no newline)."""
        with self.cond:
            self.logs.setdefault(container_id, ContainerLog()).lost = answers

    def remove_container(self, container_id: str) -> None:
        """The runtime no longer has this container: every log request that names it gets
        the answer of `lose_log`."""
        with self.cond:
            self.logs.setdefault(container_id, ContainerLog()).removed = True

    def lost_answers_left(self, container_id: str) -> int:
        with self.cond:
            return self.logs[container_id].lost

    def _container_logs(self, pod: dict) -> list[ContainerLog]:
        ids = [s.get("containerID") for s in (pod.get("status") or {}).get("containerStatuses") or []]
        return [self.logs[i] for i in ids if i in self.logs]

    # ---- test controls --------------------------------------------------------------
    def drop_watches(self, hold: bool = False) -> None:
        """Cut every open watch stream mid-stream; with `hold`, new watches wait for
        `release_watches()` (so a test can change things while no stream is open)."""
        with self.cond:
            self._drops += 1
            self._held = hold
            self.cond.notify_all()

    def release_watches(self) -> None:
        with self.cond:
            self._held = False
            self.cond.notify_all()

    def lag_watches(self, resource: str, lag: bool = True) -> None:
        """While `lag`, open watches of `resource` deliver nothing new (lists and gets are
        current), as a watch cache that has not caught up with etcd; then they catch up."""
        with self.cond:
            (self._lagging.add if lag else self._lagging.discard)(resource)
            self.cond.notify_all()

    def compact(self) -> None:
        """Forget history: watches from any version before now get 410 Gone."""
        with self.cond:
            self.floor = self.version

    def count(self, resource: str | None = None, verb: str | None = None) -> int:
        with self.cond:
            return sum(1 for r in self.requests
                       if (resource is None or r.resource == resource) and (verb is None or r.verb == verb))

    def watches(self, resource: str) -> list[Request]:
        with self.cond:
            return [r for r in self.requests if r.resource == resource and r.verb == "watch"]

    # ---- HTTP -----------------------------------------------------------------------
    def handle(self, h: Handler, method: str) -> None:
        url = urlsplit(h.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        route = next(((res, kind, m) for res, kind, pattern in _ROUTES if (m := pattern.match(url.path))), None)
        try:
            refused = (ApiError(401, "Unauthorized", "Unauthorized")
                       if h.headers.get("Authorization") != f"Bearer {self.token}" else
                       ApiError(404, "NotFound", "the server could not find the requested resource")
                       if route is None or route[0] not in self.resources else None)
            if refused:
                if int(h.headers.get("Content-Length") or 0):
                    read_body(h)  # as a real server does: the connection stays usable
                raise refused
            resource, kind, match = route
            if resource in self.forbidden:
                raise ApiError(403, "Forbidden", f'{resource} is forbidden: User "fake" cannot {method.lower()} '
                                                 f'resource "{resource}" in API group ""')
            ns, name = match.groupdict().get("ns"), match.groupdict().get("name")
            verb = verb_of(method, kind, query)
            with self.cond:
                self.requests.append(Request(method, resource, verb, query))
            if (resource, verb) in self.unavailable:
                raise ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request")
            handler = getattr(self, f"_{verb}", None)
            if handler is None or verb not in _READ_ONLY.get(resource, (verb,)):
                raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on {resource}")
            handler(h, resource, ns, name, query, h.headers.get("Accept"))
        except ApiError as err:
            send_json(h, err.status["code"], err.status)

    def _list(self, h, resource, ns, name, query, accept=None) -> None:
        select = selector(ns, query, resource)
        with self.cond:
            items = [copy.deepcopy(o) for (res, _, _), o in sorted(self.objects.items())
                     if res == resource and select(o)]
            version = str(self.version)
        if resource == "pods" and wants_table(accept):
            send_json(h, 200, table(items, version, query.get("includeObject")))
            return
        api_version, _, list_kind = _KINDS[resource]
        send_json(h, 200, {"apiVersion": api_version, "kind": list_kind,
                           "metadata": {"resourceVersion": version}, "items": items})

    def _get(self, h, resource, ns, name, query, accept=None) -> None:
        obj = self.get(resource, ns, name)
        if obj is None:
            raise not_found(resource, name)
        send_json(h, 200, obj)

    def _create(self, h, resource, ns, name, query, accept=None) -> None:
        obj = read_body(h)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", ns)
        if ns not in self.namespaces:
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})
        if meta["namespace"] != ns:
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the "
                                              "namespace sent on the request")
        if resource == "tfjobs":
            check_tfjob(obj)
            apply_defaults(obj)
        obj.pop("status", None)  # the status subresource: status is not written on create
        send_json(h, 201, self.create(resource, obj, dry_run=query.get("dryRun") == "All"))

    def _delete(self, h, resource, ns, name, query, accept=None) -> None:
        options = read_body(h) if int(h.headers.get("Content-Length") or 0) else {}
        policy = query.get("propagationPolicy") or options.get("propagationPolicy") or "Background"
        if policy not in ("Foreground", "Background"):
            raise ApiError(400, "BadRequest", f"propagationPolicy {policy} is not supported by this fake")
        with self.cond:
            obj = self.objects.get((resource, ns, name))
            if obj is None:
                raise not_found(resource, name)
            uid = obj["metadata"]["uid"]
            if policy == "Foreground":
                def mark(o):
                    o["metadata"].setdefault("deletionTimestamp", now())
                    o["metadata"]["finalizers"] = sorted({*o["metadata"].get("finalizers", []), "foregroundDeletion"})
                answer = self.update(resource, ns, name, mark)
                self._pending_gc.append((uid, (resource, ns, name)))
            else:
                answer = self.remove(resource, ns, name)
                self._pending_gc.append((uid, None))
            if self.auto_gc:
                self.collect_garbage()
        send_json(h, 200, answer)

    def _watch(self, h, resource, ns, name, query, accept=None) -> None:
        select = selector(ns, query, resource)
        shape = None
        if resource == "pods" and wants_table(accept):  # each event's object: a Table of one row
            def shape(obj):
                return table([obj], obj["metadata"]["resourceVersion"], query.get("includeObject"), headers=False)
        deadline = time.monotonic() + int(query.get("timeoutSeconds") or 1800)
        with self.cond:
            self.cond.wait_for(lambda: not self._held or self._stopping, timeout=HOLD_LIMIT)
            drops = self._drops
            since = query.get("resourceVersion") or "0"
            expired = since != "0" and int(since) < self.floor
            if since == "0":  # "start at most recent": the current objects as ADDED
                initial = [("ADDED", copy.deepcopy(o)) for (res, _, _), o in sorted(self.objects.items())
                           if res == resource and select(o)]
                cursor = len(self.history)
            else:
                initial = []
                cursor = bisect.bisect_right([c.version for c in self.history], int(since))
        if expired:
            self._gone(h, since)
            return
        with self.cond:
            self.open_watches += 1
        try:
            self._stream_changes(Chunked(h), resource, select, initial, cursor, drops, deadline, shape)
        finally:
            with self.cond:
                self.open_watches -= 1

    def _stream_changes(self, stream: Chunked, resource: str, select, initial: list, cursor: int,
                        drops: int, deadline: float, shape=None) -> None:
        shape = shape or (lambda obj: obj)
        for kind, obj in initial:
            stream.event(kind, shape(obj))
        while True:
            with self.cond:
                self.cond.wait_for(lambda: (cursor < len(self.history) and resource not in self._lagging)
                                   or self._stopping or self._drops != drops or time.monotonic() >= deadline,
                                   timeout=max(0.0, min(POLL, deadline - time.monotonic())))
                if self._drops != drops:
                    stream.cut()
                    return
                if resource not in self._lagging:
                    batch, cursor = self.history[cursor:], len(self.history)
                else:
                    batch = []
                if not batch and (self._stopping or time.monotonic() >= deadline):
                    stream.end()  # timeout or stopping: a clean end
                    return
            if not batch and stream.client_gone():
                return
            for change in batch:
                if change.resource == resource and select(change.object):
                    if not stream.event(change.type, shape(change.object)):
                        return  # the client went away

    def _gone(self, h, since: str) -> None:
        status = ApiError(410, "Expired", f"too old resource version: {since} ({self.floor})").status
        if self.gone_mode == "http":
            send_json(h, 410, status)
            return
        stream = Chunked(h)
        stream.event("ERROR", status)
        stream.end()

    def _log(self, h, resource, ns, name, query, accept=None) -> None:
        if "sinceSeconds" in query and "sinceTime" in query:  # the real one's ValidatePodLogOptions
            raise ApiError(422, "Invalid", f'PodLogOptions "{name}" is invalid: []: Forbidden: at most one of '
                                           "`sinceTime` or `sinceSeconds` may be specified")
        pod = self.get("pods", ns, name)
        if pod is None:
            raise not_found("pods", name)
        container = log_container(pod, query.get("container"))
        container_id = kubelet_log_source(pod, container, previous=query.get("previous") == "true")
        with self.cond:
            log = self.logs.setdefault(container_id, ContainerLog())
            lost, log.lost = log.removed or log.lost > 0, max(log.lost - 1, 0)
        if lost:
            send(h, 200, "text/plain", f"unable to retrieve container logs for {container_id}".encode())
            return
        stamped, since = query.get("timestamps") == "true", log_since(query)

        def shown(start: int, end: int) -> str:  # the kubelet's: lines at or after since, each after its time
            return "".join((rfc3339_nano(t) + " " if stamped else "") + line + "\n"
                           for line, t in zip(log.lines[start:end], log.times[start:end]) if t >= since)
        with self.cond:
            sent = len(log.lines)
            tail = int(query["tailLines"]) if "tailLines" in query else None  # the kubelet's: the last N
            text = shown(0 if tail is None else max(sent - tail, 0), sent)
        if query.get("follow") != "true":
            send(h, 200, "text/plain", text.encode())
            return
        stream = Chunked(h, "text/plain")
        stream.write(text)
        uid = pod["metadata"]["uid"]
        while True:
            with self.cond:
                finished = self.cond.wait_for(lambda: len(log.lines) > sent or log.done or self._stopping
                                              or self._pod_uid(ns, name) != uid, timeout=POLL)
                start, sent = sent, len(log.lines)
                text = shown(start, sent)
            if finished and start == sent:
                stream.end()
                return
            if not stream.write(text) or stream.client_gone():
                return

    def _pod_uid(self, ns: str, name: str) -> str | None:
        obj = self.objects.get(("pods", ns, name))
        return obj["metadata"]["uid"] if obj else None


# ---- fixtures ---------------------------------------------------------------------------------
@pytest.fixture
def fake_apiserver():
    """A started FAKE API server (test double), stopped after the test."""
    server = FakeApiServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_kubeconfig(fake_apiserver, tmp_path) -> Path:
    return fake_apiserver.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def fake_operator(fake_apiserver):
    """FAKE training-operator + kubelet writing into the fake API server."""
    from ..fakes.operator import FakeOperator

    return FakeOperator(fake_apiserver)


@pytest.fixture
def k8s_backend(fake_kubeconfig):
    """launcher's KubernetesBackend talking to the FAKE API server through a kubeconfig."""
    from launcher.backends.k8s import KubernetesBackend  # the Kubernetes client loads only here

    backend = KubernetesBackend(kubeconfig=str(fake_kubeconfig))
    try:
        yield backend
    finally:
        backend.close()
