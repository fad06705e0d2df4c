"""List-then-watch, the client-go reflector's protocol, in a thread feeding a queue.

`ListWatch` lists once, then watches from the list's resourceVersion; after a dropped
stream (or a server timeout) it watches again from the last resourceVersion it saw; on
410 Gone (an ERROR event in the stream, or an HTTP 410) it lists again. Every list is
reported as `Synced` with the full item list, every watch event as `WatchEvent`. It
never issues a request per object: the number of requests depends on stream drops and
time, not on how many pods there are.

`JobFeed` runs the two watches of one job (the TFJob by field selector, its pods by label
selector) into one queue, and closes both streams when the consumer is done.
"""
from __future__ import annotations

import json
import queue
import threading
from dataclasses import dataclass
from typing import Callable

import urllib3
from kubernetes.client.exceptions import ApiException

from .base import BackendError, NotFound
from .k8s_client import (CONNECT_TIMEOUT, TRANSPORT_ERRORS, KubeApi, abort, absent, finish, iter_lines, one_line,
                         read_json, server_message, unreachable)
from .k8s_objects import pod_selector

WATCH_SECONDS = 290  # server-side timeout of one watch request (kubectl uses 5-10 min)
MAX_FAILURES = 15  # transport failures in a row, without an answer between, before giving up:
# with the backoff below ~1 min, so a restarting API server (tens of seconds) is waited for
GONE = 410


@dataclass(frozen=True)
class Synced:
    """A (re)list: the complete current set of objects."""
    kind: str
    objects: tuple[dict, ...]


@dataclass(frozen=True)
class WatchEvent:
    kind: str
    type: str  # ADDED, MODIFIED, DELETED
    object: dict


@dataclass(frozen=True)
class WatchFailed:
    kind: str
    error: BackendError


Call = Callable[..., urllib3.BaseHTTPResponse]  # list/watch call taking list options


class _Gone(Exception):
    pass


class ListWatch(threading.Thread):
    def __init__(self, kind: str, call: Call, sink: queue.Queue, stop: threading.Event, host: str):
        super().__init__(name=f"watch-{kind}", daemon=True)
        self.kind, self._call, self._sink, self._halt, self._host = kind, call, sink, stop, host
        self._response: urllib3.BaseHTTPResponse | None = None
        self.version: str | None = None  # the last resourceVersion seen; None: list first
        self._failures = 0  # transport failures since the server last answered

    def run(self) -> None:
        try:
            self._loop()
        except BackendError as exc:
            self._emit(WatchFailed(self.kind, exc))
        except ApiException as exc:
            self._emit(WatchFailed(self.kind, BackendError(f"watching {self.kind}: {server_message(exc)}")))
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
            except TRANSPORT_ERRORS as exc:  # dropped stream, reset, refused
                if self._halt.is_set():
                    return
                self._failures += 1
                if self._failures > MAX_FAILURES:
                    raise unreachable(self._host, exc) from None
                self._halt.wait(min(0.1 * 2 ** self._failures, 5.0))  # backoff before re-watching

    def _list(self) -> None:
        try:
            body = read_json(self._call())  # the API's plain-call timeout (--request-timeout)
        except ApiException as exc:
            if exc.status == GONE:
                raise _Gone() from None
            raise
        self._emit(Synced(self.kind, tuple(body.get("items") or ())))
        self.version = body["metadata"]["resourceVersion"]

    def _watch(self) -> None:
        """Stream the events after `self.version`, advancing it with each one (so a stream
        that breaks resumes after the last event it delivered)."""
        try:
            response = self._call(watch=True, resource_version=self.version, allow_watch_bookmarks=True,
                                  timeout_seconds=WATCH_SECONDS,
                                  _request_timeout=(CONNECT_TIMEOUT, WATCH_SECONDS + 30))
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
                    self.version = self._event(json.loads(line)) or self.version
        finally:
            self._response = None
            finish(response)

    def _event(self, event: dict) -> str | None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == GONE:
                raise _Gone()
            raise BackendError(f"watching {self.kind}: {obj.get('reason', '')}: {one_line(obj.get('message', ''))}")
        if kind != "BOOKMARK":
            self._emit(WatchEvent(self.kind, kind, obj))
        return obj.get("metadata", {}).get("resourceVersion")


class JobFeed:
    """One TFJob watch (metadata.name=NAME) and one pod watch (operator labels) -> one queue.

    Use as a context manager; other producers (log streams) may `put` into the same queue.
    """

    def __init__(self, api: KubeApi, name: str, namespace: str, replica: tuple[str, int] | None = None):
        self.queue: queue.Queue = queue.Queue()
        self._halt = threading.Event()
        job_call = _bind(api.tfjobs, namespace, field_selector=f"metadata.name={name}")
        pod_call = _bind(api.pods, namespace, label_selector=pod_selector(name, replica))
        self._watches = [ListWatch("tfjob", job_call, self.queue, self._halt, api.host),
                         ListWatch("pod", pod_call, self.queue, self._halt, api.host)]

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
