"""Pod logs of a TFJob: what exists now (`read_logs`), or followed (`follow_logs`).

Pods are read as Table rows (`table.py`), as for the live view: a few hundred bytes per pod
change, not the pod objects whose TF_CONFIG grows with the job. A row's Status and
Restarts say which container instance the kubelet's log serves (`table.log_instance`); the
container is the operator's `tensorflow`.

Following runs the job's watches (`JobFeed`) and one log stream per container instance: a
Pending pod gets its stream when the pod watch shows its container started, a restarted
container (same pod, or a pod the operator recreated) gets a new stream for the new
instance, and the whole thing ends when the TFJob is terminal and the streams are drained
(replicas still running then, such as ps, get `drain_seconds` more).

The TFJob watch and the pod watch come from two watch caches that each lag etcd on their
own, so the job may show terminal before the pod watch has shown the pods' last changes.
The follower then lists the pods, and waits (at most `drain_seconds`) until the pod watch
has caught up with that list before it ends: a row carries no UID, so only the pod watch's
DELETED event tells a pod the operator made anew under the same name from the one it
replaced, and a list alone would take the new pod's first container for the old pod's,
already read.
"""
from __future__ import annotations

import datetime
import itertools
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from kubernetes.client.exceptions import ApiException

from ...events import LogEnded, LogLine, short_replica
from ...spec import SpecError
from ...tfconfig import replicas as job_replicas
from ..base import BackendError, deleted_pods_reason, stderr_note
from . import table
from .client import CONNECT_TIMEOUT, TRANSPORT_ERRORS, KubeApi, abort, finish, iter_lines, one_line, refusal
from .objects import CONTAINER, container_status, is_terminal, pod_selector, replica_order
from .table import PodRow
from .watch import MAX_FAILURES, JobFeed, Synced, WatchEvent, job_from, retry_delay

DRAIN_SECONDS = 5.0
_WAITING = 400  # the kubelet's answer for a container that has not started
# The kubelet (since 1.32) commits a 200 before it asks the runtime for the container (a
# zero-byte write: pkg/kubelet/kubelet_pods.go GetKubeletContainerLogs), so when the runtime
# no longer has the container its status names (removed by the kubelet's garbage collection
# right after a restart, before the status caught up) the answer is a 200 whose whole body
# is this line (pkg/kubelet/kuberuntime GetContainerLogs). kubectl prints it as if it were
# the log; it is asked again here, LOST_RETRIES times LOST_RETRY_S apart, then refused.
# One case does not pass: `previous` in a crash loop. The kubelet keeps one exited container
# per container (kubelet.go minDeadContainerInPod): when a container exits it removes the one
# before at once (cleanUpContainersInPod), while its status names that one as the last state
# until the back-off ends (pod_workers.go: the next sync is at the back-off's expiry). Measured
# on kubelet v1.36.3: lost for each whole back-off, 10 s to over a minute, most of a crash
# loop. The container the user wants, the one that crashed last, is then the current one:
# its log is read instead, with a note (`_previous_removed`).
LOST = re.compile(r"unable to retrieve container logs for [a-z0-9.+-]+://[0-9a-f]+")
LOST_RETRIES, LOST_RETRY_S = 5, 1.0


def check_replica(tfjob: dict, replica: tuple[str, int]) -> None:
    """SpecError (bad input: exit 2) naming the job's replicas when `replica` is not one of them."""
    known = list(job_replicas(tfjob))
    if replica not in known:
        ids = ", ".join(short_replica(t, i) for t, i in known)
        raise SpecError("--replica", f"tfjob {tfjob['metadata']['name']} has no replica {short_replica(*replica)}; "
                                     f"use one of {ids} or all")


def clean_pod_policy(tfjob: dict) -> str:
    """The TFJob's cleanPodPolicy; Running, the operator's default for TFJobs, when unset."""
    return ((tfjob.get("spec") or {}).get("runPolicy") or {}).get("cleanPodPolicy") or "Running"


def ended_without_pods(tfjob: dict, rows: list[PodRow], replica: tuple[str, int] | None = None) -> list[str]:
    """Once the job has ended, the replicas asked for (`replica`, or all) that have no pod:
    the operator deleted them as the job's cleanPodPolicy says (Running: those still running,
    such as ps and workers; All: every pod), and the kubelet's logs went with them. Before
    the end a pod may just not be made yet: nothing is said then."""
    if not is_terminal(tfjob):
        return []
    name = tfjob["metadata"]["name"]
    have = {found for row in rows if (found := table.replica_of(row, name))}
    return [short_replica(*r) for r in ([replica] if replica else job_replicas(tfjob)) if r not in have]


