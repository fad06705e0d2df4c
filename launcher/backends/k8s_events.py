"""TFJob and pod watch events -> typed events, each transition exactly once.

The trackers compare what the server says now with what they last saw, so a resumed
watch, a relist after 410 Gone or a TFJob update that only touches replicaStatuses emits
nothing twice, and a relist still emits whatever changed while the stream was down.
"""
from __future__ import annotations

from typing import Iterator

from ..events import Event, JobCondition, ReplicaPhase
from .k8s_client import KubeApi
from .k8s_objects import job_conditions, replica_phase
from .k8s_watch import JobFeed, Synced, WatchEvent, job_from


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


class ReplicaTracker:
    """ReplicaPhase when a replica's (phase, restarts, node, exit code, message) changes."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[str, tuple]] = {}  # replica id -> (pod uid, state)

    def apply(self, kind: str, pod: dict) -> list[ReplicaPhase]:
        phase = replica_phase(pod)
        if phase is None:
            return []
        uid = pod.get("metadata", {}).get("uid", "")
        if kind == "DELETED":  # a replacement pod (same replica id) is always reported
            if self._last.get(phase.replica, ("",))[0] == uid:
                del self._last[phase.replica]
            return []
        state = (phase.phase, phase.restarts, phase.node, phase.exit_code, phase.message)
        if self._last.get(phase.replica) == (uid, state):
            return []
        self._last[phase.replica] = (uid, state)
        return [phase]

    def sync(self, pods: tuple[dict, ...]) -> list[ReplicaPhase]:
        """A relist: report changes, forget replicas whose pod is gone."""
        present = {phase.replica for phase in map(replica_phase, pods) if phase}
        for replica in set(self._last) - present:
            del self._last[replica]
        return [phase for pod in pods for phase in self.apply("MODIFIED", pod)]


def job_events(api: KubeApi, name: str, namespace: str) -> Iterator[Event]:
    """JobCondition / ReplicaPhase transitions until the TFJob is Succeeded or Failed; the
    terminal condition comes last, after the pod changes already received."""
    conditions, replicas = ConditionTracker(), ReplicaTracker()
    job_synced = pods_synced = False
    final: list[JobCondition] = []  # the terminal condition (and any after it), held back
    with JobFeed(api, name, namespace) as feed:
        while not (final and pods_synced and feed.queue.empty()):
            item = feed.get()
            if isinstance(item, Synced) and item.kind == "pod":
                pods_synced = True
                yield from replicas.sync(item.objects)
            elif isinstance(item, WatchEvent) and item.kind == "pod":
                yield from replicas.apply(item.type, item.object)
            elif isinstance(item, (Synced, WatchEvent)):
                job = job_from(item, name, namespace, job_synced)
                job_synced = True
                for condition in conditions.update(job):
                    if final or condition.terminal:
                        final.append(condition)
                    else:
                        yield condition
    yield from final
