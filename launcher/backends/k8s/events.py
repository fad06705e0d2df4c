"""TFJob and pod watch events -> typed events, each transition exactly once.

The trackers compare what the server says now with what they last saw, so a resumed
watch, a relist after 410 Gone or a TFJob update that only touches replicaStatuses emits
nothing twice, and a relist still emits whatever changed while the stream was down.

Pods are followed as Table rows (`table.py`): a few hundred bytes per change whatever
the job's size. Two things a row does not carry come from elsewhere, never for all pods:
the exit code of a container that failed and the kubelet's message for a container it
cannot start, e.g. ImagePullBackOff (one GET of that pod, once per failure and reason; for
an image that cannot be pulled, once per replica type and reason: 5,000 workers with a
mistyped image cost two GETs, not 10,000), and
why a Pending pod is not scheduled (the scheduler's FailedScheduling events, a third watch).
A GET that fails (API server restarting, 5xx, forbidden) never ends the stream: the row is
shown as it is and its pod read again at the row's next change or relist.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Callable, Iterator

from kubernetes.client.exceptions import ApiException

from ...events import Event, JobCondition, ReplicaPhase
from . import table
from .client import TRANSPORT_ERRORS, KubeApi, one_line
from .objects import job_conditions, replica_phase
from .table import PodRow
from .watch import JobFeed, Synced, WatchEvent, job_from

STOP_POLL_SECONDS = 0.5  # how often a stream that may be stopped looks at its stop event
UNCLAIMED_SECONDS = 30.0  # a TFJob followed this long without any condition: no operator has taken it up

Fetch = Callable[[PodRow], "dict | None"]  # one pod object, for what its row does not say


class PodUnreadable(Exception):
    """A Fetch could not read the pod this time (it may next time)."""


class ConditionTracker:
    """New TFJob condition transitions. A transition is a (status, reason, time) that
    differs from the last observed object's condition of that type, or a condition that
    reappears (the operator drops Running while Restarting, and back)."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[str, str, str]] = {}

    def update(self, tfjob: dict) -> list[JobCondition]:
        current = {c.type: (c.status, c.reason, c.time) for c in job_conditions(tfjob)}
        new = [c for c in job_conditions(tfjob) if self._last.get(c.type) != current[c.type]]
        self._last = current
        return new

    @property
    def seen(self) -> bool:
        """Whether the TFJob last observed has any condition."""
        return bool(self._last)


def event_time(event: dict) -> str:
    """When a core/v1 Event last happened (RFC 3339, comparable as text)."""
    return event.get("lastTimestamp") or event.get("eventTime") or (event.get("metadata") or {}).get(
        "creationTimestamp") or ""


class Unschedulable:
    """The scheduler's latest FailedScheduling message per pod name (core/v1 Events)."""

    def __init__(self) -> None:
        self.messages: dict[str, tuple[str, str]] = {}  # pod name -> (event time, message)

    def note(self, event: dict) -> str | None:
        """Record one Event; the pod name whose message changed, else None."""
        pod = (event.get("involvedObject") or {}).get("name", "")
        stamp = event_time(event)
        message = " ".join(str(event.get("message", "")).split())
        if not pod or not message or self.messages.get(pod, ("",))[0] > stamp:
            return None
        before, self.messages[pod] = self.messages.get(pod), (stamp, message)
        return pod if before is None or before[1] != message else None

    def message(self, row: PodRow) -> str:
        """"Unschedulable: ..." for a pod still Pending without a node, else ""."""
        found = self.messages.get(row.name)
        if not found or row.node or table.phase(row) != "Pending":
            return ""
        return f"Unschedulable: {found[1]}"


