"""List-then-watch, the client-go reflector's protocol, in a thread feeding a queue.

`ListWatch` lists once, then watches from the list's resourceVersion; after a dropped
stream (or a server timeout) it watches again from the last resourceVersion it saw; on
410 Gone (an ERROR event in the stream, or an HTTP 410) it lists again. Every list is
reported as `Synced` with the full item list, every watch event as `WatchEvent`. It
never issues a request per object: the number of requests depends on stream drops and
time, not on how many pods there are.

Like client-go's reflector (5 to 10 min), a watch asks the server to end it after
WATCH_SECONDS and is then opened again from where it was: following a job costs three
requests per WATCH_SECONDS, whatever its size. The read timeout, SILENCE_SECONDS, bounds
how long a dead connection (a server gone without closing the stream) goes unnoticed. A
longer watch with a shorter read timeout would rely on the watch cache's bookmarks (about
one a minute) to keep a quiet stream talking, and not every watch gets them:
kube-apiserver keeps no watch cache for events by default, so the watch of the
scheduler's events hears nothing while nothing fails to schedule (measured on the e2e
control plane: the TFJob and pod watches had a bookmark within 130 s, the events watch
none in 160 s). Each re-opening is counted in `Received` by its cause: "rewatches" (the
server ended the stream: its timeout), "drops" (a transport failure, or silence),
"relists" (410 Gone: listed again).

`JobFeed` runs the watches of one job (the TFJob by field selector, its pods by label
selector, as Table rows, and if asked the scheduler's FailedScheduling events) into one
queue, and closes the streams when the consumer is done.
Every byte received is counted in `KubeApi.received`, per kind, lists and watches apart.
"""
from __future__ import annotations

import json
import queue
import threading
from dataclasses import dataclass
from typing import Callable

import urllib3
from kubernetes.client.exceptions import ApiException

from ..base import BackendError, NotFound
from .client import (CONNECT_TIMEOUT, TRANSPORT_ERRORS, KubeApi, Received, abort, absent, finish, iter_lines,
                         one_line, refusal, unreachable)
from .objects import pod_selector
from .table import rows as table_rows

WATCH_SECONDS = 290  # server-side timeout of one watch request (client-go's reflector: 5-10 min)
SILENCE_SECONDS = WATCH_SECONDS + 30  # read timeout of a watch stream: silent this long, it is dead
MAX_FAILURES = 15  # transport failures in a row, without an answer between, before giving up:
# with the backoff below ~1 min, so a restarting API server (tens of seconds) is waited for
GONE = 410
FORBIDDEN = 403


@dataclass(frozen=True)
class Synced:
    """A (re)list: the complete current set of objects, as of `version` (the list's
    resourceVersion)."""
    kind: str
    objects: tuple[dict, ...]
    version: str = ""


@dataclass(frozen=True)
class WatchEvent:
    kind: str
    type: str  # ADDED, MODIFIED, DELETED
    object: dict
    version: str = ""  # the changed object's resourceVersion


@dataclass(frozen=True)
class WatchFailed:
    kind: str
    error: BackendError


Call = Callable[..., urllib3.BaseHTTPResponse]  # list/watch call taking list options


class Objects:
    """Decodes lists and watch events of whole objects."""

    def items(self, body: dict) -> list:
        return list(body.get("items") or ())

    def changed(self, obj: dict) -> list:
        return [obj]


class Rows:
    """Decodes the Table form: a list answer is one Table, a watch event's object is a
    Table holding the changed object's row (column definitions possibly left out)."""

    def __init__(self) -> None:
        self.columns: list[str] = []

    def items(self, body: dict) -> list:
        found, self.columns = table_rows(body, self.columns)
        return found

    def changed(self, obj: dict) -> list:
        return self.items(obj) if obj.get("kind") == "Table" else []


