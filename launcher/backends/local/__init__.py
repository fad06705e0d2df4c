"""The local backend: a rendered TFJob run as processes on this machine.

`submit` writes the job's folder in the runs directory (see `runs.py`) and starts a
supervisor process (`supervisor.py`) in its own session, which runs every replica
with TF_CONFIG on 127.0.0.1 ports, in a private network namespace with only loopback
where it can (`netns.py`: nothing outside the job reaches the unauthenticated
TensorFlow ports), and writes status.json. When the replicas run unisolated, submit
prints one line saying so. Every other call reads that
folder, so `status`, `events`, `logs`, `list`, `stop` and `delete` work from any later
launcher process.

Foreground vs. detached: a submitted job outlives the launcher (--detach) and the Python
API's process, as a cluster's job does. When the CLI's launcher (`foreground=True`) that
submitted a job then follows it (`events()` or `logs(follow=True)` on the same
LocalBackend), it becomes the job's owner (owner.json) and the supervisor stops the job as
soon as that process is gone, however it died: Ctrl-C in the foreground leaves no process
behind. `stop()` stops a job now and returns once every process is gone.
"""
from __future__ import annotations

import copy
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

from ...events import Event, LogEnded, LogLine
from ...spec import SpecError, namespace_flag
from ...tfconfig import replica_counts
from ..base import AlreadyExists, Backend, BackendError, JobStatus, JobSummary, NotFound, stderr_note
from .logs import Dating, Tail, Times, follow_logs, previous_span, read_logs, read_span
from .secrets import unresolved
from .plan import REPO_ROOT, build_plan, command_line
from .procs import alive, signal_group, start_time, terminate_groups, terminate_members, wait_until
from .runs import (RunDir, RunsDir, ended_instances, history_after, is_terminal, job_status, open_private,
                         set_condition, summary, to_event)

SUPERVISOR_MODULE = "launcher.backends.local.supervisor"
ANNOTATION_PREFIX = "local.tfjob-launcher"
START_TIMEOUT = 30.0
POLL_SECONDS = 0.2


def _identity(tfjob: dict) -> tuple[str, str]:
    meta = tfjob.get("metadata") or {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "default")
    for field, value in (("metadata.name", name), ("metadata.namespace", namespace)):
        if not value or value in (".", "..") or "/" in value or "\x00" in value:
            raise BackendError(f"{field}: {value!r} cannot name a local job; use a DNS-1035 name like mnist-ps")
    return name, namespace


REPLACED = "replaced by a new submission of the same name"


def _change(run: RunDir, uid: str | None) -> str | None:
    """What became of the submission `uid` that a follower reads: None while the folder
    still holds it, else deleted or replaced (--replace reuses the folder)."""
    now = run.uid()
    if now is not None and now != uid:  # the next submission's plan, written before its manifest
        return REPLACED
    return "deleted" if now is None or not run.exists() else None


_EXCEPTION = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")


