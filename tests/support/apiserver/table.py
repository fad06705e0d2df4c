"""The Table form of the FAKE API server (tests/support/apiserver/), as kube-apiserver
serves it (Kubernetes API concepts, "Receiving resources as Tables"; the pod columns and
Status rules of kube-apiserver's pod printer, pkg/printers/internalversion printPod):

- `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` on a list or watch of pods;
- a list answers one `meta.k8s.io/v1` Table: columnDefinitions, the list's
  resourceVersion, one row per pod;
- a watch event's object is a Table holding the changed pod's row, its resourceVersion the
  pod's, columnDefinitions null (what kube-apiserver 1.36 sends);
- each row: cells Name, Ready, Status, Restarts, Age, IP, Node, Nominated Node, Readiness
  Gates; conditions [Completed] for a Succeeded or Failed pod; `object` per
  includeObject: None -> null, Metadata (the default) -> PartialObjectMetadata, Object -> the pod.

Only single-container pods without init containers, as the operator's are (the printer's
init-container branches are left out)."""
from __future__ import annotations

from datetime import datetime, timezone

TABLE_MEDIA = "as=Table"
COLUMNS = [("Name", "name", 0), ("Ready", "", 0), ("Status", "", 0), ("Restarts", "", 0), ("Age", "", 0),
           ("IP", "", 1), ("Node", "", 1), ("Nominated Node", "", 1), ("Readiness Gates", "", 1)]
_COMPLETED = {"Succeeded": "The pod has completed successfully.", "Failed": "The pod failed."}


def wants_table(accept: str | None) -> bool:
    return TABLE_MEDIA in (accept or "") and "g=meta.k8s.io" in (accept or "")


def table(pods: list[dict], version: str, include: str | None, headers: bool = True) -> dict:
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": version},
            "columnDefinitions": [{"name": n, "type": "string", "format": f, "description": "", "priority": p}
                                  for n, f, p in COLUMNS] if headers else None,
            "rows": [row(pod, include) for pod in pods]}


def row(pod: dict, include: str | None) -> dict:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    phase = status.get("phase") or "Pending"
    reason = status.get("reason") or phase
    ready = restarts = 0
    has_running = False
    for container in reversed(containers):
        restarts += int(container.get("restartCount") or 0)
        state = container.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated:
            reason = (f"Signal:{terminated['signal']}" if terminated.get("signal")
                      else f"ExitCode:{terminated.get('exitCode', 0)}")
        elif container.get("ready") and state.get("running") is not None:
            has_running = True
            ready += 1
    if reason == "Completed" and has_running:
        reason = "Running"
    if meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    ips = status.get("podIPs") or []
    cells = [meta["name"], f"{ready}/{len(spec.get('containers') or [])}", reason, str(restarts),
             _age(meta.get("creationTimestamp")), ips[0]["ip"] if ips else "<none>", spec.get("nodeName") or "<none>",
             status.get("nominatedNodeName") or "<none>", "<none>"]
    out = {"cells": cells, "object": _object(pod, include)}
    if phase in _COMPLETED:
        out["conditions"] = [{"type": "Completed", "status": "True", "reason": phase, "message": _COMPLETED[phase]}]
    return out


def _object(pod: dict, include: str | None) -> dict | None:
    if include == "None":
        return None
    if include == "Object":
        return pod
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": pod["metadata"]}


def _age(stamp: str | None) -> str:
    """The printer's human duration since `stamp` (seconds, then minutes and seconds...)."""
    if not stamp:
        return "<unknown>"
    seconds = int((datetime.now(timezone.utc) - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds())
    seconds = max(seconds, 0)
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    return f"{hours}h" if hours < 48 else f"{hours // 24}d"