def lost(host: str, exc: Exception) -> BackendError:
    """A watch that had the server's answers and then lost it for good (MAX_FAILURES): the
    kubeconfig was right, and the job goes on without the launcher."""
    reason = getattr(exc, "reason", None) or exc
    return BackendError(one_line(f"lost the Kubernetes API server at {host}: it did not answer again for about a "
                                 f"minute ({reason}); the job goes on in the cluster: follow it again with "
                                 "`status -w` or `logs -f` once the server is back"))


class _Gone(Exception):
    pass


def retry_delay(failures: int) -> float:
    """The backoff before the next try after `failures` transport failures in a row: 0.2 s,
    doubling, at most 5 s (MAX_FAILURES of them: about a minute)."""
    return min(0.1 * 2 ** failures, 5.0)


class ListWatch(threading.Thread):
    def __init__(self, kind: str, call: Call, sink: queue.Queue, stop: threading.Event, host: str,
                 received: Received | None = None, decode: Objects | Rows | None = None, optional: bool = False):
        super().__init__(name=f"watch-{kind}", daemon=True)
        self.kind, self._call, self._sink, self._halt, self._host = kind, call, sink, stop, host
        self._received = received or Received()
        self._decode = decode or Objects()
        self._optional = optional  # a watch the consumer can do without: 403 Forbidden ends it quietly
        self._response: urllib3.BaseHTTPResponse | None = None
        self.version: str | None = None  # the last resourceVersion seen; None: list first
        self._failures = 0  # transport failures since the server last answered
        self._listed = False  # whether the server has answered this watch's list once

    def run(self) -> None:
        try:
            self._loop()
        except BackendError as exc:
            self._emit(WatchFailed(self.kind, exc))
        except ApiException as exc:
            if self._optional and exc.status == FORBIDDEN:
                return
            self._emit(WatchFailed(self.kind, refusal(f"watching {self.kind}", exc, self._host)))
        except Exception as exc:  # a malformed answer: the consumer must not wait forever
            self._emit(WatchFailed(self.kind, BackendError(f"watching {self.kind}: {one_line(exc)}")))

    def close(self) -> None:
        """Called by the consumer's thread: stop and unblock a stream read."""
        abort(self._response)

    def _emit(self, item: object) -> None:
        if not self._halt.is_set():
            self._sink.put(item)

    def _loop(self) -> None:
        while not self._halt.is_set():
            try:
                if self.version is None:
                    self._list()
                self._watch()
            except _Gone:
                self.version = None
                self._received.add(self.kind, relists=1)
            except TRANSPORT_ERRORS as exc:  # dropped stream, reset, refused, silent too long
                if self._halt.is_set():
                    return
                self._received.add(self.kind, drops=1)
                self._failures += 1
                if self._failures > MAX_FAILURES:
                    raise (lost(self._host, exc) if self._listed else unreachable(self._host, exc)) from None
                self._halt.wait(retry_delay(self._failures))

    def _list(self) -> None:
        try:
            response = self._call()  # the API's plain-call timeout (--request-timeout)
        except ApiException as exc:
            if exc.status == GONE:
                raise _Gone() from None
            raise
        try:
            raw = response.data
        finally:
            response.release_conn()
        body = json.loads(raw)
        self._listed = True
        self._received.add(self.kind, list_bytes=len(raw), lists=1)
        self.version = body["metadata"]["resourceVersion"]
        self._emit(Synced(self.kind, tuple(self._decode.items(body)), self.version))

    def _watch(self) -> None:
        """Stream the events after `self.version`, advancing it with each one (so a stream
        that breaks resumes after the last event it delivered)."""
        try:
            response = self._call(watch=True, resource_version=self.version, allow_watch_bookmarks=True,
                                  timeout_seconds=WATCH_SECONDS,
                                  _request_timeout=(CONNECT_TIMEOUT, SILENCE_SECONDS))
        except ApiException as exc:
            if exc.status == GONE:  # some servers answer an expired version with HTTP 410
                raise _Gone() from None
            raise
        self._response = response
        self._failures = 0
        try:
            if self._halt.is_set():  # closed while the request was on its way
                return
            for line in iter_lines(response):
                if self._halt.is_set():
                    return
                if line.strip():
                    self.version = self._event(json.loads(line), len(line.encode()) + 1) or self.version
            if not self._halt.is_set():
                self._received.add(self.kind, rewatches=1)  # the server ended the stream: its timeout
        finally:
            self._response = None
            finish(response)

    def _event(self, event: dict, size: int = 0) -> str | None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "BOOKMARK":
            self._received.add(self.kind, bookmark_bytes=size, bookmarks=1)
        else:
            self._received.add(self.kind, watch_bytes=size)
        if kind == "ERROR":
            if obj.get("code") == GONE:
                raise _Gone()
            raise BackendError(one_line(f"watching {self.kind}: {obj.get('reason', '')}: {obj.get('message', '')}"))
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind != "BOOKMARK":
            self._received.add(self.kind, changes=1)
            for item in self._decode.changed(obj):
                self._emit(WatchEvent(self.kind, kind, item, str(version or "")))
        return version


