"""Was a failed TFJob failed by a deleted pod? Then `submit` may submit it again.

training-operator v1.9 counts a replica pod that is being deleted while it runs as a
failed replica (pkg/core/status.go, UpdateJobReplicaStatuses: "Count deleted Pods as
failures"), and a TFJob with a failed replica and no Restarting condition is Failed
(pkg/controller.v1/tensorflow/tfjob_controller.go, UpdateJobStatus), whatever the
replica's restart policy. So a spot preemption, a node drain or `kubectl delete pod` of
the chief (or of any replica) ends the whole job, and the operator never brings the pod
back. The trainer checkpoints to the job dir, so submitting the same TFJob again resumes
it from the latest checkpoint: `launcher submit` does that, up to `--max-resubmits` times,
while it follows the job.

A deletion is told apart from a replica that failed on its own by what the launcher saw
first, in the order the pod watch delivered it: a running (or pending) pod going
Terminating, before any replica ended Failed. The operator's own clean-up of the other
pods (cleanPodPolicy) comes after the deletion that failed the job, and the pods it deletes
to restart a replica (restartPolicy ExitCode, a retryable exit code) have ended Failed
first and are followed by a Restarting condition, which starts the tally again. The Failed
condition's message must name the replica type of the deleted pod ("... because 1 Chief
replica(s) failed."), so a job failed for another reason (its backoff limit, its active
deadline) is never resubmitted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .events import Event, JobCondition, ReplicaPhase, short_replica

# UpdateJobStatus's message: "TFJob ns/name has failed because 1 Chief replica(s) failed."
_FAILED_TYPE = re.compile(r"because \d+ (\w+) replica\(s\) failed")
DELETED = "Terminating"  # the pod printer's Status of a pod with a deletion timestamp


@dataclass(frozen=True)
class Deletion:
    replica: str  # e.g. "chief-0"
    type: str  # TFJob replica type, e.g. "Chief"


class FirstFault:
    """Feed it every event of one run of the job; `deletion(failed)` answers whether the
    Failed condition `failed` came from a deleted pod."""

    def __init__(self) -> None:
        self._first: Deletion | str | None = None  # the first fault: a Deletion, or the replica that failed

    def see(self, event: Event) -> None:
        if isinstance(event, JobCondition) and event.type == "Restarting" and event.status == "True":
            self._first = None  # the operator restarted a replica: what came before is handled
            return
        if not isinstance(event, ReplicaPhase) or self._first is not None:
            return
        if event.message == DELETED and event.phase in ("Running", "Pending"):
            self._first = Deletion(event.replica, event.type)
        elif event.phase == "Failed":
            self._first = event.replica

    def deletion(self, failed: JobCondition) -> Deletion | None:
        if not (failed.type == "Failed" and failed.status == "True") or not isinstance(self._first, Deletion):
            return None
        named = _FAILED_TYPE.search(failed.message)
        return self._first if named and named[1] == self._first.type else None


def deleted_in(failed: JobCondition, replicas: tuple[ReplicaPhase, ...],
               expected: dict[str, int] | None = None) -> Deletion | None:
    """When the watch ended before the deleted pod's change arrived: a replica of the type
    the Failed condition names that is still Terminating, or already gone (fewer pods of
    that type than `expected`, the job's count per type), and none of that type Failed.
    (Under cleanPodPolicy All the operator also deletes a replica that failed on its own,
    so the caller asks this only for the other policies.)"""
    named = _FAILED_TYPE.search(failed.message)
    if not named:
        return None
    of_type = [r for r in replicas if r.type == named[1]]
    if any(r.phase == "Failed" for r in of_type):
        return None
    deleted = [r for r in of_type if r.message == DELETED]
    if deleted:
        return Deletion(deleted[0].replica, deleted[0].type)
    present = {r.index for r in of_type}
    gone = [index for index in range((expected or {}).get(named[1], 0)) if index not in present]
    return Deletion(short_replica(named[1], gone[0]), named[1]) if gone else None
