"""The launcher from Python: what the CLI does, for notebooks and pipelines.

Shaped like the Kubeflow SDK's `TrainingClient` (create_job, wait_for_job_conditions,
get_job_logs), on the launcher's own JobSpec, backends and typed events:

    from launcher.api import TrainingClient
    from launcher.spec import JobSpec, ReplicaSpec

    client = TrainingClient(backend="local")            # or "k8s" (kubeconfig, context)
    spec = JobSpec(name="mnist-ps", replicas={"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1),
                                              "Worker": ReplicaSpec(2)},
                   trainer_args=("--train-steps", "300"))
    client.create_job(spec)                              # render, validate, submit
    for line in client.get_job_logs("mnist-ps", follow=True):
        print(line.replica, line.line)
    status = client.wait_for_job("mnist-ps", timeout=600)
    print(status.phase)                                  # Succeeded / Failed

Errors are the CLI's: `SpecError` (bad input: nothing was submitted), `BackendError`
(and its `NotFound`, `AlreadyExists`), `TimeoutError` from `wait_for_job`.
"""
from __future__ import annotations

import dataclasses
import queue
import threading
import time
from typing import Iterator

from .backends import get_backend
from .backends.base import Backend, CRDUnavailable, JobStatus, JobSummary, LogOptions
from .events import Event, JobCondition, LogLine, TERMINAL
from .spec import JobSpec

__all__ = ["TrainingClient"]


class TrainingClient:
    """One backend, chosen as the CLI chooses it (`auto`: the kubeconfig's cluster if any)."""

    def __init__(self, backend: str | Backend = "auto", kubeconfig: str | None = None,
                 context: str | None = None, request_timeout: float | None = None):
        if isinstance(backend, Backend):
            self.backend = backend
        else:
            self.backend = get_backend(backend, note=lambda line: None, kubeconfig=kubeconfig, context=context,
                                       request_timeout=request_timeout)

    # ---- create --------------------------------------------------------------------------
    def render(self, spec: JobSpec) -> dict:
        """The TFJob `create_job` would submit, validated like the CLI validates it ($TFJOB_CRD,
        the cluster's installed CRD, or the packaged one)."""
        from . import schemas
        from .render import render
        from .validate import validate

        spec = self._with_default_job_dir(spec)
        crd = None
        if not schemas.configured_path("tfjob"):
            try:
                crd = self.backend.installed_crd(schemas.get("tfjob").crd_name)
            except CRDUnavailable:
                crd = None
        tfjob = render(spec)
        validate(tfjob, crd=crd)
        return tfjob

    def create_job(self, spec: JobSpec, replace: bool = False) -> dict:
        """Render, validate and submit; returns the TFJob sent."""
        tfjob = self.render(spec)
        self.backend.submit(tfjob, replace=replace)
        return tfjob

    def _with_default_job_dir(self, spec: JobSpec) -> JobSpec:
        if spec.job_dir is not None:
            return spec
        job_dir = self.backend.default_job_dir(spec.name, spec.namespace)
        return dataclasses.replace(spec, job_dir=job_dir) if job_dir else spec

    # ---- read ----------------------------------------------------------------------------
    def get_job(self, name: str, namespace: str = "default") -> JobStatus:
        return self.backend.status(name, namespace)

    def list_jobs(self, namespace: str | None = "default") -> list[JobSummary]:
        """Jobs in `namespace` (None: every namespace)."""
        return self.backend.list(namespace)

    def events(self, name: str, namespace: str = "default") -> Iterator[Event]:
        """JobCondition and ReplicaPhase transitions, each once, until the job is terminal."""
        return self.backend.events(name, namespace)

    def get_job_logs(self, name: str, namespace: str = "default", replica: str | None = None,
                     follow: bool = False, tail: int | None = None) -> Iterator[LogLine]:
        """Log lines of one replica ("chief-0", "worker-1") or of all (None); `follow` waits for
        Pending replicas and follows across restarts until the job ends. `tail`: only the last
        N lines of each replica's log (with `follow`: of what is there, then every new line),
        as `launcher logs --tail N`."""
        if tail is not None and (isinstance(tail, bool) or not isinstance(tail, int) or tail < 0):
            raise ValueError(f"tail: {tail!r} is not a line count; give an int >= 0, or None for every line")
        options = LogOptions(tail_lines=tail) if tail is not None else None
        return self.backend.logs(name, namespace, replica, follow=follow, options=options)

    def wait_for_job(self, name: str, namespace: str = "default", timeout: float | None = None,
                     conditions: tuple[str, ...] = TERMINAL) -> JobStatus:
        """Block until the job has one of `conditions` (default: Succeeded or Failed); returns
        its status then. TimeoutError after `timeout` seconds (the job keeps running)."""
        status = self.get_job(name, namespace)
        if _reached(status, conditions):
            return status
        seen: queue.Queue = queue.Queue()
        stream = self.events(name, namespace)

        def pump() -> None:
            try:
                for event in stream:
                    if isinstance(event, JobCondition) and event.status == "True" and event.type in conditions:
                        seen.put(event)
                        return
                seen.put(None)
            except BaseException as exc:  # handed to the caller
                seen.put(exc)

        threading.Thread(target=pump, name=f"wait-{name}", daemon=True).start()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            item = seen.get(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        except queue.Empty:  # the pump thread (a daemon) ends with the job's event stream
            raise TimeoutError(f"tfjob {name} in {namespace} has none of {', '.join(conditions)} "
                               f"after {timeout} s; it keeps running") from None
        if isinstance(item, BaseException):
            raise item
        return self.get_job(name, namespace)

    # ---- delete --------------------------------------------------------------------------
    def delete_job(self, name: str, namespace: str = "default", wait: bool = False):
        """Delete the job and its replicas (the local backend keeps the outputs; see the CLI)."""
        return self.backend.delete(name, namespace, wait=wait)

    def close(self) -> None:
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> "TrainingClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _reached(status: JobStatus, conditions: tuple[str, ...]) -> bool:
    return any(c.type in conditions and c.status == "True" for c in status.conditions)
