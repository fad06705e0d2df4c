"""Pod Table rows (kube-apiserver's pod printer columns) -> the launcher's replica rows.
The rows here are as kube-apiserver 1.36 sends them (includeObject=None)."""
from __future__ import annotations

from launcher.backends.k8s.table import (exit_code, log_instance, needs_pod, phase, replica_gpus, replica_phase,
                                        restarting_always, rows)

COLUMNS = [{"name": n} for n in ("Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node",
                                 "Readiness Gates")]


def one(status: str, restarts: str = "0", node: str = "kwok-cpu-0", ended: str = "", name: str = "j-worker-3",
        age: str = "75s"):
    row = {"cells": [name, "1/1", status, restarts, age, "10.0.0.1", node, "<none>", "<none>"], "object": None}
    if ended:
        row["conditions"] = [{"type": "Completed", "status": "True", "reason": ended}]
    found, names = rows({"kind": "Table", "columnDefinitions": COLUMNS, "rows": [row]})
    assert names[6] == "Node"
    return found[0]


def test_a_row_says_the_phase_the_printer_summarised():
    assert phase(one("Pending", node="<none>")) == "Pending"
    assert phase(one("ContainerCreating")) == "Pending"
    assert phase(one("ImagePullBackOff")) == "Pending"  # never ran yet
    assert phase(one("Running")) == "Running"
    assert phase(one("CrashLoopBackOff", restarts="2 (5s ago)")) == "Running"
    assert phase(one("Error")) == "Running"  # a container ended, the pod is not over (no condition)
    assert phase(one("Completed", ended="Succeeded")) == "Succeeded"
    assert phase(one("Error", ended="Failed")) == "Failed"
    assert phase(one("Unknown")) == "Unknown"


def test_exit_codes_a_row_shows_and_when_the_pod_must_be_read():
    assert exit_code(one("Completed", ended="Succeeded")) == 0 and not needs_pod(one("Completed", ended="Succeeded"))
    assert exit_code(one("ExitCode:3", ended="Failed")) == 3 and not needs_pod(one("ExitCode:3", ended="Failed"))
    assert exit_code(one("Error", ended="Failed")) is None and needs_pod(one("Error", ended="Failed"))
    assert needs_pod(one("OOMKilled")) and not needs_pod(one("Running"))
    assert needs_pod(one("CrashLoopBackOff", restarts="2 (5s ago)"))  # the last exit code is in the pod only


def test_a_container_that_exited_0_in_a_pod_still_running_is_shown_succeeded_unless_it_restarts():
    """Status Completed before the pod's phase caught up (or before the operator deleted the
    pod of a ps or worker that exited by itself): Succeeded with exit code 0, the same state
    as the ended pod's, so the live view prints it once. Under restartPolicy Always the
    kubelet restarts it: Running, as the pod says."""
    completed, ended = one("Completed"), one("Completed", ended="Succeeded")
    assert exit_code(completed) == 0 and not needs_pod(completed)
    shown = replica_phase(completed, "j")
    assert (shown.phase, shown.exit_code, shown.message) == ("Succeeded", 0, "Completed")
    assert shown == replica_phase(ended, "j")
    restarting = replica_phase(completed, "j", always=frozenset({"Worker"}))
    assert (restarting.phase, restarting.exit_code, restarting.message) == ("Running", 0, "Completed")
    assert replica_phase(completed, "j", always=frozenset({"PS"})).phase == "Succeeded"  # another type's policy
    job = {"spec": {"tfReplicaSpecs": {"Worker": {"restartPolicy": "Always"}, "PS": {"restartPolicy": "OnFailure"},
                                       "Chief": {}}}}
    assert restarting_always(job) == {"Worker"} and restarting_always({}) == frozenset()


def test_a_container_the_kubelet_cannot_start_is_read_for_the_kubelets_message():
    """ImagePullBackOff, ErrImagePull and the like: the row says the reason, the pod why."""
    for status in ("ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError", "InvalidImageName"):
        row = one(status)
        assert needs_pod(row), status
        assert (phase(row), exit_code(row), log_instance(row)) == ("Pending", None, None), status
        assert replica_phase(row, "j").message == status  # until the pod is read
    assert not needs_pod(one("ContainerCreating")) and not needs_pod(one("Pending", node="<none>"))


def test_a_row_says_which_container_instance_the_kubelets_log_serves():
    assert log_instance(one("Pending", node="<none>")) is None
    assert log_instance(one("ContainerCreating")) is None  # none has run yet
    assert log_instance(one("Running")) == 0
    assert log_instance(one("Error")) == 0 and log_instance(one("ExitCode:3", ended="Failed")) == 0
    # waiting to restart after the first container ended: the log is still the ended one's
    assert log_instance(one("CrashLoopBackOff", restarts="1 (5s ago)")) == 0
    assert log_instance(one("Running", restarts="1 (2s ago)")) == 1  # the restarted container
    assert log_instance(one("Completed", restarts="1 (9s ago)", ended="Succeeded")) == 1
    assert log_instance(one("Terminating", node="<none>")) is None  # deleted before it was scheduled
    assert log_instance(one("Terminating")) == 0


def test_a_row_becomes_a_replica_of_its_job_by_the_operators_pod_name():
    got = replica_phase(one("CrashLoopBackOff", restarts="2 (5s ago)"), "j", {"Worker": 2})
    assert (got.replica, got.type, got.index, got.phase, got.restarts, got.node, got.gpus, got.message) == \
        ("worker-3", "Worker", 3, "Running", 2, "kwok-cpu-0", 2, "CrashLoopBackOff")
    assert got.started.endswith("Z")  # from the Age column
    assert replica_phase(one("Running", name="other-worker-3"), "j") is None
    assert replica_phase(one("Running", name="j-sidecar-0"), "j") is None
    assert replica_phase(one("Pending", node="<none>"), "j").node == ""


def test_gpus_per_replica_come_from_the_tfjob_templates():
    job = {"spec": {"tfReplicaSpecs": {
        "Worker": {"template": {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 4}}}]}}},
        "PS": {"template": {"spec": {"containers": [{}]}}}}}}
    assert replica_gpus(job) == {"Worker": 4, "PS": 0}


def test_a_pod_deleted_before_it_was_scheduled_is_pending_not_running():
    """Terminating is a pod's deletion, not a container that ran: without a node none ran."""
    assert phase(one("Terminating", node="<none>")) == "Pending"
    assert phase(one("Terminating")) == "Running"


def test_an_init_containers_exit_code_is_read_from_the_row():
    assert exit_code(one("Init:ExitCode:2", ended="Failed")) == 2
    assert not needs_pod(one("Init:ExitCode:2", ended="Failed"))


def test_the_age_column_gives_the_replicas_start_time():
    """The printer's human durations ("5m3s", "2d4h"): the AGE of `status` counts from them."""
    import datetime as dt

    for age, seconds in (("75s", 75), ("5m3s", 303), ("2d4h", 2 * 86400 + 4 * 3600)):
        started = replica_phase(one("Running", age=age), "j").started
        then = dt.datetime.strptime(started, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
        assert seconds <= (dt.datetime.now(dt.timezone.utc) - then).total_seconds() < seconds + 60, (age, started)
