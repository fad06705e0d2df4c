"""Pod logs of a TFJob: what exists now (`read_logs`), or followed (`follow_logs`).

Following runs the job's two watches (`JobFeed`) and one log stream per container
instance: a Pending pod gets its stream when the pod watch shows its container started,
a restarted container (same pod, or a pod the operator recreated) gets a new stream for
the new instance, and the whole thing ends when the TFJob is terminal and the streams are
drained (replicas still running then, such as ps, get `drain_seconds` more).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Iterator

from kubernetes.client.exceptions import ApiException

from ...events import LogLine, short_replica
from ...tfconfig import replicas as job_replicas
from ..base import BackendError
from .client import (CONNECT_TIMEOUT, TRANSPORT_ERRORS, KubeApi, abort, finish, iter_lines, one_line, read_json,
                         server_message)
from .objects import (container_name, is_terminal, log_instance, pod_selector, replica_of,
                          replica_order, replica_phase)
from .watch import JobFeed, Synced, WatchEvent, job_from

DRAIN_SECONDS = 5.0
_WAITING = 400  # the kubelet's answer for a container that has not started


def check_replica(tfjob: dict, replica: tuple[str, int]) -> None:
    """BackendError naming the job's replicas when `replica` is not one of them."""
    known = list(job_replicas(tfjob))
    if replica not in known:
        ids = ", ".join(short_replica(t, i) for t, i in known)
        raise BackendError(f"--replica: tfjob {tfjob['metadata']['name']} has no replica {short_replica(*replica)}; it has {ids}")


# ---- what exists now --------------------------------------------------------------------
def read_logs(api: KubeApi, name: str, namespace: str, replica: tuple[str, int] | None = None,
              tail_lines: int | None = None) -> Iterator[LogLine]:
    """The current log of each started replica, replica by replica (Pending ones skipped);
    only its last `tail_lines` lines when given (the kubelet's tailLines)."""
    with api.errors(f"listing pods of tfjob {name}"):
        pods = read_json(api.pods(namespace, label_selector=pod_selector(name, replica)))["items"]
    if not pods and replica is None:  # tell "no such job" from "no pods yet"
        api.get_tfjob(name, namespace)
    pods = [pod for pod in pods if replica_phase(pod)]
    for pod in sorted(pods, key=lambda p: replica_order(replica_phase(p))):
        if log_instance(pod) is None:
            continue
        yield from _read_one(api, pod, tail_lines)


def _read_one(api: KubeApi, pod: dict, tail_lines: int | None = None) -> Iterator[LogLine]:
    meta = pod["metadata"]
    replica = short_replica(*replica_of(pod))
    with api.errors(f"reading the log of {meta['name']}"):
        try:
            response = api.pod_log(meta["name"], meta["namespace"], container_name(pod), follow=False,
                                   tail_lines=tail_lines)
        except ApiException as exc:
            if exc.status == _WAITING:  # the container went back to waiting since the list
                return
            raise
    try:
        for line in iter_lines(response):
            yield LogLine(replica, line)
    finally:
        finish(response)


# ---- following --------------------------------------------------------------------------
@dataclass(frozen=True)
class StreamEnded:
    pod: str
    instance: str
    opened: bool  # False: the kubelet had nothing to serve yet (or the pod is gone)


class LogStream(threading.Thread):
    """Follows one container instance's log into the feed's queue."""

    def __init__(self, api: KubeApi, pod: dict, instance: str, feed: JobFeed, tail_lines: int | None = None):
        super().__init__(name=f"log-{pod['metadata']['name']}", daemon=True)
        self._api, self._pod, self.instance, self._feed = api, pod, instance, feed
        self._tail = tail_lines
        self._response = None
        self._closed = False

    def run(self) -> None:
        meta, opened = self._pod["metadata"], False
        replica = short_replica(*replica_of(self._pod))
        try:
            self._response = self._api.pod_log(meta["name"], meta["namespace"], container_name(self._pod),
                                               follow=True, tail_lines=self._tail)
            opened = True
            if not self._closed:
                for line in iter_lines(self._response):
                    self._feed.put(LogLine(replica, line))
        except ApiException as exc:
            if exc.status != _WAITING and exc.status != 404:
                self._feed.put(BackendError(f"reading the log of {meta['name']}: {server_message(exc)}"))
        except TRANSPORT_ERRORS:
            pass  # closed by `close`, or the container's stream ended abruptly
        except Exception as exc:  # never leave the consumer waiting for this stream
            self._feed.put(BackendError(f"reading the log of {meta['name']}: {one_line(exc)}"))
        finally:
            if self._response is not None:
                finish(self._response)
            self._feed.put(StreamEnded(meta["name"], self.instance, opened))

    def close(self) -> None:
        self._closed = True
        abort(self._response)


