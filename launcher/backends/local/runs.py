"""The runs directory: where the local backend keeps each job's state on disk.

Layout (one folder per job; every launcher process reads it, only the supervisor writes
status.json):

    $TFJOB_RUNS_DIR  (default ~/.local/share/tfjob-launcher/runs)
      NAMESPACE/NAME/
        manifest.yaml     the TFJob exactly as submitted
        plan.json         per replica: argv, env overrides, 127.0.0.1 address; the submission's uid
        status.json       conditions, replicas, history, exit code (written atomically)
        owner.json        pid of the launcher following the job in the foreground, if any
        stopping          why a launcher is stopping the job (delete, --replace, Ctrl-C), written
                          before it signals the supervisor, which puts it in the Stopped condition
        supervisor.log    the supervisor's own output
        logs/REPLICA.log  stdout+stderr of each replica ("worker-1"), appended across restarts
        logs/REPLICA.times  when that log reached each size ("SIZE UNIX_TIME" lines, written
                          by the supervisor): the lines' times for `logs --timestamps/--since`
        output/           the default --job-dir (checkpoints, events, export)

Everything in it is private to the user (directories 0700, files 0600): manifests, plans
and logs hold paths, arguments and environment values. The supervisor and the replicas
run with umask 077, so what they write (logs, the default job dir) is private too.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

from ...events import TERMINAL, Event, JobCondition, ReplicaPhase
from ..base import JobStatus, JobSummary

RUNS_ENV = "TFJOB_RUNS_DIR"
STATUS_VERSION = "tfjob-launcher/local-v1"
PRIVATE_DIR, PRIVATE_FILE, PRIVATE_UMASK = 0o700, 0o600, 0o077


def private_dir(path: Path) -> Path:
    """`path` as a directory only the user can enter (made or tightened)."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    os.chmod(path, PRIVATE_DIR)
    return path


