"""The k8s backend's pure parts: reading operator pods and TFJob conditions, the trackers
that turn watch events into each transition once, request counting, error messages."""
from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from launcher.backends.base import BackendError
from launcher.backends.k8s.client import request_kind, server_message
from launcher.backends.k8s.events import ConditionTracker, ReplicaTracker, Unschedulable
from launcher.backends.k8s.objects import parse_replica, pod_selector, replica_phase
from launcher.backends.k8s.table import PodRow


def pod(rtype="worker", index="1", uid="u1", phase="Running", **status) -> dict:
    return {"metadata": {"name": f"job-{rtype}-{index}", "uid": uid,
                         "labels": {"training.kubeflow.org/job-name": "job",
                                    "training.kubeflow.org/replica-type": rtype,
                                    "training.kubeflow.org/replica-index": index}},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "istio-proxy"},
                {"name": "tensorflow", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
            "status": {"phase": phase, **status}}


def container(state: dict, restarts: int = 0, cid: str = "containerd://b", last: dict | None = None) -> dict:
    status = {"name": "tensorflow", "state": state, "restartCount": restarts, "containerID": cid}
    if last:
        status["lastState"] = {"terminated": last}
    return {"containerStatuses": [status, {"name": "istio-proxy", "restartCount": 3, "state": {"running": {}}}]}


def tfjob(*conditions: tuple[str, str, str]) -> dict:
    return {"status": {"conditions": [{"type": t, "status": s, "reason": f"TFJob{t}", "lastTransitionTime": when}
                                      for t, s, when in conditions]}}


def test_a_pod_becomes_a_replica_row():
    row = replica_phase(pod(startTime="2025-01-01T00:00:00Z",
                            **container({"terminated": {"exitCode": 3, "reason": "Error"}}, restarts=2)))
    assert (row.replica, row.type, row.index, row.phase, row.node, row.gpus, row.exit_code) == \
        ("worker-1", "Worker", 1, "Running", "n1", 2, 3)
    assert row.restarts == 5 and row.message == "Error" and row.started == "2025-01-01T00:00:00Z"
    assert replica_phase(pod(rtype="ps", index="0")).type == "PS"
    assert replica_phase({"metadata": {"labels": {}}, "spec": {}}) is None  # not an operator pod


def test_an_unschedulable_pod_says_why():
    scheduled = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": "0/2 nodes are available"}]}
    assert replica_phase(pod(phase="Pending", **scheduled)).message == "Unschedulable: 0/2 nodes are available"