class JobFeed:
    """One TFJob watch (metadata.name=NAME) and one pod watch (operator labels) -> one queue.
    Pods come as `table.PodRow`s; with `scheduling`, a third watch brings the scheduler's
    FailedScheduling events of the namespace (kind "event").

    Use as a context manager; other producers (log streams) may `put` into the same queue.
    """

    def __init__(self, api: KubeApi, name: str, namespace: str, replica: tuple[str, int] | None = None,
                 scheduling: bool = False):
        self.queue: queue.Queue = queue.Queue()
        self._halt = threading.Event()
        self._api, self._namespace, self._pod_selector = api, namespace, pod_selector(name, replica)
        job_call = _bind(api.tfjobs, namespace, field_selector=f"metadata.name={name}")
        pod_call = _bind(api.pod_rows, namespace, label_selector=self._pod_selector)
        watch = lambda kind, call, decode=None: ListWatch(kind, call, self.queue, self._halt, api.host,  # noqa: E731
                                                         api.received, decode)
        self._watches = [watch("tfjob", job_call), watch("pod", pod_call, Rows())]
        if scheduling:
            self._watches.append(ListWatch("event", _bind(api.scheduling_events, namespace), self.queue, self._halt,
                                           api.host, api.received, optional=True))  # RBAC may not allow events

    def __enter__(self) -> "JobFeed":
        for watch in self._watches:
            watch.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def get(self, timeout: float | None = None) -> object | None:
        """The next item, None after `timeout` seconds without one; raises a watch's error."""
        try:
            item = self.queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, WatchFailed):
            raise item.error
        return item

    def put(self, item: object) -> None:
        self.queue.put(item)

    def pods_now(self) -> Synced:
        """The feed's pods as they are now: one list, read from etcd, as a pod `Synced`
        (rows and the list's resourceVersion). The TFJob and pod watches come from two
        watch caches that each lag etcd on their own, so once the TFJob is terminal the pod
        watch may not have brought the pods' last changes yet (the chief's end, which the
        operator saw before it wrote Succeeded)."""
        rows, version = self._api.list_pod_table(self._namespace, self._pod_selector)
        return Synced("pod", tuple(rows), version)

    def close(self) -> None:
        self._halt.set()
        for watch in self._watches:
            watch.close()
        for watch in self._watches:
            if watch.is_alive():
                watch.join(timeout=CONNECT_TIMEOUT)


def _bind(call: Callable, namespace: str, **selector) -> Call:
    return lambda **params: call(namespace, **selector, **params)


def job_from(item: Synced | WatchEvent, name: str, namespace: str, seen_before: bool) -> dict:
    """The TFJob in a TFJob feed item; NotFound when it does not exist (any more)."""
    jobs = item.objects if isinstance(item, Synced) else () if item.type == "DELETED" else (item.object,)
    if not jobs:
        raise NotFound(f"tfjob {name} was deleted from namespace {namespace}" if seen_before else absent(name, namespace))
    return jobs[0]