def check_pods(tfjob: dict, rows: list[PodRow], replica: tuple[str, int] | None,
               note: Callable[[str], None] = stderr_note) -> None:
    """A note naming the replicas asked for whose pods (and logs) went with the job's end,
    and why; BackendError instead when that is the one replica asked for: nothing to show."""
    missing = ended_without_pods(tfjob, rows, replica)
    if not missing:
        return
    why = deleted_pods_reason(clean_pod_policy(tfjob), one=replica is not None)
    if replica:
        raise BackendError(f"{missing[0]} of tfjob {tfjob['metadata']['name']} has no log: {why}")
    note(f"note: {', '.join(missing)}: no log: {why}")


def check_ended(api: KubeApi, tfjob: dict, replica: tuple[str, int] | None,
                note: Callable[[str], None] = stderr_note) -> None:
    """check_pods with the pods as they are now; one list, and only once the job has ended
    (before following, which shows what is left of an ended job and stops)."""
    if is_terminal(tfjob):
        metadata = tfjob["metadata"]
        check_pods(tfjob, _rows(api, metadata["name"], metadata["namespace"], replica), replica, note)


# ---- what exists now --------------------------------------------------------------------
def read_logs(api: KubeApi, tfjob: dict, replica: tuple[str, int] | None = None,
              tail_lines: int | None = None, note: Callable[[str], None] = stderr_note) -> Iterator[LogLine]:
    """The current log of each started replica of `tfjob`, replica by replica (Pending ones
    skipped); only its last `tail_lines` lines when given (the kubelet's tailLines). `note`
    gets the lines that name replicas whose pods are gone (check_pods) and that say a
    previous container is gone and its successor's log is shown."""
    name, namespace = tfjob["metadata"]["name"], tfjob["metadata"]["namespace"]
    found = _rows(api, name, namespace, replica)
    check_pods(tfjob, found, replica, note)
    started = [(phase, row) for row in found if (phase := table.replica_phase(row, name))
               and table.log_instance(row) is not None]
    if replica is not None and not started:  # asked for by name: say why there is nothing, rather than nothing
        why = f"its pod is {found[0].status}" if found else "it has no pod yet"
        note(f"note: {short_replica(*replica)} has not started ({why}): no log yet; follow it with -f")
    if api.log_options.get("previous"):  # a container before the current one: only after a restart
        first = [phase.replica for phase, row in started if not row.restarts]
        if replica is not None and first:
            raise BackendError(f"replica {first[0]} has no container before its current one (restarts 0)")
        started = [(phase, row) for phase, row in started if row.restarts]
    for phase, row in sorted(started, key=lambda found: replica_order(found[0])):
        yield from _read_one(api, row.name, namespace, phase.replica, tail_lines, note)


def _rows(api: KubeApi, name: str, namespace: str, replica: tuple[str, int] | None) -> list[PodRow]:
    """One list of the job's pods (or one replica's) as rows."""
    with api.errors(f"listing pods of tfjob {name}"):
        return api.list_pod_rows(namespace, pod_selector(name, replica))


def _read_one(api: KubeApi, pod: str, namespace: str, replica: str, tail_lines: int | None = None,
              note: Callable[[str], None] = stderr_note) -> Iterator[LogLine]:
    for attempt in range(LOST_RETRIES + 1):
        if attempt:
            time.sleep(LOST_RETRY_S)
        with api.errors(f"reading the log of {pod}"):
            try:
                response = api.pod_log(pod, namespace, CONTAINER, follow=False, tail_lines=tail_lines)
            except ApiException as exc:
                if exc.status == _WAITING:  # the container went back to waiting since the list
                    return
                raise
        try:
            lost, lines = unless_lost(iter_lines(response))
            if lost is None:
                yield from (LogLine(replica, line) for line in lines)
                return
        finally:
            finish(response)
        if api.log_options.get("previous") and (exit_code := _previous_removed(api, pod, namespace, lost)) is not None:
            note(f"note: {replica}: the kubelet no longer has the previous container (it keeps the last exited one "
                 f"only); this is the log of the last container, which exited with code {exit_code}")
            yield from _read_one(api.current_container(), pod, namespace, replica, tail_lines, note)
            return
    raise BackendError(f"reading the log of {pod}: the kubelet answered '{one_line(lost)}' {LOST_RETRIES + 1} times "
                       f"over {LOST_RETRIES * LOST_RETRY_S:g} s: the container it names is gone (removed after a "
                       "restart); try again")


