"""Pods as the API server's Table rows (what `kubectl get pods -w` receives), not objects.

A pod of a TFJob carries the whole cluster spec in its TF_CONFIG: 269 KB per pod at 5,100
replicas, sent again with every status change. The launcher asks for pods as
`application/json;as=Table;v=v1;g=meta.k8s.io` with includeObject=None instead: each row
is kube-apiserver's own pod summary (Name, Ready, Status, Restarts, Age, IP, Node,
Nominated Node, Readiness Gates), ~280 bytes whatever the job's size. (includeObject=Metadata
would add the pod's metadata, ~3.3 KB of it managedFields: measured on kube-apiserver 1.36,
so rows go without it; the operator's pod name `<job>-<type>-<index>` says the replica.)

Pure functions, no I/O: a Table (list answer or watch event) -> `PodRow`s, and a row ->
`ReplicaPhase`. What a row cannot say (an exit code other than 0, the scheduler's reason
for a Pending pod, the kubelet's message for an image it cannot pull) comes from elsewhere: `events.py` reads one pod or the scheduler's
events for those, never all pods.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from ...events import ReplicaPhase, short_replica
from ...spec import GPU_RESOURCE, ROLES

NONE = "<none>"  # what the pod printer writes for an empty Node / IP
# Status values (the printer's "reason") of a pod whose container has run: the pod is Running
# unless a row condition says it is over.
_RAN = {"Running", "NotReady", "Completed", "Error", "OOMKilled", "ContainerCannotRun", "DeadlineExceeded",
        "CrashLoopBackOff", "Terminating", "StartError"}
# A container that ended unsuccessfully: the exit code is in the pod object only.
_FAILED_EXIT = {"Error", "OOMKilled", "ContainerCannotRun", "DeadlineExceeded", "StartError"}
# A container the kubelet cannot start: the row says the reason, the pod alone the kubelet's
# message (which image, which registry answer, which missing Secret or ConfigMap key).
WAITING_WITH_MESSAGE = {"ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "InvalidImageName",
                        "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
# waiting reasons about the image, which every replica of a type shares (one pod template):
# the kubelet's message names the image, not the pod
IMAGE_WAITING = {"ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "InvalidImageName"}
_EXIT_CODE = re.compile(r"^(?:Init:)?ExitCode:(-?\d+)$")
_RESTARTS = re.compile(r"^(\d+)")
_AGE = re.compile(r"(\d+)([ydhms])")
_UNIT = {"y": 365 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
_ROLE = {role.lower(): role for role in ROLES}
_REPLICA = re.compile(r"^(?P<type>[a-z]+)-(?P<index>\d+)$")


@dataclass(frozen=True)
class PodRow:
    """One row of the pod Table: the server's columns."""
    name: str
    status: str  # the Status column, e.g. Pending, ContainerCreating, Running, CrashLoopBackOff, Error
    restarts: int
    node: str  # "" while unscheduled
    created: str = ""  # RFC 3339, from the Age column when the row arrived (its resolution)
    ended: str = ""  # "Succeeded" / "Failed" from the row's Completed condition, "" while not over


def rows(table: dict, columns: list[str] | None = None) -> tuple[list[PodRow], list[str]]:
    """The rows of a Table and its column names (the server leaves columnDefinitions out
    of watch events: `columns` are the list's)."""
    names = [c.get("name", "") for c in table.get("columnDefinitions") or []] or list(columns or [])
    return [_row(row, names) for row in table.get("rows") or []], names


def _row(row: dict, columns: list[str]) -> PodRow:
    cells = dict(zip(columns, row.get("cells") or []))
    ended = next((c.get("reason", "") for c in row.get("conditions") or []
                  if c.get("type") == "Completed" and c.get("status") == "True"), "")
    restarts = _RESTARTS.match(str(cells.get("Restarts", "0")))
    node = str(cells.get("Node") or "")
    return PodRow(name=str(cells.get("Name") or ""), status=str(cells.get("Status", "")),
                  restarts=int(restarts[1]) if restarts else 0, node="" if node == NONE else node,
                  created=_created(str(cells.get("Age", ""))), ended=ended)


