"""The Kubernetes backend: TFJobs on a cluster running Kubeflow training-operator v1.9.

Built on the official `kubernetes` client (see `client.py`): kubeconfig (with exec
plugins such as gke-gcloud-auth-plugin) or in-cluster config. `events` and `logs -f` use
one TFJob watch and one pod label-selector watch (`watch.py`), never a request per pod;
`status` and `events` read pods as the server's Table rows (`table.py`), so what they
receive per pod does not grow with the job (TF_CONFIG makes every pod object O(replicas)).
`requests` counts every API request this backend made, `api.received` the bytes.

`submit(network_policy=...)` creates the job's NetworkPolicy right after the TFJob, owned
by it (ownerReference), so it goes when the job goes; if the server refuses the policy,
the TFJob is deleted again and nothing stays applied.

Strings the server holds reach the user as text: its error lines (`client.one_line`), the
events' fields (`launcher.events`), the notes and the listed replica types here.

`submit(replace=True)` deletes the old TFJob in the foreground (its pods go first),
waits until it is gone, then creates the new one: the operator does not roll existing
pods to a new template, so an in-place update would not replace the job.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Callable, Iterator

from kubernetes.client.exceptions import ApiException

from ...events import Event, LogEnded, LogLine, terminal_safe
from ...tfconfig import replica_counts
from ..base import Backend, BackendError, JobStatus, JobSummary, LogOptions, NotFound, job_phase, stderr_note
from .client import (CALL_TIMEOUT, TRANSPORT_ERRORS, CountingApiClient, KubeApi, RequestCounter, absent,
                         load_configuration, one_line, read_json, server_message, unreachable)
from .events import UNCLAIMED_SECONDS, ReplicaTracker, job_events, pod_fetcher, unclaimed_note
from .logs import (DRAIN_SECONDS, check_ended, check_replica, clean_pod_policy, ended_without_pods, follow_logs,
                   read_logs)
from .objects import (created, job_conditions, owner_reference, parse_replica, pod_selector, queue_of, replica_order,
                      suspended)
from .table import replica_gpus, restarting_always

DELETE_TIMEOUT = 300.0  # seconds `delete(wait=True)` waits for the TFJob to disappear
DELETE_POLL = 0.5
PROPAGATION = "Foreground"  # the TFJob disappears only after its pods and services


class KubernetesBackend(Backend):
    name = "k8s"
    log_options_note = None  # the kubelet honours previous, sinceSeconds and timestamps

    def __init__(self, kubeconfig: str | None = None, context: str | None = None,
                 request_timeout: float = CALL_TIMEOUT, note: Callable[[str], None] = stderr_note):
        self.note = lambda line: note(terminal_safe(line))  # notes name what the server holds
        self.requests = RequestCounter()
        self.api = KubeApi(CountingApiClient(load_configuration(kubeconfig, context), self.requests),
                           request_timeout=request_timeout)
        self.log_drain_seconds = DRAIN_SECONDS
        self.delete_timeout = DELETE_TIMEOUT
        self.unclaimed_seconds = UNCLAIMED_SECONDS  # see job_events

    def close(self) -> None:
        self.api.close()

    def manifest(self, name: str, namespace: str) -> dict:
        return self.api.get_tfjob(name, namespace)

    def installed_crd(self, crd_name: str) -> dict | None:
        return self.api.get_crd(crd_name)

    # ---- create -------------------------------------------------------------------
    def dry_run(self, tfjob: dict, network_policy: dict | None = None) -> list[dict]:
        """Server-side dry run (dryRun=All) of the TFJob and of its NetworkPolicy, as `submit`
        would send them: the objects as the server would store them."""
        job = self._create(tfjob, dry_run=True)
        if network_policy is None:
            return [job]
        try:
            return [job, self._apply_network_policy(job, network_policy, dry_run=True)]
        except _PolicyRefused as exc:
            raise BackendError(one_line(f"the server refused networkpolicy {exc.name} ({exc.problem}); submit with "
                                        "--no-network-policy to run without one")) from None

    def submit(self, tfjob: dict, replace: bool = False, network_policy: dict | None = None) -> None:
        if replace:
            try:
                self.delete(tfjob["metadata"]["name"], _namespace(tfjob), wait=True)
            except NotFound:
                pass
        job = self._create(tfjob, dry_run=False)
        if network_policy is None:
            return
        try:
            self._apply_network_policy(job, network_policy, dry_run=False)
        except _PolicyRefused as exc:
            try:
                self.delete(job["metadata"]["name"], _namespace(job))
            except BackendError:
                pass
            raise BackendError(one_line(
                f"the server refused networkpolicy {exc.name} ({exc.problem}); tfjob {job['metadata']['name']} was "
                "deleted again (nothing applied); submit with --no-network-policy to run without one")) from None

    def _apply_network_policy(self, job: dict, policy: dict, dry_run: bool) -> dict:
        """Create the job's NetworkPolicy, owned by the job (replacing one a replaced job left);
        the server's object, or _PolicyRefused."""
        owner = {**owner_reference(job), "blockOwnerDeletion": True}  # a foreground delete waits for it
        policy = {**policy, "metadata": {**policy["metadata"], "ownerReferences": [owner]}}
        try:
            try:
                return read_json(self.api.create_network_policy(policy, dry_run=dry_run))
            except ApiException as exc:
                if exc.status != 409:  # 409: left by a replaced job the garbage collector has not reached
                    raise
                return read_json(self.api.replace_network_policy(policy, dry_run=dry_run))
        except ApiException as exc:
            raise _PolicyRefused(policy["metadata"]["name"], server_message(exc)) from None
        except TRANSPORT_ERRORS as exc:
            raise _PolicyRefused(policy["metadata"]["name"], str(unreachable(self.api.host, exc))) from None

    def _create(self, tfjob: dict, dry_run: bool) -> dict:
        name, namespace = tfjob["metadata"]["name"], _namespace(tfjob)
        with self.api.errors(f"the server refused tfjob {name}",
                             exists=f"tfjob {name} already exists in {namespace}; use --replace or delete it"):
            return self.api.create_tfjob(tfjob, dry_run=dry_run)

    # ---- read ---------------------------------------------------------------------
    def status(self, name: str, namespace: str) -> JobStatus:
        tfjob = self.api.get_tfjob(name, namespace)
        tracker = ReplicaTracker(name, pod_fetcher(self.api, namespace))
        tracker.gpus, tracker.always = replica_gpus(tfjob), restarting_always(tfjob)
        with self.api.errors(f"listing pods of tfjob {name}"):
            pods = self.api.list_pod_rows(namespace, pod_selector(name))
            if any(not row.node for row in pods):  # why they wait: the scheduler's events, if RBAC allows
                tracker.unschedulable_from(self.api.scheduling_messages(namespace))
            phases = sorted(filter(None, map(tracker.phase_of, pods)), key=replica_order)
        if not job_conditions(tfjob) and (why := unclaimed_note(self.api, tfjob)):  # the operator fails on it
            self.note(why)
        return JobStatus(name=name, namespace=namespace, conditions=job_conditions(tfjob),
                         replicas=tuple(phases), created=created(tfjob), backend=self.name,
                         suspended=suspended(tfjob), queue=queue_of(tfjob),
                         deleted=tuple(ended_without_pods(tfjob, pods)), clean_pod_policy=clean_pod_policy(tfjob))

    def events(self, name: str, namespace: str, stop: threading.Event | None = None) -> Iterator[Event]:
        return job_events(self.api, name, namespace, stop, self.note, self.unclaimed_seconds)

    def logs(self, name: str, namespace: str, replica: str | None = None,
             follow: bool = False, options: LogOptions | None = None,
             ends: bool = False) -> Iterator[LogLine | LogEnded]:
        one = parse_replica(replica) if replica not in (None, "all") else None
        tfjob = self.api.get_tfjob(name, namespace)
        if one:
            check_replica(tfjob, one)
        tail = options.tail_lines if options else None
        kubelet = {k: v for k, v in dataclasses.asdict(options).items() if k != "tail_lines"} if options else {}
        api = self.api.with_log_options(**kubelet) if kubelet else self.api
        if follow:
            check_ended(api, tfjob, one, self.note)
            return follow_logs(api, name, namespace, one, self.log_drain_seconds, tail_lines=tail, ends=ends)
        return read_logs(api, tfjob, one, tail_lines=tail, note=self.note)

    def list(self, namespace: str | None) -> list[JobSummary]:
        with self.api.errors("listing tfjobs"):
            jobs = read_json(self.api.tfjobs(namespace))["items"]
        rows = [JobSummary(name=job["metadata"]["name"], namespace=job["metadata"]["namespace"],
                           phase=job_phase(job_conditions(job), suspended(job)),
                           created=created(job), queue=queue_of(job),
                           # the replica types are free map keys of whoever created the job
                           replicas={terminal_safe(t): n for t, n in replica_counts(job).items()})
                for job in jobs]
        return sorted(rows, key=lambda row: (row.namespace, row.name))

    # ---- delete -------------------------------------------------------------------
    def delete(self, name: str, namespace: str, wait: bool = False) -> None:
        with self.api.errors(f"deleting tfjob {name}", not_found=absent(name, namespace)):
            self.api.delete_tfjob(name, namespace, PROPAGATION)
        if wait:
            self._wait_gone(name, namespace)

    def _wait_gone(self, name: str, namespace: str) -> None:
        deadline = time.monotonic() + self.delete_timeout
        while time.monotonic() < deadline:
            try:
                self.api.get_tfjob(name, namespace)
            except NotFound:
                return
            time.sleep(DELETE_POLL)
        raise BackendError(f"tfjob {name} in {namespace} still exists after {self.delete_timeout:.0f} s "
                           f"(its pods may be stuck terminating); check `kubectl get pods -n {namespace} "
                           f"-l {pod_selector(name)}`")


class _PolicyRefused(Exception):
    """The server refused the job's NetworkPolicy (`problem`: its words, or why it was not reached)."""

    def __init__(self, name: str, problem: str):
        super().__init__(name, problem)
        self.name, self.problem = name, problem


def _namespace(tfjob: dict) -> str:
    return tfjob["metadata"].get("namespace") or "default"