def _previous_removed(api: KubeApi, pod: str, namespace: str, lost: str) -> int | None:
    """The exit code of the pod's current container when it has exited and the container
    the kubelet could not find (`lost`) is its last state: the one before it, removed when
    it exited. None otherwise (the status may not have caught up: ask again)."""
    with api.errors(f"reading pod {pod}"):
        status = container_status(api.get_pod(pod, namespace) or {})
    ended = (status.get("state") or {}).get("terminated") or {}
    before = ((status.get("lastState") or {}).get("terminated") or {}).get("containerID")
    if ended.get("containerID") and before and ended["containerID"] != before and lost.endswith(f" {before}"):
        return ended.get("exitCode")
    return None


def unless_lost(lines: Iterator[str]) -> tuple[str | None, Iterator[str]]:
    """(the kubelet's line for a container the runtime no longer has, nothing) when that
    line is the whole answer (LOST); else (None, every line of the answer)."""
    first = next(lines, None)
    if first is None or not LOST.fullmatch(first):
        return None, itertools.chain([] if first is None else [first], lines)
    second = next(lines, None)
    if second is None:
        return first, iter(())
    return None, itertools.chain([first, second], lines)


# ---- following --------------------------------------------------------------------------
@dataclass(frozen=True)
class StreamEnded:
    pod: str
    instance: str
    opened: bool  # False: the kubelet had nothing to serve yet (or the pod is gone)
    replica: str
    restarts: int  # the instance's number: the container's restarts before it


class LogStream(threading.Thread):
    """Follows one container instance's log into the feed's queue.

    A stream cut while the container runs on (an API server restarting, a connection reset)
    is opened again, as the watches are (MAX_FAILURES tries in a row with their backoff), from the
    time of the last line it delivered: the lines are asked with the kubelet's timestamps
    (kept only when the user asked for them), and the new answer's lines at or before that
    line are dropped, as many as were delivered at its very time (sinceTime is whole seconds:
    the kubelet serves that second's lines again). A container that was restarted in the
    meantime has its rest read as the previous instance, whose stream then ends; the pod
    watch starts the new instance's. The kubelet's lines written while no stream was open
    are kept by it: nothing is lost but a container removed in the meantime (a second restart,
    or its pod deleted)."""

    def __init__(self, api: KubeApi, pod: str, namespace: str, replica: str, instance: str, feed: JobFeed,
                 tail_lines: int | None = None, restarts: int = 0):
        super().__init__(name=f"log-{pod}", daemon=True)
        self._api, self._pod, self._namespace, self._replica = api, pod, namespace, replica
        self.instance, self._feed, self._tail, self._restarts = instance, feed, tail_lines, restarts
        self._response = None
        self._closed = threading.Event()
        self._shown = bool(api.log_options.get("timestamps"))  # the user asked for the kubelet's timestamps
        self._last: tuple[int, int] | None = None  # the time of the last line delivered (s, ns)
        self._at_last = 0  # how many lines delivered had that very time
        self._stamped = True  # whether the answers carried the kubelet's timestamps (else a cut ends the stream)

    def run(self) -> None:
        opened = False
        try:
            opened = self._follow()
        except ApiException as exc:
            if exc.status != _WAITING and exc.status != 404:
                self._feed.put(refusal(f"reading the log of {self._pod}", exc, self._api.host))
        except Exception as exc:  # never leave the consumer waiting for this stream
            self._feed.put(BackendError(f"reading the log of {self._pod}: {one_line(exc)}"))
        finally:
            self._feed.put(StreamEnded(self._pod, self.instance, opened, self._replica, self._restarts))

    def _follow(self) -> bool:
        """Read the instance's log to its end (or until closed); whether the kubelet served it."""
        try:
            self._read(previous=False, resumed=False)
            return True
        except TRANSPORT_ERRORS:
            return False  # closed by `close` on its way, or not reached: the pod watch starts it again
        except _Cut:
            pass
        failures = 0
        while self._stamped and not self._closed.wait(retry_delay(failures + 1)):
            try:  # which instance does the kubelet serve now?
                pod = self._api.get_pod(self._pod, self._namespace) or {}
                served = served_instance(pod)
                if served is None or not self._restarts <= served <= self._restarts + 1 or self._newer(pod):
                    return True  # the pod is gone, made anew or restarted twice: the kubelet has this instance no more
                self._read(previous=served > self._restarts, resumed=True)
                return True
            except ApiException as exc:
                if exc.status < 500:
                    if exc.status in (_WAITING, 404):
                        return True  # the container went away in the meantime
                    raise
            except _Cut:  # answered, then cut again: a new outage, whose tries count from 1
                failures = 0
            except TRANSPORT_ERRORS:
                pass
            failures += 1
            if failures > MAX_FAILURES:
                return True
        return True

    def _newer(self, pod: dict) -> bool:
        """Whether `pod` was made after the last line delivered: one the operator made anew
        under the same name (a row carries no UID; the pod watch tells the follower)."""
        created = _TIME.fullmatch(str((pod.get("metadata") or {}).get("creationTimestamp") or ""))
        return created is not None and self._last is not None and _time(created)[0] > self._last[0]

    def _read(self, previous: bool, resumed: bool) -> None:
        """One request: the log from the start (or, resumed, from the last line delivered),
        followed unless `previous`; _Cut when its stream broke after it was answered."""
        since = None if self._last is None else since_time_of(self._last[0])
        self._response = self._api.pod_log(self._pod, self._namespace, CONTAINER, follow=not previous,
                                           tail_lines=self._tail if self._last is None else None, since_time=since,
                                           timestamps=True, previous=previous or None)
        try:
            if self._closed.is_set():
                return
            lost, lines = unless_lost(iter_lines(self._response))
            if lost is not None:  # as for a container not started: the pod watch says what comes next
                if not resumed:
                    raise ApiException(status=_WAITING)
                return
            skip = self._at_last if resumed else 0
            for raw in lines:
                stamp, text = stamped_line(raw)
                if stamp is None:
                    self._stamped = False
                elif self._last is not None and resumed and (stamp < self._last or (stamp == self._last and skip)):
                    skip -= stamp == self._last
                    continue  # delivered before the cut
                else:
                    self._at_last = self._at_last + 1 if stamp == self._last else 1
                    self._last, resumed = stamp, False
                self._feed.put(LogLine(self._replica, raw if self._shown or stamp is None else text))
        except TRANSPORT_ERRORS:
            if self._closed.is_set():
                raise
            raise _Cut() from None
        finally:
            finish(self._response)
            self._response = None

    def close(self) -> None:
        self._closed.set()
        abort(self._response)