def _created(age: str) -> str:
    """"5m3s" (the printer's human duration) -> the creation time it stands for, or ""."""
    parts = _AGE.findall(age)
    if not parts:
        return ""
    seconds = sum(int(n) * _UNIT[unit] for n, unit in parts)
    return (datetime.now(timezone.utc) - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def replica_of(row: PodRow, job: str) -> tuple[str, int] | None:
    """(TFJob replica type, index) from the operator's pod name `<job>-<type>-<index>`."""
    match = _REPLICA.match(row.name[len(job) + 1:]) if row.name.startswith(f"{job}-") else None
    if not match or match["type"] not in _ROLE:
        return None
    return _ROLE[match["type"]], int(match["index"])


def phase(row: PodRow) -> str:
    """The pod's phase as far as its row tells: Succeeded/Failed from the row's condition,
    Running once a container has run, Pending before."""
    if row.ended:
        return row.ended
    if row.status == "Unknown":
        return "Unknown"
    if row.status in _RAN or row.restarts or row.status.startswith(("ExitCode:", "Signal:")):
        return "Running" if row.node or row.status != "Terminating" else "Pending"
    return "Pending"


def exit_code(row: PodRow) -> int | None:
    """The exit code a row shows (0 for Succeeded or a container Completed, ExitCode:N), None
    when it shows none."""
    if row.ended == "Succeeded" or row.status == "Completed":
        return 0
    match = _EXIT_CODE.match(row.status)
    return int(match[1]) if match else None


def log_instance(row: PodRow) -> int | None:
    """Which container instance of the pod `GET .../log` serves now (the kubelet's rules),
    numbered by the restarts before it: the running or ended container (the row's restarts),
    while a container waits to restart the one that ended before it (restarts - 1), None
    while none has run (Pending, ContainerCreating)."""
    served_now = row.ended or row.status.startswith(("ExitCode:", "Signal:")) or (
        row.status in _RAN and row.status != "CrashLoopBackOff" and (row.node or row.status != "Terminating"))
    if served_now:
        return row.restarts
    return row.restarts - 1 if row.restarts else None


def needs_pod(row: PodRow) -> bool:
    """A container ended unsuccessfully (or waits to restart after it did: CrashLoopBackOff)
    and the row does not say with which code; or the kubelet cannot start it (ImagePullBackOff
    and the like) and the row does not say why."""
    if row.status in WAITING_WITH_MESSAGE and not row.ended:
        return True
    return exit_code(row) is None and (row.ended == "Failed" or row.status in _FAILED_EXIT
                                       or row.status == "CrashLoopBackOff" or row.status.startswith("Signal:"))


def replica_phase(row: PodRow, job: str, gpus: dict[str, int] | None = None,
                  message: str = "", always: frozenset[str] = frozenset()) -> ReplicaPhase | None:
    """One row of the status table (None for a pod that is not a replica of `job`);
    `gpus` per replica type comes from the TFJob, `message` overrides the Status column.

    A container that exited 0 (Status Completed) in a pod whose phase is still Running is
    shown Succeeded: the kubelet restarts it only under restartPolicy Always (`always`: the
    replica types with that policy, from the TFJob), so its pod turns Succeeded next. The
    phase catches up a moment later, or never when the pod is deleted first, as the operator
    deletes those still Running when the job ends (cleanPodPolicy Running): a ps or worker
    that had exited by itself then stayed Running (Completed) in the live view."""
    replica = replica_of(row, job)
    if replica is None:
        return None
    rtype, index = replica
    now = phase(row)
    if now == "Running" and row.status == "Completed" and rtype not in always:
        now = "Succeeded"
    return ReplicaPhase(replica=short_replica(rtype, index), type=rtype, index=index, phase=now,
                        restarts=row.restarts, node=row.node, started=row.created,
                        gpus=(gpus or {}).get(rtype, 0), exit_code=exit_code(row),
                        message=message or ("" if row.status in (now, "Running") else row.status))


def restarting_always(tfjob: dict) -> frozenset[str]:
    """The replica types whose restartPolicy is Always (the kubelet restarts even a container
    that exited 0; the operator's default is Never)."""
    specs = (tfjob.get("spec") or {}).get("tfReplicaSpecs") or {}
    return frozenset(rtype for rtype, spec in specs.items() if (spec or {}).get("restartPolicy") == "Always")


def replica_gpus(tfjob: dict) -> dict[str, int]:
    """GPUs per replica of each type, from the TFJob's pod templates (what every pod gets)."""
    counts = {}
    for rtype, spec in ((tfjob.get("spec") or {}).get("tfReplicaSpecs") or {}).items():
        total = 0
        for container in (((spec.get("template") or {}).get("spec") or {}).get("containers") or []):
            value = ((container.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE)
            if value is not None and str(value).isdigit():
                total += int(value)
        counts[rtype] = total
    return counts
