"""The kube-apiserver audit log as the server-side clock of bench/launcher_scale.py.

Pod and TFJob timestamps in the objects have 1-s resolution; the audit log stamps each
write with microseconds. Logged: pod creation (Metadata), pod and TFJob status writes
(Request: the patch or object sent, small for pods). `server_changes` gives, per
(job, replica id, phase) and (job, "job", condition type), when the server first
committed it (the write's ResponseComplete stageTimestamp)."""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import yaml

POLICY = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "verbs": ["create"], "resources": [{"group": "", "resources": ["pods"]}]},
        {"level": "Request", "verbs": ["patch", "update"],
         "resources": [{"group": "", "resources": ["pods/status"]},
                       {"group": "kubeflow.org", "resources": ["tfjobs/status"]}]},
        {"level": "None"},
    ],
}
JOB = "job"  # the "replica" of TFJob condition keys

Key = tuple[str, str, str]  # (job name, replica id or JOB, phase or condition type)


def audit_flags(workdir: Path) -> tuple[Path, tuple[str, ...]]:
    """(audit log path, kube-apiserver flags writing it synchronously)."""
    policy, log = workdir / "audit-policy.yaml", workdir / "audit.log"
    policy.write_text(yaml.safe_dump(POLICY))
    return log, (f"--audit-policy-file={policy}", f"--audit-log-path={log}", "--audit-log-format=json",
                 "--audit-log-mode=blocking", "--audit-log-maxsize=0")


def epoch(stamp: str) -> float:
    """RFC 3339 (with or without fraction) -> seconds since the epoch."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _changes(event: dict, jobs: tuple[str, ...]) -> list[Key]:
    ref = event.get("objectRef") or {}
    name, body = ref.get("name", ""), event.get("requestObject") or {}
    if ref.get("resource") == "tfjobs":
        return [(name, JOB, c["type"]) for c in (body.get("status") or {}).get("conditions") or []
                if c.get("status") == "True"] if name in jobs else []
    job = next((j for j in jobs if name.startswith(f"{j}-")), None)
    if job is None:
        return []
    replica = name[len(job) + 1:]
    if event.get("verb") == "create":
        return [(job, replica, "Pending")]
    phase = (body.get("status") or {}).get("phase")
    return [(job, replica, phase)] if phase else []


def server_changes(log: Path, namespace: str, jobs: tuple[str, ...]) -> dict[Key, float]:
    """First successful write of each pod phase / TFJob condition of `jobs` in `namespace`."""
    first: dict[Key, float] = {}
    with open(log) as lines:
        for line in lines:
            if not line.endswith("\n"):
                break  # the event the server is writing now (a large one takes more than one write)
            event = json.loads(line)
            if (event.get("objectRef") or {}).get("namespace") != namespace:
                continue
            if (event.get("responseStatus") or {}).get("code", 200) >= 300:
                continue
            stamp = epoch(event["stageTimestamp"])
            for key in _changes(event, jobs):
                first[key] = min(first.get(key, stamp), stamp)
    return first
