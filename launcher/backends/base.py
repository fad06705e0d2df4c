"""The one interface the CLI talks to; `k8s` and `local` implement it.

Shaped like TorchX schedulers: `dry_run` returns the request that `submit` would send,
`submit` sends it, `events` yields typed events (see `launcher.events`) until the job
is terminal. The CLI and the view never know which backend they talk to.
"""
from __future__ import annotations

import abc
import sys
import threading
from dataclasses import dataclass, field
from typing import Iterator

from ..events import Event, JobCondition, LogEnded, LogLine, ReplicaPhase


def stderr_note(line: str) -> None:
    """Where a backend's notes go unless the caller gives its own: one line on stderr."""
    print(line, file=sys.stderr, flush=True)


class BackendError(RuntimeError):
    """A backend could not do what was asked; the message is one line for the user."""


class AlreadyExists(BackendError):
    pass


class NotFound(BackendError):
    pass


class CRDUnavailable(BackendError):
    """The cluster's copy of a CRD could not be read (not installed, not permitted)."""


@dataclass(frozen=True)
class JobStatus:
    """A snapshot: the TFJob's conditions and one row per replica."""

    name: str
    namespace: str
    conditions: tuple[JobCondition, ...] = ()
    replicas: tuple[ReplicaPhase, ...] = ()
    created: str = ""  # RFC 3339
    backend: str = ""
    suspended: bool = False  # the TFJob says runPolicy.suspend: true (e.g. waiting for Kueue)
    queue: str = ""  # its Kueue LocalQueue (label kueue.x-k8s.io/queue-name), "" if none
    deleted: tuple[str, ...] = ()  # replicas of an ended job whose pods are gone (cleanPodPolicy), not in `replicas`
    clean_pod_policy: str = ""  # the TFJob's (k8s)

    @property
    def phase(self) -> str:
        """The last true condition type (Created, Suspended, Running, Restarting, Succeeded,
        Failed); see `job_phase`."""
        return job_phase(self.conditions, self.suspended)


def deleted_pods_reason(policy: str, one: bool = False) -> str:
    """Why a replica of an ended TFJob has no pod (and so no log): the operator deletes pods
    at the end as the job's cleanPodPolicy says. `one`: said of one replica."""
    whose = "its pod" if one else "their pods"
    if policy in ("Running", "All"):
        which = "the pods still running" if policy == "Running" else "every pod"
        return (f"the training-operator deleted {whose} when the job ended (cleanPodPolicy {policy} deletes {which} "
                "then); submit with --clean-pod-policy None to keep every pod and its log")
    return f"{whose} {'was' if one else 'were'} deleted after the job ended"


def job_phase(conditions, suspended: bool = False) -> str:
    """The last true condition type, "Pending" before any. A job created suspended (Kueue's
    `--queue-name`) is "Suspended" from the start: the operator writes Created before its
    Suspended condition, and Kueue may take its time to admit the job. Suspended=False (the
    operator's TFJobResumed) is "Resumed" until the job runs."""
    phase = "Pending"
    for condition in conditions:  # the operator appends each change, so the last one counts
        if condition.status == "True":
            phase = condition.type
        elif condition.type == "Suspended" and condition.status == "False":
            phase = "Resumed"  # admitted (Kueue) or resumed by hand; Running follows
    return "Suspended" if suspended and phase in ("Pending", "Created") else phase


@dataclass(frozen=True)
class LogOptions:
    previous: bool = False             # the previous container instance (before the last restart)
    since_seconds: int | None = None   # only lines newer than this
    timestamps: bool = False           # each line starts with its RFC 3339 time
    tail_lines: int | None = None      # only the last N lines of each replica's current log (every
    #                                    backend; when following: of what exists, then every new line)

    def __bool__(self) -> bool:
        return bool(self.previous or self.since_seconds or self.timestamps or self.tail_lines is not None)


@dataclass(frozen=True)
class JobSummary:
    name: str
    namespace: str
    phase: str
    created: str = ""
    replicas: dict = field(default_factory=dict)  # {"Worker": 2, ...}
    queue: str = ""  # Kueue LocalQueue, "" if none


class Backend(abc.ABC):
    name: str = "base"
    log_options_note: str | None = "keeps no previous logs or timestamps"  # None: LogOptions are honoured

    def check_log_options(self, options: LogOptions | None) -> None:
        """SpecError naming the flag when `options` ask for what this backend cannot do."""
        if not (options and self.log_options_note):
            return
        asked = (("--previous", options.previous),
                 ("--since", options.since_seconds), ("--timestamps", options.timestamps))
        flag = next((flag for flag, refused in asked if refused), None)
        if flag:
            from ..spec import SpecError

            raise SpecError(flag, f"the {self.name} backend {self.log_options_note}; drop the flag")

    def default_job_dir(self, name: str, namespace: str) -> str | None:
        """Where outputs go when the user gave no --job-dir (None: the trainer's default)."""
        return None

    def manifest(self, name: str, namespace: str) -> dict:
        """The TFJob as the backend holds it; NotFound if there is no such job."""
        raise BackendError(f"the {self.name} backend cannot show the manifest of {name}")

    def installed_crd(self, crd_name: str) -> dict | None:
        """The CRD object (e.g. tfjobs.kubeflow.org) installed where jobs run; None when
        there is no such place (local); CRDUnavailable when it cannot be read."""
        return None

    @abc.abstractmethod
    def dry_run(self, tfjob: dict, network_policy: dict | None = None) -> list[dict]:
        """Return the objects `submit` would send (server-side validated where possible): the
        TFJob, then its `network_policy` on backends that apply one (k8s)."""

    @abc.abstractmethod
    def submit(self, tfjob: dict, replace: bool = False, network_policy: dict | None = None) -> None:
        """Create the job; AlreadyExists if the name is taken and not `replace`.
        `network_policy`: the job's NetworkPolicy, for backends that apply one (k8s)."""

    @abc.abstractmethod
    def status(self, name: str, namespace: str) -> JobStatus:
        """Current conditions and replicas; NotFound if there is no such job."""

    @abc.abstractmethod
    def events(self, name: str, namespace: str, stop: threading.Event | None = None) -> Iterator[Event]:
        """Yield JobCondition / ReplicaPhase transitions (each once) until a terminal condition.
        Once `stop` is set (from another thread) the stream ends within about a second and
        lets go of what it holds (watch connections), without a terminal condition."""

    @abc.abstractmethod
    def logs(self, name: str, namespace: str, replica: str | None = None,
             follow: bool = False, options: LogOptions | None = None,
             ends: bool = False) -> Iterator[LogLine | LogEnded]:
        """Lines of one replica ("worker-1") or of all (None); `follow` waits for Pending
        replicas and follows across restarts until the job is terminal. `options` (kubectl's
        --previous, --since, --timestamps) only where the backend can honour them. `ends`
        (with `follow`): also a LogEnded after the last line of each container instance
        that ended."""

    @abc.abstractmethod
    def delete(self, name: str, namespace: str, wait: bool = False) -> None:
        """Delete the job (and its replicas); NotFound if absent; `wait` until gone."""

    @abc.abstractmethod
    def list(self, namespace: str | None) -> list[JobSummary]:
        """Jobs in `namespace` (all namespaces if None)."""