def test_a_crash_looping_replica_shows_the_last_exit_code():
    waiting = container({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting"}}, 1, cid="",
                        last={"exitCode": 2, "containerID": "containerd://old"})
    crashed = replica_phase(pod(**waiting))
    assert (crashed.exit_code, crashed.restarts) == (2, 1 + 3)  # restarts of both containers (the sidecar: 3)
    assert crashed.message == "CrashLoopBackOff: back-off 10s restarting"
    running_again = container({"running": {}}, 1, cid="containerd://new", last={"exitCode": 2})
    assert replica_phase(pod(**running_again)).exit_code is None  # running: no exit code to show


def test_an_image_the_kubelet_cannot_pull_says_which_and_why():
    waiting = container({"waiting": {"reason": "ErrImagePull", "message": 'failed to pull and unpack image\n'
                                     '"localhost/tfjob-missing:0": connection refused'}}, cid="")
    pulled = replica_phase(pod(phase="Pending", **waiting))
    assert (pulled.phase, pulled.exit_code) == ("Pending", None)
    assert pulled.message == 'ErrImagePull: failed to pull and unpack image "localhost/tfjob-missing:0": connection refused'


def test_replica_ids_and_selectors():
    assert parse_replica("worker-12") == ("Worker", 12)
    assert parse_replica("ps-0") == ("PS", 0)
    for bad in ("worker", "master-0", "Worker-1", "worker--1"):
        with pytest.raises(BackendError, match="--replica"):
            parse_replica(bad)
    assert pod_selector("job", ("PS", 0)) == ("training.kubeflow.org/job-name=job,"
                                              "training.kubeflow.org/replica-type=ps,"
                                              "training.kubeflow.org/replica-index=0")


def test_conditions_are_reported_once_per_transition():
    track = ConditionTracker()
    assert [c.type for c in track.update(tfjob(("Created", "True", "t1")))] == ["Created"]
    assert track.update(tfjob(("Created", "True", "t1"))) == []
    running = tfjob(("Created", "True", "t1"), ("Running", "True", "t2"))
    assert [c.type for c in track.update(running)] == ["Running"]
    assert track.update(running) == []
    assert [c.type for c in track.update(tfjob(("Created", "True", "t1"), ("Restarting", "True", "t2")))] == \
        ["Restarting"]
    # Running comes back in the same second it left: still a transition
    assert [c.type for c in track.update(running)] == ["Running"]
    done = track.update(tfjob(("Created", "True", "t1"), ("Running", "False", "t2"), ("Succeeded", "True", "t3")))
    assert [(c.type, c.status, c.terminal) for c in done] == [("Running", "False", False), ("Succeeded", "True", True)]


def row(name: str = "j-worker-1", status: str = "Running", **fields) -> PodRow:
    return PodRow(name=name, status=status, restarts=fields.pop("restarts", 0), node=fields.pop("node", "n1"),
                  **fields)


def test_replicas_are_reported_when_their_state_changes():
    track = ReplicaTracker("j")
    assert [r.phase for r in track.apply("ADDED", row(status="Pending", node=""))] == ["Pending"]
    assert track.apply("MODIFIED", row(status="Pending", node="")) == []  # e.g. only an annotation changed
    assert [r.phase for r in track.apply("MODIFIED", row())] == ["Running"]
    assert track.apply("DELETED", row()) == []
    # the operator's replacement pod (same name, the old one gone) is reported even in the same state
    assert [r.phase for r in track.apply("ADDED", row())] == ["Running"]
    assert track.sync((row(),)) == []  # a relist without changes reports nothing
    assert [r.replica for r in track.sync((row(status="Completed", ended="Succeeded"), row("j-worker-0")))] == \
        ["worker-1", "worker-0"]


def test_a_failed_replica_is_read_once_for_its_exit_code():
    fetched = []

    def fetch(found: PodRow) -> dict:
        fetched.append(found.name)
        return pod(phase="Failed", **container({"terminated": {"exitCode": 137, "reason": "OOMKilled"}}))

    track = ReplicaTracker("j", fetch)
    failed = row(status="OOMKilled", ended="Failed")
    assert [(r.phase, r.exit_code) for r in track.apply("MODIFIED", failed)] == [("Failed", 137)]
    assert track.apply("MODIFIED", failed) == [] and fetched == ["j-worker-1"]
    assert [r.exit_code for r in track.apply("MODIFIED", row("j-chief-0", "Completed", ended="Succeeded"))] == [0]
    assert fetched == ["j-worker-1"]  # Succeeded says exit code 0 by itself


def test_requests_are_named_for_counting():
    assert request_kind("GET", "https://h/api/v1/namespaces/d/pods?labelSelector=x&watch=True") == "pods watch"
    assert request_kind("GET", "https://h/api/v1/namespaces/d/pods?labelSelector=x") == "pods list"
    assert request_kind("GET", "https://h/api/v1/namespaces/d/pods/p/log?follow=true") == "pods/log"
    assert request_kind("POST", "https://h/apis/kubeflow.org/v1/namespaces/d/tfjobs") == "tfjobs create"
    assert request_kind("DELETE", "https://h/apis/kubeflow.org/v1/namespaces/d/tfjobs/j") == "tfjobs item"


def test_server_messages_keep_the_reason_and_every_field_cause():
    body = {"kind": "Status", "status": "Failure", "reason": "Invalid", "code": 422,
            "message": 'TFJob.kubeflow.org "j" is invalid: spec.a: Required value',
            "details": {"causes": [{"field": "spec.a", "message": "Required value"},
                                   {"field": "spec.b", "message": "Invalid value: 1"}]}}
    exc = ApiException(status=422, reason="Unprocessable Entity")
    exc.body = json.dumps(body)
    assert server_message(exc) == ('Invalid: TFJob.kubeflow.org "j" is invalid: spec.a: Required value; '
                                   "spec.b: Invalid value: 1")
    plain = ApiException(status=500, reason="Internal Server Error")
    plain.body = "oops\nthere"
    assert server_message(plain) == "Internal Server Error"


def test_an_image_pull_back_off_is_read_once_per_reason_for_the_kubelets_message():
    fetched, now = [], {}

    def fetch(found: PodRow) -> dict:
        fetched.append(found.status)
        return pod(phase="Pending", **container({"waiting": now}, cid=""))

    def pulling(status: str) -> PodRow:  # the printer sums restarts of every container: the sidecar's 3
        return row(status=status, restarts=3)

    track = ReplicaTracker("j", fetch)
    now.update(reason="ErrImagePull", message="failed to pull: connection refused")
    assert [r.message for r in track.apply("MODIFIED", pulling("ErrImagePull"))] == \
        ["ErrImagePull: failed to pull: connection refused"]
    now.update(reason="ImagePullBackOff", message='Back-off pulling image "x:0"')
    assert [r.message for r in track.apply("MODIFIED", pulling("ImagePullBackOff"))] == \
        ['ImagePullBackOff: Back-off pulling image "x:0"']
    assert track.apply("MODIFIED", pulling("ImagePullBackOff")) == [] and fetched == ["ErrImagePull",
                                                                                          "ImagePullBackOff"]
    # the pod moved on between the row and the GET (pulled, now running): the row's reason stays
    later = ReplicaTracker("j", lambda found: pod(**container({"running": {}})))
    assert [r.message for r in later.apply("MODIFIED", pulling("ErrImagePull"))] == ["ErrImagePull"]


def test_an_image_no_replica_can_pull_is_read_once_per_replica_type_and_reason():
    """A mistyped image on a big job: every worker waits on it with the same kubelet message
    (it names the image): one GET per replica type and reason, not one per pod."""
    fetched, now = [], {"reason": "ErrImagePull", "message": 'failed to pull "x:0": not found'}

    def fetch(found: PodRow) -> dict:
        fetched.append(found.name)
        return pod(phase="Pending", **container({"waiting": dict(now)}, cid=""))

    track = ReplicaTracker("j", fetch)
    workers = [f"j-worker-{index}" for index in range(50)]  # restarts 3: the istio sidecar's, as the printer sums
    for name in workers:
        assert [r.message for r in track.apply("MODIFIED", row(name, "ErrImagePull", restarts=3))] == \
            ['ErrImagePull: failed to pull "x:0": not found']
    assert fetched == ["j-worker-0"]
    now.update(reason="ImagePullBackOff", message='Back-off pulling image "x:0"')
    for name in workers:
        assert [r.message for r in track.apply("MODIFIED", row(name, "ImagePullBackOff", restarts=3))] == \
            ['ImagePullBackOff: Back-off pulling image "x:0"']
    assert [r.message for r in track.apply("MODIFIED", row("j-ps-0", "ImagePullBackOff", restarts=3))] == \
        ['ImagePullBackOff: Back-off pulling image "x:0"']
    assert fetched == ["j-worker-0", "j-worker-0", "j-ps-0"]  # per type and reason
    # a failure that is the pod's own (its exit code) is still read per pod
    now.clear()
    track.apply("MODIFIED", row("j-worker-7", "Error", ended="Failed"))
    assert fetched[-1] == "j-worker-7"


def test_only_rbacs_403_says_to_ask_for_the_right():
    """A 403 is RBAC's missing right only in the apiserver's own words (User "..." cannot
    VERB resource ...); an admission webhook's or policy's denial (controller-runtime's
    Denied is a 403) and an exceeded ResourceQuota are 403s too, for which asking for a Role
    is no fix: the server's line alone."""
    from launcher.backends.k8s.client import RBAC_HINT, refusal

    def forbidden(message: str) -> str:
        exc = ApiException(status=403, reason="Forbidden")
        exc.body = json.dumps({"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403,
                               "message": message})
        return str(refusal("creating tfjob j", exc, "https://h"))

    rbac = forbidden('tfjobs.kubeflow.org is forbidden: User "dev" cannot create resource "tfjobs" in API group '
                     '"kubeflow.org" in the namespace "team-a"')
    assert rbac.endswith(f"; {RBAC_HINT}"), rbac
    for message in ('admission webhook "validate.kyverno.svc" denied the request: images must be signed',
                    'tfjobs.kubeflow.org "j" is forbidden: exceeded quota: jobs, requested: '
                    "count/tfjobs.kubeflow.org=1, used: count/tfjobs.kubeflow.org=5, limited: "
                    "count/tfjobs.kubeflow.org=5"):
        assert forbidden(message) == f"creating tfjob j: Forbidden: {message}"


def test_an_older_scheduling_event_does_not_replace_a_newer_message():
    """The scheduler's events come by list and watch in any order: the latest one counts."""
    pending = Unschedulable()
    event = lambda when, message: {"involvedObject": {"name": "j-worker-0"}, "lastTimestamp": when,  # noqa: E731
                                   "message": message}
    assert pending.note(event("2026-01-01T00:00:10Z", "0/3 nodes are available: 3 Insufficient cpu.")) == "j-worker-0"
    assert pending.note(event("2026-01-01T00:00:05Z", "0/3 nodes are available: 3 Insufficient memory.")) is None
    assert pending.message(PodRow("j-worker-0", "Pending", 0, "")) == (
        "Unschedulable: 0/3 nodes are available: 3 Insufficient cpu.")