def _why_python_failed(output: str) -> str:
    """One line of why a Python process failed, from its output: the interpreter's fatal
    error and the exception it ended with (its last three lines were the thread dump's
    footer, `Current thread ... <no Python frame>`), else its last three lines."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    why = [line for line in lines if line.startswith("Fatal Python error:")] + \
        [line for line in lines if _EXCEPTION.match(line)][-1:]
    return " | ".join(why or lines[-3:]) or "no output"


def _holds_files(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def _pending(run: RunDir) -> dict:
    """The status of a job whose supervisor has not written one yet."""
    manifest = run.manifest()
    return {
        "name": manifest["metadata"]["name"], "namespace": manifest["metadata"].get("namespace", "default"),
        "conditions": [], "supervisor": None, "exit_code": None, "history": [],
        "replicas": [{"id": r["id"], "type": r["type"], "index": r["index"], "phase": "Pending"}
                     for r in run.plan()["replicas"]],
    }


def _lost(raw: dict, run: RunDir) -> dict:
    """A job whose supervisor died without writing a final status (e.g. SIGKILL)."""
    pid = raw["supervisor"]["pid"]
    message = (f"the local supervisor (pid {pid}) exited without finishing the job; "
               f"its replicas were killed with it; see {run.supervisor_log}")
    replicas = [{**r, "phase": "Failed", "pid": None, "message": "supervisor lost"}
                if r["phase"] in ("Running", "Pending") else r for r in raw["replicas"]]
    lost = {**raw, "replicas": replicas, "exit_code": 1,
            "conditions": set_condition(list(raw["conditions"]), "Failed", "SupervisorLost", message)}
    return {**lost, "history": history_after(raw, lost)}


class LocalBackend(Backend):
    log_options_note = None  # every LogOptions: the supervisor records where each process's lines end (--previous)
    # and when the log reached each size (--since, --timestamps)
    name = "local"

    def __init__(self, runs_dir: str | None = None, note=None, foreground: bool = False):
        self.runs = RunsDir(runs_dir)
        self.note = note or stderr_note
        self.foreground = foreground  # the CLI's: following a job it submitted makes it the job's owner
        self._children: list[subprocess.Popen] = []
        self._submitted: set[tuple[str, str]] = set()

    # ---- paths ------------------------------------------------------------------
    def default_job_dir(self, name: str, namespace: str) -> str:
        return str(self.runs.job(name, namespace).output)

    def _run(self, name: str, namespace: str) -> RunDir:
        run = self.runs.job(name, namespace)
        if not run.exists():
            kept = (f"; its outputs, kept when it was deleted, are in {run.output} (`delete {name}"
                    f"{namespace_flag(namespace)} --purge` removes them)" if _holds_files(run.output) else "")
            raise NotFound(f"no local job {namespace}/{name} in {self.runs.root}; {self._elsewhere(name, namespace)}"
                           + kept)
        return run

    def _elsewhere(self, name: str, namespace: str) -> str:
        """Where to look instead: the namespaces that hold a job of that name (`list` shows
        one namespace only, so its hint alone sent the user to the wrong one)."""
        spaces = [run.path.parent.name for run in self.runs.jobs(None)
                  if run.path.name == name and run.path.parent.name != namespace]
        if not spaces:
            return "see `list -A`"
        if len(spaces) == 1:
            return f"namespace {spaces[0]} has one: add -n {spaces[0]}"
        return f"namespaces {', '.join(spaces)} have one each: add -n NAMESPACE"

    def manifest(self, name: str, namespace: str) -> dict:
        return self._run(name, namespace).manifest()

    # ---- submit -----------------------------------------------------------------
    def dry_run(self, tfjob: dict, network_policy: dict | None = None) -> list[dict]:
        """The manifest, annotated per replica with the command line it would run locally
        (no NetworkPolicy: the local backend isolates replicas its own way)."""
        _identity(tfjob)
        plan = build_plan(tfjob)
        annotated = copy.deepcopy(tfjob)
        annotations = annotated["metadata"].setdefault("annotations", {})
        for replica in plan["replicas"]:
            annotations[f"{ANNOTATION_PREFIX}/{replica['id']}"] = command_line(replica)
        return [annotated]

    def submit(self, tfjob: dict, replace: bool = False, network_policy: dict | None = None) -> None:
        """`network_policy` is not applied here: the replicas' private network namespace
        (see netns.py) is the local counterpart."""
        name, namespace = _identity(tfjob)
        plan = build_plan(tfjob)
        problem = unresolved([ref for r in plan["replicas"] for ref in r["secretEnv"]], dict(os.environ))
        if problem:
            raise BackendError(problem)
        run = self.runs.job(name, namespace)
        if run.exists():
            if not replace:
                raise AlreadyExists(f"local job {namespace}/{name} already exists ({run.path}); "
                                    f"use --replace or `delete {name}{namespace_flag(namespace)}`")
            self._delete(run, purge=False, why=f"{REPLACED} (--replace)")
        run.create(tfjob, plan)
        try:
            self._start_supervisor(run)
        except BaseException:
            self._stop_run(run, "its submission failed")
            run.remove()
            raise
        self._submitted.add((name, namespace))

    def _claim(self, name: str, namespace: str, run: RunDir) -> None:
        """Following a job this launcher submitted makes it a foreground job (see above)."""
        if self.foreground and (name, namespace) in self._submitted:
            me = os.getpid()
            run.claim(me, start_time(me))

    def _start_supervisor(self, run: RunDir) -> None:
        argv = [sys.executable, "-m", SUPERVISOR_MODULE, str(run.path)]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, env.get("PYTHONPATH")) if p)
        with open_private(run.supervisor_log) as out:
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self._children.append(proc)
        wait_until(lambda: run.status() is not None or proc.poll() is not None, START_TIMEOUT)
        if run.status() is None:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            raise BackendError("the local supervisor did not start: "
                               + _why_python_failed(run.supervisor_log.read_text(errors="replace")))
        network = run.status().get("network") or {}
        from .netns import HOST, host_line  # not at import: `python -m` runs netns and supervisor
        # as programs, and a module the package already imported would run twice (RuntimeWarning)

        if network.get("mode") == HOST:
            self.note(host_line(network.get("reason", "")))

    # ---- reading state ----------------------------------------------------------
    def _reap(self) -> None:
        self._children = [p for p in self._children if p.poll() is None]

    def _current(self, run: RunDir) -> dict:
        """status.json, or what it means when the supervisor is not there to write it."""
        raw = run.status()
        if raw is None:
            return _pending(run)
        if is_terminal(raw):
            return raw
        self._reap()
        if alive(raw["supervisor"]["pid"], raw["supervisor"]["start"]):
            return raw
        raw = run.status() or raw  # it may have written the final status and exited
        return raw if is_terminal(raw) else _lost(raw, run)

    def _followed(self, run: RunDir, uid: str | None) -> tuple[dict | None, str | None]:
        """The status of the submission `uid` a follower reads, or (None, what became of it:
        deleted or replaced). Read before the check: what was read may be a new job's."""
        try:
            status = self._current(run)
        except FileNotFoundError:
            status = None
        change = _change(run, uid)
        return (None, change or "deleted") if status is None or change else (status, None)

    def status(self, name: str, namespace: str) -> JobStatus:
        return job_status(self._current(self._run(name, namespace)))

    def events(self, name: str, namespace: str, stop: threading.Event | None = None) -> Iterator[Event]:
        run = self._run(name, namespace)
        uid = run.uid()
        self._claim(name, namespace, run)
        stop = stop or threading.Event()  # never set: a poll interval of sleep
        cursor = 0
        while True:
            raw, change = self._followed(run, uid)
            if change:
                raise NotFound(f"local job {namespace}/{name} was {change}")
            history = raw["history"]
            yield from map(to_event, history[cursor:])
            cursor = len(history)
            if is_terminal(raw):
                return
            if stop.wait(POLL_SECONDS):
                return

    def logs(self, name: str, namespace: str, replica: str | None = None,
             follow: bool = False, options=None, ends: bool = False) -> Iterator[LogLine | LogEnded]:
        self.check_log_options(options)
        run = self._run(name, namespace)
        ids = [r["id"] for r in run.plan()["replicas"]]
        if replica not in (None, "all"):
            if replica not in ids:
                raise SpecError("--replica", f"job {name} has no replica {replica}; use one of {', '.join(ids)} or all")
            ids = [replica]
        dating = self._dating(run, options)
        tails = [Tail(rid, run.log_path(rid), Times(run.times_path(rid), run.log_path(rid)) if dating else None, dating)
                 for rid in ids]  # a line's time is read only when --since or --timestamps ask for it
        tail_lines = options.tail_lines if options else None
        if options and options.previous:
            return self._previous(run, tails, tail_lines, all_replicas=replica in (None, "all"))
        if not follow:
            return read_logs(tails, tail_lines, ended_instances(self._current(run)))
        uid = run.uid()
        self._claim(name, namespace, run)

        def state() -> tuple[bool, dict[str, list[int | None]] | None]:
            status, change = self._followed(run, uid)
            if change:  # its files are gone, or a new job's of that name: not read on; said, as the follow
                # ends with the job's last lines unread, not with the job
                self.note(f"note: local job {namespace}/{name} was {change} while its logs were followed; "
                          + ("its logs went with it" if change != REPLACED else
                             f"follow the new one's with `logs {name}{namespace_flag(namespace)} -f`"))
                return True, None
            return is_terminal(status), ended_instances(status)

        return follow_logs(tails, state, tail_lines, ends)

    def _dating(self, run: RunDir, options) -> Dating | None:
        """--since and --timestamps, refused for a job whose supervisor kept no line times."""
        if not (options and (options.since_seconds or options.timestamps)):
            return None
        raw = run.status()
        if raw is not None and not raw.get("log_times"):
            flag = "--timestamps" if options.timestamps else "--since"
            raise SpecError(flag, f"job {run.path.name} ran under an earlier launcher, which kept no line times; "
                            "drop the flag")
        since = time.time() - options.since_seconds if options.since_seconds else None
        return Dating(since=since, stamp=options.timestamps)

    def _previous(self, run: RunDir, tails: list[Tail], tail_lines: int | None,
                  all_replicas: bool) -> Iterator[LogLine]:
        """logs -p: each replica's previous process (with all replicas, those that have one)."""
        status = self._current(run)
        rows, ends = {r["id"]: r for r in status.get("replicas", ())}, ended_instances(status)
        spans = [previous_span(rows[tail.replica], ends.get(tail.replica, [])) if tail.replica in rows
                 else f"replica {tail.replica} has not started" for tail in tails]
        found = [(tail, span) for tail, span in zip(tails, spans) if not isinstance(span, str)]
        if not found:
            raise BackendError(f"--previous: {spans[0]}" if not all_replicas else
                               f"--previous: no replica of {run.path.name} has a process before its current one")
        return iter([line for tail, span in found for line in read_span(tail, span, tail_lines)])

    def list(self, namespace: str | None) -> list[JobSummary]:
        jobs = []
        for run in self.runs.jobs(namespace):
            try:
                jobs.append(summary(job_status(self._current(run)), replica_counts(run.manifest())))
            except FileNotFoundError:  # deleted while listing
                continue
        return jobs

    # ---- stopping ---------------------------------------------------------------
    def stop(self, name: str, namespace: str,
             why: str = "the launcher that ran it in the foreground was interrupted") -> None:
        """Stop every process of the job (the folder stays; the job ends Failed/Stopped,
        with `why` as the condition's message) and return once they are all gone."""
        self._stop_run(self._run(name, namespace), why)

    def _stop_run(self, run: RunDir, why: str) -> None:
        raw = run.status()
        if raw is None:
            return
        pid, start = raw["supervisor"]["pid"], raw["supervisor"]["start"]
        from .supervisor import GRACE_ENV

        grace = float(os.environ.get(GRACE_ENV, "10"))
        if alive(pid, start):
            run.stopping(why)  # read by the supervisor on the signal: a follower sees why, not "SIGTERM"
            signal_group(pid, signal.SIGTERM)
            if not wait_until(lambda: (self._reap(), not alive(pid, start))[1], grace + 10):
                signal_group(pid, signal.SIGKILL)
        leftovers = run.status() or raw
        terminate_groups([(r["pid"], r.get("pid_start")) for r in leftovers["replicas"] if r.get("pid")], grace)
        # a supervisor killed (SIGKILL, the OOM killer) takes its replicas along, not their own children
        terminate_members(pid, {r["pid"] for r in leftovers["replicas"] if r.get("pid")}, grace)
        self._reap()

    def delete(self, name: str, namespace: str, wait: bool = False, purge: bool = False) -> Path | None:
        """Stop the job's processes and remove its folder, except the default job dir
        (output/) unless `purge`; returns the kept output path (None: nothing kept).
        Always synchronous, so `wait` changes nothing."""
        run = self.runs.job(name, namespace)
        if purge and not run.exists() and run.output.is_dir():  # outputs kept by an earlier delete
            return run.remove()
        return self._delete(self._run(name, namespace), purge, f"deleted by `delete {name}{namespace_flag(namespace)}`")

    def _delete(self, run: RunDir, purge: bool, why: str) -> Path | None:
        self._stop_run(run, why)
        return run.remove(keep_output=not purge)
