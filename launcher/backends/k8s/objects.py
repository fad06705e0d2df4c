"""Reading TFJob and pod objects (JSON dicts) as training-operator v1.9 writes them.

Pure functions, no I/O: conditions, one ReplicaPhase per pod, and the label selectors
the operator's labels allow.
"""
from __future__ import annotations

import re

from ...events import JobCondition, ReplicaPhase, short_replica
from ...spec import GPU_RESOURCE, JOB_NAME_LABEL, QUEUE_LABEL, ROLES
from ..base import BackendError

# Labels the operator puts on every pod it creates (kubeflow.org/v1 common_types.go).
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"  # lower-case type, e.g. "worker"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
CONTAINER = "tensorflow"  # the TFJob default container name
_ROLE_BY_LABEL = {role.lower(): role for role in ROLES}
_REPLICA_ID = re.compile(r"^(?P<type>[a-z]+)-(?P<index>\d+)$")


# ---- TFJob ----------------------------------------------------------------------------
def job_conditions(tfjob: dict) -> tuple[JobCondition, ...]:
    return tuple(
        JobCondition(type=c.get("type", ""), status=c.get("status", ""), reason=c.get("reason", ""),
                     message=c.get("message", ""), time=c.get("lastTransitionTime", ""))
        for c in (tfjob.get("status") or {}).get("conditions") or [])


def suspended(tfjob: dict) -> bool:
    """runPolicy.suspend: true (created for Kueue, or suspended by hand)."""
    return bool(((tfjob.get("spec") or {}).get("runPolicy") or {}).get("suspend"))


def queue_of(tfjob: dict) -> str:
    """The Kueue LocalQueue the job is labelled for, "" if none."""
    return str(((tfjob.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) or "")


def is_terminal(tfjob: dict) -> bool:
    return any(c.terminal for c in job_conditions(tfjob))


def created(obj: dict) -> str:
    return obj.get("metadata", {}).get("creationTimestamp", "")


# ---- replica ids and selectors --------------------------------------------------------
def parse_replica(replica: str) -> tuple[str, int]:
    """"worker-1" -> ("Worker", 1)."""
    match = _REPLICA_ID.match(replica)
    if not match or match["type"] not in _ROLE_BY_LABEL:
        ids = ", ".join(f"{r.lower()}-0" for r in ROLES)
        raise BackendError(f"--replica: {replica!r} is not a replica id; use TYPE-INDEX like {ids}, or all")
    return _ROLE_BY_LABEL[match["type"]], int(match["index"])


def pod_selector(job_name: str, replica: tuple[str, int] | None = None) -> str:
    """Label selector for the job's pods, or for one replica's pod."""
    selector = f"{JOB_NAME_LABEL}={job_name}"
    if replica:
        selector += f",{REPLICA_TYPE_LABEL}={replica[0].lower()},{REPLICA_INDEX_LABEL}={replica[1]}"
    return selector


def replica_of(pod: dict) -> tuple[str, int] | None:
    """(TFJob replica type, index) from the operator's labels, None if not an operator pod."""
    labels = pod.get("metadata", {}).get("labels") or {}
    rtype, index = labels.get(REPLICA_TYPE_LABEL), labels.get(REPLICA_INDEX_LABEL)
    if not rtype or index is None or not str(index).isdigit():
        return None
    return _ROLE_BY_LABEL.get(rtype.lower(), rtype.capitalize()), int(index)


def replica_order(phase: ReplicaPhase) -> tuple[int, int]:
    role_rank = ROLES.index(phase.type) if phase.type in ROLES else len(ROLES)
    return role_rank, phase.index


# ---- pods -----------------------------------------------------------------------------
def container_name(pod: dict) -> str:
    names = [c.get("name") for c in pod.get("spec", {}).get("containers") or []]
    return CONTAINER if CONTAINER in names or not names else names[0]


def container_status(pod: dict) -> dict:
    name = container_name(pod)
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == name:
            return status
    return {}


def _gpus(pod: dict) -> int:
    total = 0
    for container in pod.get("spec", {}).get("containers") or []:
        value = ((container.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE)
        if value is not None and str(value).isdigit():
            total += int(value)
    return total


def _reason(detail: dict) -> str:
    """"Reason: message" on one line (the kubelet's pull errors can span several)."""
    return " ".join(": ".join(filter(None, [detail.get("reason", ""), detail.get("message", "")])).split())


def _message(pod: dict, state: dict) -> str:
    """Why a replica is where it is: waiting/terminated reason, eviction, unschedulable."""
    status = pod.get("status") or {}
    for key in ("waiting", "terminated"):
        if state.get(key):
            return _reason(state[key])
    if status.get("reason"):
        return _reason(status)
    unscheduled = [c for c in status.get("conditions") or []
                   if c.get("type") == "PodScheduled" and c.get("status") == "False"]
    if unscheduled and status.get("phase", "Pending") == "Pending":
        return _reason(unscheduled[0])
    return ""


def replica_phase(pod: dict) -> ReplicaPhase | None:
    """One row of the status table for an operator pod (None for anything else)."""
    replica = replica_of(pod)
    if replica is None:
        return None
    rtype, index = replica
    status = pod.get("status") or {}
    cstatus = container_status(pod)
    state = cstatus.get("state") or {}
    terminated = state.get("terminated") or {}
    if not terminated and state.get("waiting"):  # CrashLoopBackOff and the like: why the last one ended
        terminated = (cstatus.get("lastState") or {}).get("terminated") or {}
    return ReplicaPhase(
        replica=short_replica(rtype, index),
        type=rtype,
        index=index,
        phase=status.get("phase") or "Pending",
        restarts=sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []),
        node=pod.get("spec", {}).get("nodeName") or "",
        started=status.get("startTime") or "",
        gpus=_gpus(pod),
        exit_code=terminated.get("exitCode"),
        message=_message(pod, state),
    )


def owner_reference(obj: dict) -> dict:
    """An ownerReference to `obj` (as the server stored it: with its uid), so the garbage
    collector deletes the dependent when `obj` goes."""
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"]}
