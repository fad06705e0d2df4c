"""FakeBackend: an in-memory Backend for CLI and view tests (no cluster, no processes).

It is a fake, named as such: it replays a scripted event sequence and scripted log
lines, records what the CLI asked for, and can deliver a real SIGINT to this process
in the middle of the event stream to test Ctrl-C handling.
"""
from __future__ import annotations

import os
import signal
import threading
from typing import Iterator

from launcher.backends.base import AlreadyExists, Backend, JobStatus, JobSummary, NotFound
from launcher.events import Event, JobCondition, LogLine, ReplicaPhase

STREAM_TIMEOUT = 30.0  # a blocked fake stream gives up after this (tests never wait for it)


def replica_phase(replica: str, phase: str, **extra) -> ReplicaPhase:
    rtype, index = replica.rsplit("-", 1)
    types = {"chief": "Chief", "ps": "PS", "worker": "Worker", "evaluator": "Evaluator"}
    return ReplicaPhase(replica=replica, type=types[rtype], index=int(index), phase=phase, **extra)


def lifecycle(outcome: str = "Succeeded", replicas: tuple[str, ...] = ("chief-0", "ps-0", "worker-0")) -> list[Event]:
    """A plausible event sequence ending in `outcome`."""
    events: list[Event] = [JobCondition("Created", reason="TFJobCreated")]
    events += [replica_phase(r, "Pending") for r in replicas]
    events += [replica_phase(r, "Running", node="node-1") for r in replicas]
    events.append(JobCondition("Running", reason="TFJobRunning"))
    final = "Succeeded" if outcome == "Succeeded" else "Failed"
    events.append(replica_phase(replicas[0], final, node="node-1", exit_code=0 if final == "Succeeded" else 1))
    events.append(JobCondition(outcome, reason=f"TFJob{outcome}", message=f"job {outcome.lower()}"))
    return events


class FakeBackend(Backend):
    def __init__(self, name: str = "fake", events: list[Event] | None = None,
                 logs: dict[str, list[str]] | None = None, interrupt_after: int | None = None,
                 default_dir: str | None = None, existing: tuple[str, ...] = (),
                 reruns: list[list[Event]] | None = None):
        self.name = name
        self.script = list(events if events is not None else lifecycle())
        self.reruns = [list(run) for run in reruns or ()]  # the scripts of the 2nd, 3rd, ... submission
        self.log_script = logs or {}
        self.interrupt_after = interrupt_after
        self.default_dir = default_dir
        self.jobs: dict[str, dict] = {job: {} for job in existing}
        self.submitted: list[tuple[dict, bool]] = []
        self.dry_runs: list[dict] = []
        self.network_policies: list[dict | None] = []
        self.deleted: list[tuple[str, str, bool]] = []
        self.stopped: list[tuple[str, str]] = []  # the local backend's stop(): a foreground job interrupted
        self.log_requests: list[tuple[str, str | None, bool]] = []
        self.log_options: list = []
        self.release = threading.Event()  # set by tests to unblock a stream held after SIGINT

    # ---- Backend interface -----------------------------------------------------------
    def default_job_dir(self, name: str, namespace: str) -> str | None:
        return f"{self.default_dir}/{namespace}/{name}" if self.default_dir else None

    def dry_run(self, tfjob: dict, network_policy: dict | None = None) -> list[dict]:
        self.dry_runs.append(tfjob)
        self.network_policies.append(network_policy)
        return [{**item, "status": {"dryRun": True}} for item in (tfjob, network_policy) if item is not None]

    def submit(self, tfjob: dict, replace: bool = False, network_policy: dict | None = None) -> None:
        self.network_policies.append(network_policy)
        name = tfjob["metadata"]["name"]
        if name in self.jobs and not replace:
            raise AlreadyExists(f"tfjob {name} already exists; use --replace or another --name")
        if name in self.jobs and self.reruns:
            self.script = self.reruns.pop(0)
        self.jobs[name] = tfjob
        self.submitted.append((tfjob, replace))

    def status(self, name: str, namespace: str) -> JobStatus:
        self._require(name)
        conditions = tuple(e for e in self.script if isinstance(e, JobCondition))
        latest: dict[str, ReplicaPhase] = {}
        for event in self.script:
            if isinstance(event, ReplicaPhase):
                latest[event.replica] = event
        return JobStatus(name, namespace, conditions, tuple(latest.values()), backend=self.name)

    def events(self, name: str, namespace: str, stop=None) -> Iterator[Event]:
        for index, event in enumerate(self.script):
            if self.interrupt_after is not None and index == self.interrupt_after:
                os.kill(os.getpid(), signal.SIGINT)
                self.release.wait(STREAM_TIMEOUT)
                return
            yield event

    def logs(self, name: str, namespace: str, replica: str | None = None,
             follow: bool = False, options=None, ends: bool = False) -> Iterator[LogLine]:
        """The scripted lines; `options` (LogOptions) are recorded, not applied. No LogEnded
        even with `ends`: the stream's own end is the end of every log."""
        self._require(name)
        self.log_requests.append((name, replica, follow))
        self.log_options.append(options)
        for source, lines in self.log_script.items():
            if replica in (None, source):
                yield from (LogLine(source, line) for line in lines)

    def delete(self, name: str, namespace: str, wait: bool = False) -> None:
        self._require(name)
        del self.jobs[name]
        self.deleted.append((name, namespace, wait))

    def stop(self, name: str, namespace: str) -> None:
        self._require(name)
        self.stopped.append((name, namespace))

    def list(self, namespace: str | None) -> list[JobSummary]:
        return [JobSummary(name, namespace or "default", "Running", replicas={"Worker": 2})
                for name in self.jobs]

    def _require(self, name: str) -> None:
        if name not in self.jobs:
            raise NotFound(f"tfjob {name} not found; list jobs with python -m launcher list")
