"""How a job ends: the chief's done marker, and the orphan rule.

training-operator judges a TFJob by its chief, but ps tasks (and workers of
parameter-server training) serve forever once started. So:

1. When the chief has trained, saved the last checkpoint and exported, it writes
   `JOB_DIR/done.json` with a fresh run id (local path or gs:// alike).
2. ps, worker and evaluator tasks remember the marker's content when they start and poll it
   every --poll-seconds; when it changes (a chief finished *after* they started) they exit 0.
   A marker left by an earlier run of the same job dir does not count.
3. If the chief's address refuses connections for --orphan-seconds in a row (the chief is
   gone for good, or never came), they exit: 0 if a done marker exists, else 1.

4. On SIGTERM (the job deleted: every pod gets it at once; the local backend's stop) or
   SIGINT (Ctrl-C on a server run by hand) a ps or worker keeps serving until the chief's
   address refuses connections, at most LINGER_S, and then exits 128 + the signal: the
   chief, stopped by the same deletion, saves its checkpoint within a second
   (session.StopRequest), and that save reads the variables on the ps. Before, the ps left
   at once and took the progress since the last checkpoint along.

A poll that storage answers with a transient error (after TensorFlow's own retries:
unavailable, deadline, aborted, internal, resource exhausted) is retried at the next poll,
up to STORAGE_RETRIES polls in a row; only then does the error end the task (exit 128 by
failures.py). A ps restarted for nothing loses every variable since the last checkpoint.
"""
from __future__ import annotations

import json
import signal
import socket
import sys
import time
import uuid
from dataclasses import dataclass

# TensorFlow's own modules, not its `tf.` API: a ps or worker loads only what it uses
# (task.serve); tf.io.gfile and tf.errors are these.
from tensorflow.python.framework import errors
from tensorflow.python.lib.io import file_io
from tensorflow.python.platform import gfile

from trainer import paths

DONE, ORPHANED_AFTER_DONE, ORPHANED, STOPPED = "done", "orphaned-after-done", "orphaned", "stopped"
EXIT_CODES = {DONE: 0, ORPHANED_AFTER_DONE: 0, ORPHANED: 1}  # STOPPED: 128 + the signal
LINGER_S = 20.0  # a stopped server's longest wait for the chief to leave (Kubernetes grants 30 s)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)  # rule 4; the chief saves on these too (session.StopRequest)
SLICE_S = 0.2  # how soon a wait notices a stop
STORAGE_RETRIES = 10
TRANSIENT = (errors.UnavailableError, errors.DeadlineExceededError, errors.AbortedError,
             errors.InternalError, errors.ResourceExhaustedError, errors.UnknownError)


def write_done(job_dir: str, step: int, export_path: str | None) -> str:
    """Write the done marker; returns its content."""
    content = json.dumps({"run": uuid.uuid4().hex, "step": step, "export": export_path,
                          "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    file_io.recursive_create_dir_v2(job_dir)  # tf.io.gfile.makedirs
    with gfile.GFile(paths.done_marker(job_dir), "w") as handle:
        handle.write(content)
    return content


def read_done(job_dir: str) -> str | None:
    path = paths.done_marker(job_dir)
    try:
        with gfile.GFile(path) as handle:
            return handle.read()
    except errors.NotFoundError:
        return None


def probe(address: str, timeout: float = 2.0) -> bool | None:
    """A TCP connection to host:port: True when something accepts it, False when the host
    refuses it (nothing listens there), None when it cannot tell (a name that does not
    resolve, no answer, no route)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except ConnectionRefusedError:
        return False
    except OSError:
        return None


def reachable(address: str | None, timeout: float = 2.0) -> bool:
    """Whether something accepts TCP connections at host:port (None: no chief to watch)."""
    return address is None or probe(address, timeout) is True


@dataclass
class Watch:
    """Polls for the end of the job on behalf of a ps, worker or evaluator task."""

    job_dir: str
    chief: str | None
    poll_seconds: float = 5.0
    orphan_seconds: float = 900.0

    storage_retries: int = STORAGE_RETRIES

    def __post_init__(self) -> None:
        self.failures = 0  # polls in a row that storage failed
        self.baseline = self._read(retry_until_read=True)
        self.last_seen = time.monotonic()

    def _read(self, retry_until_read: bool = False) -> str | None:
        """The marker; on a transient storage error, None (unknown) until storage_retries
        polls in a row have failed, then the error. `retry_until_read`: keep polling here
        (bounded the same way) for a value, e.g. the baseline that later polls compare to."""
        while True:
            try:
                marker = read_done(self.job_dir)
            except TRANSIENT as error:
                self.failures += 1
                if self.failures > self.storage_retries:
                    raise
                print(f"Could not read {paths.done_marker(self.job_dir)} ({type(error).__name__}); retrying "
                      f"in {self.poll_seconds:g} s ({self.failures} of {self.storage_retries})", file=sys.stderr)
                if not retry_until_read:
                    return None
                time.sleep(self.poll_seconds)
                continue
            self.failures = 0
            return marker

    def done(self) -> bool:
        """Whether the chief has marked this run of the job done (one read, no retry; a
        storage error: not known, False)."""
        try:
            marker = read_done(self.job_dir)
        except TRANSIENT:
            return False
        return marker is not None and marker != self.baseline

    def check(self) -> str | None:
        """DONE, ORPHANED(_AFTER_DONE) or None (keep going). Never blocks beyond a probe."""
        marker = self._read()
        if marker is not None and marker != self.baseline:
            return DONE
        if reachable(self.chief):
            self.last_seen = time.monotonic()
        elif time.monotonic() - self.last_seen >= self.orphan_seconds:
            return ORPHANED_AFTER_DONE if marker is not None else ORPHANED
        return None

    def wait(self, stopping=lambda: False) -> str:
        """Block until check() says the job has ended, or `stopping()` (a signal): STOPPED."""
        while (outcome := self.check()) is None:
            until = time.monotonic() + self.poll_seconds
            while time.monotonic() < until:
                if stopping():
                    return STOPPED
                time.sleep(min(SLICE_S, max(0.0, until - time.monotonic())))
        return outcome

    def linger(self, bound: float = LINGER_S) -> bool:
        """After a stop: wait, serving on, until the chief's address refuses connections or
        `bound` seconds pass; True when the chief left."""
        deadline = time.monotonic() + bound
        while not left(self.chief, timeout=min(2.0, bound)):
            if time.monotonic() >= deadline:
                return False
            time.sleep(SLICE_S)
        return True


def left(address: str | None, timeout: float = 2.0) -> bool:
    """Whether the chief's process has gone: its host refuses connections at its port (None:
    no chief to wait for). A name that does not resolve, or no answer, says nothing: a
    terminating pod leaves its Service's DNS records before its process ends, and the
    chief, saving, still reaches the ps over the connections it has."""
    return address is None or probe(address, timeout) is False


def message(outcome: str, watch: Watch) -> str:
    if outcome == DONE:
        return f"Chief marked the job done in {paths.done_marker(watch.job_dir)}; exiting"
    return (f"Chief {watch.chief} unreachable for {watch.orphan_seconds:g} s "
            f"({'job was marked done' if outcome == ORPHANED_AFTER_DONE else 'job not marked done'}); exiting")