def open_private(path: Path, mode: str = "ab"):
    """Open `path` for writing ("wb" or "ab") as a file only the user can read (0600)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode.startswith("a") else os.O_TRUNC)
    fd = os.open(path, flags | os.O_CLOEXEC, PRIVATE_FILE)
    os.fchmod(fd, PRIVATE_FILE)
    return os.fdopen(fd, mode)


def default_runs_dir() -> Path:
    configured = os.environ.get(RUNS_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".local" / "share" / "tfjob-launcher" / "runs"


def now() -> str:
    """RFC 3339 UTC timestamp, like Kubernetes' metav1.Time."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_json_atomic(path: Path, data: dict) -> None:
    """Write `data` so that a reader sees either the old file or the whole new one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class RunDir:
    """One job's folder."""

    path: Path

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.yaml"

    @property
    def plan_path(self) -> Path:
        return self.path / "plan.json"

    @property
    def status_path(self) -> Path:
        return self.path / "status.json"

    @property
    def owner_path(self) -> Path:
        return self.path / "owner.json"

    @property
    def supervisor_log(self) -> Path:
        return self.path / "supervisor.log"

    @property
    def output(self) -> Path:
        return self.path / "output"

    def log_path(self, replica: str) -> Path:
        return self.path / "logs" / f"{replica}.log"

    def times_path(self, replica: str) -> Path:
        return self.path / "logs" / f"{replica}.times"

    @property
    def tmp(self) -> Path:
        return self.path / "tmp"

    def tmp_path(self, replica: str) -> Path:
        """The replica's $TMPDIR (its container's /tmp), emptied as each of its processes exits."""
        return self.tmp / replica

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def create(self, tfjob: dict, plan: dict) -> None:
        for directory in (self.path.parent.parent, self.path.parent, self.path, self.path / "logs"):
            private_dir(directory)
        # the plan (with this submission's uid, as a TFJob's) first: the manifest makes the job exist (exists()),
        # and a follower that finds it must find the uid that tells this submission from the next
        write_json_atomic(self.plan_path, {**plan, "uid": uuid.uuid4().hex})
        with open_private(self.manifest_path, "wb") as f:
            f.write(yaml.safe_dump(tfjob, sort_keys=False).encode())

    def manifest(self) -> dict:
        return yaml.safe_load(self.manifest_path.read_text())

    def plan(self) -> dict:
        return json.loads(self.plan_path.read_text())

    def uid(self) -> str | None:
        """The id of the submission the folder holds (a job replaced under its name has
        another; "" for one submitted before ids were kept); None when there is none."""
        try:
            return self.plan().get("uid", "")
        except FileNotFoundError:
            return None

    def status(self) -> dict | None:
        """The last status the supervisor wrote (None before it wrote one, or if removed)."""
        try:
            return json.loads(self.status_path.read_text())
        except FileNotFoundError:
            return None

    def write_status(self, status: dict) -> None:
        write_json_atomic(self.status_path, status)

    def owner(self) -> tuple[int, int | None] | None:
        """(pid, start) of the foreground launcher that owns the job, if one claimed it."""
        try:
            owner = json.loads(self.owner_path.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return int(owner["pid"]), owner.get("start")

    def claim(self, pid: int, start: int | None) -> None:
        write_json_atomic(self.owner_path, {"pid": pid, "start": start})

    @property
    def stopping_path(self) -> Path:
        return self.path / "stopping"

    def stopping(self, why: str) -> None:
        """Say why the job is being stopped, before its supervisor is signalled."""
        with open_private(self.stopping_path, "wb") as f:
            f.write(why.encode())

    def stop_reason(self) -> str | None:
        """Why a launcher stopped the job (None: no launcher said; e.g. a kill by hand)."""
        try:
            return self.stopping_path.read_text(errors="replace").strip() or None
        except FileNotFoundError:
            return None

    def remove(self, keep_output: bool = False) -> Path | None:
        """Remove the job's folder; with `keep_output`, all but a non-empty output/ (the
        default job dir: checkpoints, events, the exported model), whose path is returned."""
        if not keep_output or not self.output.is_dir() or not any(self.output.iterdir()):
            shutil.rmtree(self.path, ignore_errors=True)
            return None
        for entry in self.path.iterdir():
            if entry != self.output:
                shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
        return self.output


class RunsDir:
    """All jobs: ROOT/NAMESPACE/NAME."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root).expanduser() if root else default_runs_dir()

    def job(self, name: str, namespace: str) -> RunDir:
        return RunDir(self.root / namespace / name)

    def jobs(self, namespace: str | None) -> list[RunDir]:
        spaces = [self.root / namespace] if namespace else sorted(self.root.glob("*"))
        runs = [RunDir(p) for space in spaces for p in sorted(space.glob("*"))]
        return [run for run in runs if run.exists()]


# ---- status.json <-> typed objects --------------------------------------------------

def set_condition(conditions: list[dict], ctype: str, reason: str, message: str) -> list[dict]:
    """Add a True condition the way training-operator's setCondition does: one entry per
    type, Running and Restarting replace each other, a terminal condition turns Running
    False, and nothing changes once the job Failed."""
    if any(c["type"] == "Failed" and c["status"] == "True" for c in conditions):
        return conditions
    current = next((c for c in conditions if c["type"] == ctype), None)
    if current and current["status"] == "True" and current["reason"] == reason:
        return conditions
    kept = []
    for cond in conditions:
        if cond["type"] == ctype or {cond["type"], ctype} == {"Running", "Restarting"}:
            continue
        if ctype in ("Succeeded", "Failed") and cond["type"] == "Running":
            cond = {**cond, "status": "False"}
        kept.append(cond)
    return kept + [{"type": ctype, "status": "True", "reason": reason, "message": message, "time": now()}]


def job_condition(cond: dict) -> JobCondition:
    return JobCondition(type=cond["type"], status=cond["status"], reason=cond.get("reason", ""),
                        message=cond.get("message", ""), time=cond.get("time", ""))


def replica_phase(rep: dict) -> ReplicaPhase:
    return ReplicaPhase(replica=rep["id"], type=rep["type"], index=rep["index"], phase=rep["phase"],
                        restarts=rep.get("restarts", 0), node="localhost", started=rep.get("started", ""),
                        gpus=0, exit_code=rep.get("exit_code"), message=rep.get("message", ""))


def ended_instances(status: dict) -> dict[str, list[int | None]]:
    """For each replica, the size of its log file when each of its processes ended (one
    per restart, and the last one once the replica is Succeeded or Failed). An end with
    no size recorded (a status written by an earlier version) gives None: the end is then
    known only after everything written so far."""
    def ends(rep: dict) -> list[int | None]:
        count = rep.get("restarts", 0) + (rep["phase"] in TERMINAL)
        return (rep.get("log_ends", []) + [None] * count)[:count]
    return {rep["id"]: ends(rep) for rep in status.get("replicas", ())}


def is_terminal(status: dict) -> bool:
    return any(c["type"] in TERMINAL and c["status"] == "True" for c in status["conditions"])


def job_status(status: dict) -> JobStatus:
    return JobStatus(
        name=status["name"], namespace=status["namespace"],
        conditions=tuple(job_condition(c) for c in status["conditions"]),
        replicas=tuple(replica_phase(r) for r in status["replicas"]),
        created=status.get("created", ""), backend="local")


def summary(status: JobStatus, replica_counts: dict) -> JobSummary:
    return JobSummary(name=status.name, namespace=status.namespace, phase=status.phase,
                      created=status.created, replicas=dict(replica_counts))


# ---- transitions: every change once, in order ------------------------------------------
# The supervisor appends each change to status["history"], so a reader polling the file
# sees every transition, even a Restarting shorter than its poll interval. Entries are
# {"condition": {...}} or {"replica": {...}}.

def _replica_fields(row: dict) -> dict:
    keys = ("id", "type", "index", "phase", "restarts", "exit_code", "started", "message")
    return {k: row.get(k) for k in keys}


def snapshot_entries(status: dict) -> list[dict]:
    """A snapshot as entries: conditions, then replicas, then the conditions a replica's
    change causes: Restarting (after the replica that exited) and the terminal one (a
    reader ends at the terminal condition, so the final replica phases come first)."""
    final = [c for c in status["conditions"] if c["type"] in (*TERMINAL, "Restarting")]
    return ([{"condition": c} for c in status["conditions"] if c not in final]
            + [{"replica": _replica_fields(r)} for r in status["replicas"]]
            + [{"condition": c} for c in final])


def to_event(entry: dict) -> Event:
    if "condition" in entry:
        return job_condition(entry["condition"])
    return replica_phase(entry["replica"])


class Transitions:
    """Differences between consecutive snapshots: conditions that were not there before
    (by value), replicas whose state changed."""

    def __init__(self) -> None:
        self.conditions: set[tuple] = set()
        self.replicas: dict[str, tuple] = {}

    def fresh(self, entries: list[dict]) -> list[dict]:
        """The entries of the next snapshot that are news."""
        news, conditions = [], set()
        for entry in entries:
            if "condition" in entry:
                key = tuple(sorted(entry["condition"].items()))
                conditions.add(key)
                if key not in self.conditions:
                    news.append(entry)
            else:
                row = entry["replica"]
                key = tuple(sorted(row.items()))
                if self.replicas.get(row["id"]) != key:
                    news.append(entry)
                self.replicas[row["id"]] = key
        self.conditions = conditions
        return news


def history_after(status: dict, changed: dict) -> list[dict]:
    """`status`'s history extended with what `changed` (a later snapshot) adds."""
    seen = Transitions()
    seen.fresh(snapshot_entries(status))
    return list(status.get("history", [])) + seen.fresh(snapshot_entries(changed))