class _Follower:
    """`tail_lines` (kubectl's logs -f --tail N) applies to the container instances the
    first pod list shows: their last N lines, then what they write. An instance that starts
    later (a restart, a pod that was Pending) is new, so every line of it is shown."""

    def __init__(self, api: KubeApi, feed: JobFeed, tail_lines: int | None = None):
        self.api, self.feed = api, feed
        self.pods: dict[str, dict] = {}
        self.streams: dict[str, LogStream] = {}
        self.read: set[str] = set()  # container instances read or being read
        self.closing = False
        self.tail_lines = tail_lines  # None once the first list has been followed

    def seen(self, pod: dict, deleted: bool = False) -> None:
        name = pod["metadata"]["name"]
        if deleted:
            self.pods.pop(name, None)
            return
        self.pods[name] = pod
        self.start(name)

    def start(self, name: str) -> None:
        pod = self.pods.get(name)
        if self.closing or pod is None or name in self.streams or replica_of(pod) is None:
            return
        instance = log_instance(pod)
        if instance is None or instance in self.read:
            return
        self.read.add(instance)
        self.streams[name] = LogStream(self.api, pod, instance, self.feed, self.tail_lines)
        self.streams[name].start()

    def synced(self, pods: tuple[dict, ...]) -> None:
        """A (re)list of the pods: follow what is new, forget what is gone."""
        for gone in set(self.pods) - {p["metadata"]["name"] for p in pods}:
            self.pods.pop(gone)
        for pod in pods:
            self.seen(pod)
        self.tail_lines = None

    def ended(self, item: StreamEnded) -> None:
        self.streams.pop(item.pod, None)
        if item.opened:
            self.start(item.pod)  # the pod watch may already show the next container instance
        else:  # not startable yet, or the pod is gone: the pod watch will say what comes next
            self.read.discard(item.instance)

    def close(self) -> None:
        self.closing = True
        for stream in list(self.streams.values()):
            stream.close()


def follow_logs(api: KubeApi, name: str, namespace: str, replica: tuple[str, int] | None = None,
                drain_seconds: float = DRAIN_SECONDS, tail_lines: int | None = None) -> Iterator[LogLine]:
    with JobFeed(api, name, namespace, replica) as feed:
        follower = _Follower(api, feed, tail_lines)
        job_synced = pods_synced = False
        deadline = None  # set when the job is terminal
        try:
            while not (deadline is not None and pods_synced and not follower.streams and feed.queue.empty()):
                if follower.closing:
                    timeout = CONNECT_TIMEOUT
                else:
                    timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                item = feed.get(timeout)
                if item is None:
                    if follower.closing:  # streams did not end after close: give up on them
                        return
                    follower.close()  # the drain time is over
                elif isinstance(item, LogLine):
                    yield item
                elif isinstance(item, StreamEnded):
                    follower.ended(item)
                elif isinstance(item, BackendError):
                    raise item
                elif isinstance(item, Synced) and item.kind == "pod":
                    pods_synced = True
                    follower.synced(item.objects)
                elif isinstance(item, WatchEvent) and item.kind == "pod":
                    follower.seen(item.object, deleted=item.type == "DELETED")
                elif isinstance(item, (Synced, WatchEvent)):
                    job = job_from(item, name, namespace, job_synced)
                    job_synced = True
                    if deadline is None and is_terminal(job):
                        deadline = time.monotonic() + drain_seconds
        finally:
            follower.close()