class ReplicaTracker:
    """ReplicaPhase when a replica's (phase, restarts, node, exit code, message) changes."""

    def __init__(self, job: str, fetch: Fetch | None = None) -> None:
        self._last: dict[str, tuple] = {}  # replica id -> state
        self._rows: dict[str, PodRow] = {}  # pod name -> latest row
        self._fetched: dict[tuple, ReplicaPhase | None] = {}  # (pod, restarts, status) -> from the pod
        self._image_messages: dict[tuple[str, str], str] = {}  # (replica type, image reason) -> kubelet's message
        self._job, self._fetch = job, fetch
        self.gpus: dict[str, int] = {}  # per replica type, from the TFJob
        self.always: frozenset[str] = frozenset()  # the replica types under restartPolicy Always, from the TFJob
        self.unschedulable = Unschedulable()

    def phase_of(self, row: PodRow) -> ReplicaPhase | None:
        phase = table.replica_phase(row, self._job, self.gpus, self.unschedulable.message(row), self.always)
        if phase is None or self._fetch is None or not table.needs_pod(row):
            return phase
        image = (phase.type, row.status) if row.status in table.IMAGE_WAITING else None
        if image in self._image_messages:  # the same image, the same kubelet message: no GET per replica
            return dataclasses.replace(phase, message=self._image_messages[image])
        key = (row.name, row.restarts, row.status)
        if key not in self._fetched:  # once per failure: the exit code is in the pod only
            try:
                pod = self._fetch(row)
            except PodUnreadable:
                return phase  # without its exit code for now; read again with the next row or relist
            self._fetched[key] = replica_phase(pod) if pod else None
        full = self._fetched[key]
        waiting = row.status == "CrashLoopBackOff" or row.status in table.WAITING_WITH_MESSAGE
        if full is None or (waiting and (full.restarts != row.restarts or not full.message.startswith(row.status))):
            return phase  # the pod moved on since the row (restarted, ended, pulled): its detail is not this row's
        if image is not None and full.message:
            self._image_messages[image] = full.message
        return dataclasses.replace(phase, exit_code=full.exit_code, message=full.message or phase.message)

    def apply(self, kind: str, row: PodRow) -> list[ReplicaPhase]:
        phase = self.phase_of(row)
        if phase is None:
            return []
        if kind == "DELETED":  # a replacement pod (same name: the old one is gone) is always reported
            self._rows.pop(row.name, None)
            self._last.pop(phase.replica, None)
            return []
        self._rows[row.name] = row
        state = (phase.phase, phase.restarts, phase.node, phase.exit_code, phase.message)
        if self._last.get(phase.replica) == state:
            return []
        self._last[phase.replica] = state
        return [phase]

    def sync(self, rows: tuple[PodRow, ...]) -> list[ReplicaPhase]:
        """A relist: report changes, forget replicas whose pod is gone."""
        phases = {row.name: self.phase_of(row) for row in rows}
        present = {phase.replica for phase in phases.values() if phase}
        for replica in set(self._last) - present:
            del self._last[replica]
        self._rows = {row.name: row for row in rows if phases[row.name]}
        return [phase for row in rows for phase in self.apply("MODIFIED", row)]

    def scheduling(self, kind: str, event: dict) -> list[ReplicaPhase]:
        """A FailedScheduling event: the message of its pod, if it is one of ours."""
        pod = self.unschedulable.note(event) if kind != "DELETED" else None
        row = self._rows.get(pod or "")
        return self.apply("MODIFIED", row) if row else []

    def unschedulable_from(self, events: list[dict]) -> None:
        for event in events:
            self.unschedulable.note(event)

    def scheduling_sync(self, events: tuple[dict, ...]) -> list[ReplicaPhase]:
        changed = {self.unschedulable.note(event) for event in events}
        return [phase for pod in changed if pod in self._rows for phase in self.apply("MODIFIED", self._rows[pod])]


def pod_fetcher(api: KubeApi, namespace: str) -> Fetch:
    """Reads a row's pod; None when it is gone or RBAC forbids reading pods (no exit codes
    then, as `kubectl get pods` shows), PodUnreadable when the server could not answer."""
    def fetch(row: PodRow) -> dict | None:
        try:
            return api.get_pod(row.name, namespace)
        except ApiException as exc:
            if exc.status in (401, 403):
                return None
            raise PodUnreadable(row.name) from exc
        except TRANSPORT_ERRORS as exc:
            raise PodUnreadable(row.name) from exc
    return fetch


# The training-operator's (v1.9.4) Warnings on a job that end its reconcile before the status
# write (pkg/controller.v1/control: pod_control.go, service_control.go). Its others, such as
# a pod's condition copied as "Error pod P condition message: ..." (pkg/core/job.go, e.g.
# Unschedulable while a pod waits for a node), come beside a status: the replicas show them.
BLOCKING_WARNINGS = frozenset({"FailedCreatePod", "FailedCreateService"})