class _Cut(Exception):
    """A log stream that had been answered broke before its end."""


_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")


def _time(match: re.Match) -> tuple[int, int]:
    """(epoch seconds, nanoseconds) of an RFC 3339 time `_TIME` matched."""
    when = datetime.datetime.fromisoformat(match[1] + ("+00:00" if match[3] == "Z" else match[3]))
    return int(when.timestamp()), int((match[2] or "0").ljust(9, "0"))


def stamped_line(raw: str) -> tuple[tuple[int, int] | None, str]:
    """A line the kubelet prefixed with its RFC 3339 time (timestamps=true): ((epoch seconds,
    nanoseconds), the line as written), or (None, raw) for a line without one."""
    match = _TIME.match(raw)
    if not match:
        return None, raw
    end = match.end() + (raw[match.end():match.end() + 1] == " ")  # the kubelet's one space after it
    return _time(match), raw[end:]


def since_time_of(seconds: int) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def served_instance(pod: dict) -> int | None:
    """Which container instance the kubelet's log serves now (numbered by the restarts before
    it, as `table.log_instance` from a row): the running or ended container's, the last ended
    one's while it waits to restart; None when none has run or the pod is gone."""
    status = container_status(pod)
    state, restarts = status.get("state") or {}, int(status.get("restartCount") or 0)
    if state.get("running") or state.get("terminated"):
        return restarts
    return restarts - 1 if restarts and (status.get("lastState") or {}).get("terminated") else None


