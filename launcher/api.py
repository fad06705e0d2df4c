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
    status = client.wait_for_job_conditions("mnist-ps", wait_timeout=600)
    print(status.phase)                                  # Succeeded (RuntimeError if Failed)

Errors are the CLI's: `SpecError` (bad input, trainer arguments the trainer would refuse
included: nothing was submitted), `BackendError`
(and its `NotFound`, `AlreadyExists`); `TimeoutError` from the waits, and from
`wait_for_job_conditions`, as in the Kubeflow SDK, `RuntimeError` for a job that Failed
when Failed was not expected. A wait's bad arguments (a condition a TFJob does not have)
are a `SpecError` too, which is the `ValueError` the Kubeflow SDK raises. The SDK's parameters
are taken by the same names: `job_kind` ("TFJob" or None); those that mean nothing here
(`polling_interval`, `timeout`, `is_master`, `delete_options`, ...) are a `SpecError` naming
what to give instead.
"""
from __future__ import annotations

import dataclasses
import queue
import threading
import time
import warnings
from typing import Callable, Iterable, Iterator

from .backends import get_backend
from .backends.base import Backend, BackendError, CRDUnavailable, JobStatus, JobSummary, LogOptions
from .cli import check_name, check_replica, replica_alias
from .events import Event, JobCondition, LogLine, TERMINAL
from .spec import JobSpec, SpecError, check_bool, check_namespace, check_text, check_trainer_args, cluster_data_note

__all__ = ["TrainingClient", "JOB_CONDITIONS"]

# The TFJob conditions training-operator v1.9 sets (kubeflow.org/v1 JobConditionType)
JOB_CONDITIONS = frozenset({"Created", "Running", "Restarting", "Succeeded", "Suspended", "Failed"})


class TrainingClient:
    """One backend, chosen as the CLI chooses it (`auto`: the kubeconfig's cluster if any)."""

    def __init__(self, backend: str | Backend = "auto", kubeconfig: str | None = None,
                 context: str | None = None, request_timeout: float | None = None,
                 note: Callable[[str], None] | None = None, *, config_file: str | None = None,
                 client_configuration=None, namespace: str | None = None, job_kind: str | None = None):
        """`note`: where the client says what the CLI says in `note:` and `warning:` lines:
        that `auto` chose this machine, what the local backend ignores of a job (naming
        JobSpec's fields), replicas not isolated on this machine, logs a cluster no longer
        has; default: a UserWarning each (`warnings`). The Kubeflow SDK's `job_kind` is
        "TFJob" or None; its `config_file`, `client_configuration` and `namespace` are refused,
        each naming what to give instead."""
        _kubeflow_sdk(job_kind, config_file=config_file, client_configuration=client_configuration,
                      namespace=namespace)
        if note is not None and not callable(note):
            raise SpecError("note", f"{note!r} is not callable; give a function of one str, e.g. print, or None")
        self.note = note or _warn
        if isinstance(backend, Backend):
            self.backend = backend
        else:
            self.backend = get_backend(backend, note=self.note, kubeconfig=kubeconfig, context=context,
                                       request_timeout=request_timeout)

    # ---- create --------------------------------------------------------------------------
    def render(self, spec: JobSpec) -> dict:
        """The TFJob `create_job` would submit, validated like the CLI validates it ($TFJOB_CRD,
        the cluster's installed CRD, or the packaged one: also when the cluster cannot be
        reached, so that rendering works offline as the CLI's `render` does)."""
        from . import schemas
        from .render import render
        from .validate import validate

        spec = self._with_default_job_dir(spec)
        check_trainer_args(spec, self.backend.name)
        crd = None
        if not schemas.configured_path("tfjob"):
            try:
                crd = self.backend.installed_crd(schemas.get("tfjob").crd_name)
            except (CRDUnavailable, BackendError):  # not permitted, or no cluster to ask: the packaged one
                crd = None
        tfjob = render(spec)
        validate(tfjob, crd=crd)
        return tfjob

    def create_job(self, spec: JobSpec | None = None, replace: bool = False, **kubeflow_sdk: object) -> dict:
        """Render, validate and submit; returns the TFJob sent. On a cluster, with the job's
        NetworkPolicy (unless `spec.network_policy` is False). What the CLI's submit refuses
        is a SpecError first: a --package-path the replicas cannot have, and on the local
        backend a volume, a secret without a value, or what every replica would fail on at
        its start (no TensorFlow, a data dir without records, a module this Python cannot
        find). The Kubeflow SDK's parameters (job, name, base_image, train_func, num_workers, ...)
        are refused in one SpecError: a JobSpec holds them (name, image, replicas, ...)."""
        from .checks import check_submission, local_notes, sharing_note
        from .render import render_network_policy

        if kubeflow_sdk:
            field_name = next(iter(kubeflow_sdk))
            raise SpecError(field_name, "the Kubeflow SDK's create_job parameter is not taken here; give a "
                                        "launcher.spec.JobSpec as spec (name, namespace, image, replicas, env, ...)")
        if not isinstance(spec, JobSpec):
            raise SpecError("spec", f"{type(spec).__name__} is not a JobSpec; give launcher.spec.JobSpec(name=..., "
                                    "replicas=...) (a TFJob object or dict is not taken)")
        check_bool(replace, "replace")
        tfjob = self.render(spec)
        check_submission(spec, self.backend.name)  # as the CLI's submit: claims on this machine, the package, ...
        policy = render_network_policy(spec) if self.backend.name == "k8s" else None  # as the CLI's submit
        if self.backend.name == "local":
            for line in local_notes(spec, bool(spec.node_selector or spec.role_node_selectors), SPEC_FIELDS):
                self.note(line)
            if line := sharing_note(spec, self.backend):
                self.note(line)
        elif line := cluster_data_note(spec, self.backend.name, "volume (JobSpec.volumes)"):
            self.note(line)
        self.backend.submit(tfjob, replace=replace, network_policy=policy)
        return tfjob

    def _with_default_job_dir(self, spec: JobSpec) -> JobSpec:
        from trainer.flags import job_dir_given

        if spec.job_dir is not None or job_dir_given(spec.trainer_args):  # the trainer's own --job-dir, ...
            return spec
        job_dir = self.backend.default_job_dir(spec.name, spec.namespace)
        return dataclasses.replace(spec, job_dir=job_dir) if job_dir else spec

    # ---- read ----------------------------------------------------------------------------
    # A job's name, namespace and replica are checked as the CLI checks NAME, -n and --replica:
    # a SpecError before the backend is asked.
    # The Kubeflow SDK's job_kind is "TFJob" or None; its other parameters are refused (_kubeflow_sdk).
    def get_job(self, name: str, namespace: str = "default", job_kind: str | None = None,
                timeout: float | None = None) -> JobStatus:
        _kubeflow_sdk(job_kind, timeout=timeout)
        _check_job(name, namespace)
        return self.backend.status(name, namespace)

    def list_jobs(self, namespace: str | None = "default", job_kind: str | None = None,
                  timeout: float | None = None) -> list[JobSummary]:
        """Jobs in `namespace` (None: every namespace)."""
        _kubeflow_sdk(job_kind, timeout=timeout)
        if namespace is not None:
            check_namespace(namespace, "namespace")
        return self.backend.list(namespace)

    def events(self, name: str, namespace: str = "default") -> Iterator[Event]:
        """JobCondition and ReplicaPhase transitions, each once, until the job is terminal."""
        _check_job(name, namespace)
        return self.backend.events(name, namespace)

    def get_job_logs(self, name: str, namespace: str = "default", replica: str | None = None,
                     follow: bool = False, tail: int | None = None, *, job_kind: str | None = None,
                     is_master: bool | None = None, replica_type: str | None = None,
                     replica_index: int | None = None, timeout: float | None = None,
                     verbose: bool | None = None) -> Iterator[LogLine]:
        """Log lines of one replica ("chief-0", gcloud's "master-replica-0" or "master-0",
        "worker-1") or of all (None or "all"); `follow` waits for Pending replicas and follows
        across restarts until the job ends. `tail`: only the last N lines of each replica's log
        (with `follow`: of what is there, then every new line), as `launcher logs --tail N`.
        Unlike the Kubeflow SDK's, it yields LogLines rather than returning ({pod: log}, events),
        and every replica's by default; the SDK's is_master, replica_type, replica_index and
        verbose are refused, naming `replica=` (or `events`)."""
        _kubeflow_sdk(job_kind, is_master=is_master, replica_type=replica_type, replica_index=replica_index,
                      timeout=timeout, verbose=verbose)
        _check_job(name, namespace)
        replica = _replica(replica)
        check_bool(follow, "follow")
        if tail is not None and (isinstance(tail, bool) or not isinstance(tail, int) or tail < 0):
            raise SpecError("tail", f"{tail!r} is not a line count; give an int >= 0, or None for every line")
        options = LogOptions(tail_lines=tail) if tail is not None else None
        return self.backend.logs(name, namespace, replica, follow=follow, options=options)

    def wait_for_job(self, name: str, namespace: str = "default", timeout: float | None = None,
                     conditions: tuple[str, ...] = TERMINAL) -> JobStatus:
        """Block until the job has one of `conditions` (default: Succeeded or Failed); returns
        its status then. TimeoutError after `timeout` seconds (the job keeps running);
        SpecError (a ValueError) for a condition not in JOB_CONDITIONS or a timeout that is no
        seconds."""
        return self._wait(name, namespace, _seconds(timeout, "timeout"), _conditions(conditions, "conditions"))

    def wait_for_job_conditions(self, name: str, namespace: str = "default", job_kind: str | None = None,
                                expected_conditions: Iterable[str] = frozenset({"Succeeded"}),
                                wait_timeout: float | None = 600, polling_interval: float | None = None,
                                callback: Callable[[JobStatus], None] | None = None,
                                timeout: float | None = None) -> JobStatus:
        """The Kubeflow SDK's wait: block until the job has one of `expected_conditions`
        (default: Succeeded) and return its status then. RuntimeError when it Failed and Failed
        was not expected; TimeoutError after `wait_timeout` seconds (None: no limit; the job
        keeps running); SpecError (a ValueError, which the SDK raises) for a condition not in
        JOB_CONDITIONS. `callback` gets the job's status first and after each condition
        transition (the SDK calls it per poll; the launcher watches instead of polling, so
        `polling_interval` is refused, as the SDK's request `timeout` is). A job that Failed is
        a RuntimeError also when another expected condition (Created) is True, as in the SDK."""
        _kubeflow_sdk(job_kind, polling_interval=polling_interval, timeout=timeout)
        expected = _conditions(expected_conditions, "expected_conditions")
        if callback is not None and not callable(callback):
            raise SpecError("callback", f"{callback!r} is not callable; give a function of the job's status")
        stop = expected if "Failed" in expected else (*expected, "Failed")
        status = self._wait(name, namespace, _seconds(wait_timeout, "wait_timeout"), stop, callback)
        if "Failed" not in expected and _reached(status, ("Failed",)):  # first, as the SDK: Created stays True
            failed = next(c for c in status.conditions if c.type == "Failed" and c.status == "True")
            detail = ": ".join(part for part in (failed.reason, failed.message) if part)
            raise RuntimeError(f"tfjob {name} in {namespace} Failed" + (f" ({detail})" if detail else "")
                               + f" before {' or '.join(expected)}")
        return status

    def _wait(self, name: str, namespace: str, timeout: float | None, conditions: tuple[str, ...],
              callback: Callable[[JobStatus], None] | None = None) -> JobStatus:
        """The job's status once it has one of `conditions`, from the first look or from its
        event stream (read by a thread, so the wait is bounded by `timeout`)."""
        status = self.get_job(name, namespace)
        if callback is not None:
            callback(status)
        if _reached(status, conditions):
            return status
        seen: queue.Queue = queue.Queue()
        stop = threading.Event()  # set when the wait ends, however: the stream lets go of its watches
        stream = self.backend.events(name, namespace, stop=stop)

        def pump() -> None:
            try:
                for event in stream:
                    if isinstance(event, JobCondition):
                        reached = event.status == "True" and event.type in conditions
                        seen.put(("reached" if reached else "changed", event))
                        if reached:
                            return
                seen.put(("ended", None))
            except BaseException as exc:  # handed to the caller
                seen.put(("error", exc))

        threading.Thread(target=pump, name=f"wait-{name}", daemon=True).start()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                try:
                    kind, item = seen.get(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise TimeoutError(f"tfjob {name} in {namespace} has none of {', '.join(conditions)} "
                                       f"after {timeout} s; it keeps running") from None
                if kind == "error":
                    raise item
                if kind == "changed" and callback is None:
                    continue
                status = self.get_job(name, namespace)
                if callback is not None:
                    callback(status)
                if kind != "changed":
                    return status
        finally:  # a timeout, the callback's exception, Ctrl-C, or done: the pump thread ends too
            stop.set()

    # ---- delete --------------------------------------------------------------------------
    def delete_job(self, name: str, namespace: str = "default", job_kind: str | None = None,
                   delete_options=None, wait: bool = False):
        """Delete the job and its replicas (the local backend keeps the outputs; see the CLI).
        `job_kind` and `delete_options` are the Kubeflow SDK's, in its order: "TFJob" or None,
        and None (refused otherwise)."""
        _kubeflow_sdk(job_kind, delete_options=delete_options)
        _check_job(name, namespace)
        check_bool(wait, "wait")
        return self.backend.delete(name, namespace, wait=wait)

    def close(self) -> None:
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> "TrainingClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# local_notes names JobSpec's fields, as a Python caller sets them
SPEC_FIELDS = {"queue_name": "queue_name", "priority_class": "priority_class", "gang": "gang",
               "success_policy": "success_policy", "istio_sidecar": "istio_sidecar",
               "service_account": "service_account", "node_selector": "node_selector/role_node_selectors",
               "image": "image", "ttl_seconds_after_finished": "run_policy.ttl_seconds_after_finished"}


def _warn(line: str) -> None:
    warnings.warn(line.removeprefix("note: ").removeprefix("warning: "), UserWarning, stacklevel=3)


# The Kubeflow SDK's parameters that mean nothing here, each with what to give instead
_SDK_INSTEAD = {
    "config_file": "give kubeconfig=PATH",
    "client_configuration": "give kubeconfig=PATH and context=NAME",
    "namespace": "give namespace= to each call (default: 'default')",
    "timeout": "give TrainingClient(request_timeout=SECONDS) to bound each request",
    "polling_interval": "the launcher watches the job instead of polling it; leave polling_interval out",
    "is_master": "give replica='chief-0' for the chief's log, or replica=None for every replica",
    "replica_type": "give replica='worker-0' (type and index in one name), or replica=None for every replica",
    "replica_index": "give replica='worker-0' (type and index in one name), or replica=None for every replica",
    "verbose": "the job's events are client.events(name); leave verbose out",
    "delete_options": "the launcher deletes as `launcher delete` does (wait=True: until the replicas are gone); "
                      "leave delete_options out",
}


def _kubeflow_sdk(job_kind: object = None, **given: object) -> None:
    """The Kubeflow SDK's parameters: job_kind "TFJob" (the only kind here) or None, the others
    None (each refused naming its alternative), rather than a TypeError or ignored."""
    if job_kind is not None and job_kind != "TFJob":
        hint = ("" if isinstance(job_kind, str) else
                "; job_kind is the third parameter, as in the Kubeflow SDK: give expected_conditions= by name")
        raise SpecError("job_kind", f"{job_kind!r} is not served here, which runs TFJobs only; give 'TFJob' or "
                                    f"leave job_kind out{hint}")
    for field_name, value in given.items():
        if value is not None:
            raise SpecError(field_name, f"{value!r} is the Kubeflow SDK's and not taken here; "
                                        f"{_SDK_INSTEAD[field_name]}")


def _check_job(name: str, namespace: str) -> None:
    """The CLI's checks of NAME and -n/--namespace, naming the arguments."""
    check_text(name, "name", "mnist-ps")
    check_name(name, "name")
    check_namespace(namespace, "namespace")


def _replica(replica: str | None) -> str | None:
    """The CLI's --replica: gcloud's names (master-replica-N, worker-replica-N, master-N) as chief-N,
    worker-N, checked (replica_alias); "all" (and None): every replica."""
    check_text(replica, "replica", "chief-0", optional=True)
    replica = replica_alias(replica)
    check_replica(replica, "replica")
    return None if replica == "all" else replica


def _reached(status: JobStatus, conditions: tuple[str, ...]) -> bool:
    return any(c.type in conditions and c.status == "True" for c in status.conditions)


def _conditions(given: Iterable[str], field_name: str) -> tuple[str, ...]:
    """The condition names a wait stops at, checked: a bare string is one name, not letters."""
    if isinstance(given, str):
        raise SpecError(field_name, f"{given!r} is a string; give a set of condition names, e.g. {{{given!r}}}")
    listed = list(given) if isinstance(given, Iterable) else None  # once: a generator is read once
    if listed is None or not all(isinstance(name, str) for name in listed):
        raise SpecError(field_name, f"{given!r} is not a set of condition names; give e.g. {{'Succeeded'}}")
    names = tuple(sorted(set(listed)))
    unknown = set(names) - JOB_CONDITIONS
    if not names or unknown:
        raise SpecError(field_name, f"{sorted(unknown) or 'none given'}; use some of "
                                    f"{', '.join(sorted(JOB_CONDITIONS))}")
    return names


def _seconds(timeout: float | None, field_name: str) -> float | None:
    """A wait's bound: seconds >= 0, or None for none."""
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0):
        raise SpecError(field_name, f"{timeout!r} is not a number of seconds; give seconds >= 0, or None to wait "
                                    "without a bound")
    return timeout