def unclaimed_note(api: KubeApi, tfjob: dict, seconds: float | None = None) -> str | None:
    """Why a TFJob has no condition (`seconds` after it was followed): the training-operator's
    latest Warning on it that ends each of its reconciles before it writes a status (e.g.
    FailedCreatePod: a pod the API server refused); without one, after `seconds`, its latest
    Warning of another reason, else that no operator took it up. None without `seconds` and
    a blocking Warning: a job just created has no status either."""
    meta = tfjob["metadata"]
    name, namespace = meta["name"], meta.get("namespace", "")
    after = "" if seconds is None else f" after {seconds:g} s"
    try:
        warnings = api.warnings_of("TFJob", meta.get("uid", ""), namespace)
    except (ApiException, *TRANSPORT_ERRORS):
        warnings = []
    blocking = [w for w in warnings if w.get("reason") in BLOCKING_WARNINGS]
    latest = max(blocking or (warnings if seconds is not None else []), key=event_time, default=None)
    if latest is not None:
        return one_line(f"note: tfjob {name} has no status{after}: the training-operator reports "
                        f"{latest.get('reason', '')}: {latest.get('message', '')}; fix that and submit again with "
                        f"--replace (kubectl describe tfjob {name} -n {namespace} lists its events)")
    if seconds is None:
        return None
    return (f"note: tfjob {name} has no status{after}: no training-operator has taken it up; check that the "
            f"Kubeflow training-operator runs (kubectl get pods -n kubeflow), watches namespace {namespace} and has "
            "tfjob among its --enable-scheme")


def job_events(api: KubeApi, name: str, namespace: str, stop: threading.Event | None = None,
               note: Callable[[str], None] | None = None,
               unclaimed_seconds: float = UNCLAIMED_SECONDS) -> Iterator[Event]:
    """JobCondition / ReplicaPhase transitions until the TFJob is Succeeded or Failed; the
    terminal condition comes last, after the pods' last states (`JobFeed.pods_now`: what
    the pod watch has not brought yet; if that list fails, the stream ends with what it
    has). Once `stop` is set, it ends within STOP_POLL_SECONDS and closes the watches.
    `note` gets one line (unclaimed_note) when the TFJob still has no condition
    `unclaimed_seconds` after the stream began: the operator is not running, not for it, or
    fails on it."""
    conditions, replicas = ConditionTracker(), ReplicaTracker(name, pod_fetcher(api, namespace))
    job_synced = pods_synced = False
    held: list = []  # pod and scheduling items that came before the TFJob (its GPUs per type)
    final: list[JobCondition] = []  # the terminal condition (and any after it), held back
    unclaimed_due = time.monotonic() + unclaimed_seconds if note is not None else None
    with JobFeed(api, name, namespace, scheduling=True) as feed:
        while not (final and pods_synced and feed.queue.empty()):
            timeouts = [STOP_POLL_SECONDS] if stop is not None else []
            if unclaimed_due is not None:
                timeouts.append(max(0.0, unclaimed_due - time.monotonic()))
            item = feed.get(timeout=min(timeouts, default=None))
            if stop is not None and stop.is_set():
                return
            if unclaimed_due is not None and time.monotonic() >= unclaimed_due:
                unclaimed_due = None
                if job_synced and not conditions.seen:
                    note(unclaimed_note(api, job, unclaimed_seconds))
            if item is None:
                continue
            if isinstance(item, (Synced, WatchEvent)) and item.kind == "tfjob":
                job = job_from(item, name, namespace, job_synced)
                replicas.gpus, replicas.always = table.replica_gpus(job), table.restarting_always(job)
                for condition in conditions.update(job):
                    if final or condition.terminal:
                        final.append(condition)
                    else:
                        yield condition
                if not job_synced:
                    job_synced = True
                    for early in held:
                        yield from _replica_item(replicas, early)
                    held.clear()
            elif not job_synced:
                pods_synced = pods_synced or (isinstance(item, Synced) and item.kind == "pod")
                held.append(item)
            else:
                pods_synced = pods_synced or (isinstance(item, Synced) and item.kind == "pod")
                yield from _replica_item(replicas, item)
        if stop is None or not stop.is_set():
            yield from _last_states(feed, replicas)
    yield from final


def _last_states(feed: JobFeed, replicas: ReplicaTracker) -> list[ReplicaPhase]:
    try:
        now = feed.pods_now()
    except (ApiException, *TRANSPORT_ERRORS):
        return []
    return replicas.sync(now.objects)


def _replica_item(replicas: ReplicaTracker, item: object) -> list[ReplicaPhase]:
    if isinstance(item, Synced):
        return replicas.sync(item.objects) if item.kind == "pod" else replicas.scheduling_sync(item.objects)
    if isinstance(item, WatchEvent):
        return replicas.apply(item.type, item.object) if item.kind == "pod" else replicas.scheduling(item.type,
                                                                                                 item.object)
    return []