class _Follower:
    """`tail_lines` (kubectl's logs -f --tail N) applies to the container instances the
    first pod list shows: their last N lines, then what they write. An instance that starts
    later (a restart, a pod that was Pending) is new, so every line of it is shown.

    An instance is (pod name, which pod of that name, the container's restarts): a pod the
    operator deletes and creates again under the same name starts over at 0 restarts."""

    def __init__(self, api: KubeApi, feed: JobFeed, job: str, namespace: str, tail_lines: int | None = None):
        self.api, self.feed, self.job, self.namespace = api, feed, job, namespace
        self.rows: dict[str, PodRow] = {}
        self.incarnation: dict[str, int] = {}  # pod name -> how many pods of that name went away
        self.streams: dict[str, LogStream] = {}
        self.read: set[str] = set()  # container instances read or being read
        self.closing = False
        self.tail_lines = tail_lines  # None once the first list has been followed

    def seen(self, row: PodRow, deleted: bool = False) -> None:
        if deleted:
            self.gone(row.name)
            return
        self.rows[row.name] = row
        self.start(row.name)

    def gone(self, name: str) -> None:
        if self.rows.pop(name, None) is not None:
            self.incarnation[name] = self.incarnation.get(name, 0) + 1

    def start(self, name: str) -> None:
        row = self.rows.get(name)
        if self.closing or row is None or name in self.streams:
            return
        phase, number = table.replica_phase(row, self.job), table.log_instance(row)
        if phase is None or number is None:
            return
        instance = f"{name}#{self.incarnation.get(name, 0)}#{number}"
        if instance in self.read:
            return
        self.read.add(instance)
        self.streams[name] = LogStream(self.api, name, self.namespace, phase.replica, instance, self.feed,
                                       self.tail_lines, number)
        self.streams[name].start()

    def synced(self, rows: tuple[PodRow, ...]) -> None:
        """A (re)list of the pods: follow what is new, forget what is gone."""
        for gone in set(self.rows) - {row.name for row in rows}:
            self.gone(gone)
        for row in rows:
            self.seen(row)
        self.tail_lines = None

    def ended(self, item: StreamEnded) -> None:
        self.streams.pop(item.pod, None)
        if item.opened:
            self.start(item.pod)  # the pod watch may already show the next container instance
        else:  # not startable yet, or the pod is gone: the pod watch will say what comes next
            self.read.discard(item.instance)

    def agrees(self, rows: tuple[PodRow, ...]) -> bool:
        """Whether the pods the watch has shown are `rows` (a later list), in the same states."""
        return {name: _state(row) for name, row in self.rows.items()} == {row.name: _state(row) for row in rows}

    def close(self) -> None:
        self.closing = True
        for stream in list(self.streams.values()):
            stream.close()


def _state(row: PodRow) -> tuple:
    return row.status, row.restarts, row.ended, row.node


def at_or_after(version: str, than: str) -> bool:
    """Whether resourceVersion `version` is `than` or later. kube-apiserver's versions are
    etcd's revisions, integers that only grow; a version that is not one compares as not
    later (the caller then relies on the rows agreeing, or its time bound)."""
    return version.isdigit() and than.isdigit() and int(version) >= int(than)


def follow_logs(api: KubeApi, name: str, namespace: str, replica: tuple[str, int] | None = None,
                drain_seconds: float = DRAIN_SECONDS, tail_lines: int | None = None,
                ends: bool = False) -> Iterator[LogLine | LogEnded]:
    """Every replica's (or `replica`'s) lines as the kubelet serves them, container instance
    after instance, until the job is terminal and its streams ended (at most `drain_seconds`
    after). `ends`: a LogEnded after each instance whose stream the kubelet ended (the
    container exited)."""
    with JobFeed(api, name, namespace, replica) as feed:
        follower = _Follower(api, feed, name, namespace, tail_lines)
        job_synced = pods_synced = False
        pods_version = ""  # the resourceVersion of the last pod list or change followed
        final: Synced | None = None  # the pods listed when the job turned terminal, until the pod watch caught up
        deadline = None  # set when the job is terminal
        try:
            while not (deadline is not None and final is None and pods_synced and not follower.streams
                       and feed.queue.empty()):
                if follower.closing:
                    timeout = CONNECT_TIMEOUT
                else:
                    timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                item = feed.get(timeout)
                if item is None:
                    if follower.closing:  # streams did not end after close: give up on them
                        return
                    if final is not None:  # the pod watch did not catch up: the list, so no container that ran goes unread
                        follower.synced(final.objects)
                        final, deadline = None, time.monotonic() + drain_seconds
                        continue
                    follower.close()  # the drain time is over
                elif isinstance(item, LogLine):
                    yield item
                elif isinstance(item, StreamEnded):
                    follower.ended(item)
                    if ends and item.opened and not follower.closing:
                        yield LogEnded(item.replica, item.restarts)
                elif isinstance(item, BackendError):
                    raise item
                elif isinstance(item, Synced) and item.kind == "pod":
                    pods_synced, pods_version = True, item.version
                    follower.synced(item.objects)
                elif isinstance(item, WatchEvent) and item.kind == "pod":
                    pods_version = item.version or pods_version
                    follower.seen(item.object, deleted=item.type == "DELETED")
                elif isinstance(item, (Synced, WatchEvent)):
                    job = job_from(item, name, namespace, job_synced)
                    job_synced = True
                    if deadline is None and is_terminal(job):
                        deadline = time.monotonic() + drain_seconds
                        # the pods as they are now, so that no container that ran is left unread
                        with api.errors(f"listing pods of tfjob {name}"):
                            final = feed.pods_now()
                if final is not None and (at_or_after(pods_version, final.version) or follower.agrees(final.objects)):
                    final = None  # the pod watch has shown every change the list has
        finally:
            follower.close()
