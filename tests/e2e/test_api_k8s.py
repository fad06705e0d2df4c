"""launcher.api.TrainingClient on the real control plane (real apiserver, training-operator,
scheduler; KWOK nodes run the pods and serve k8s/kwok/replica.log as every replica's log):
create_job validated with the cluster's CRD, the Kubeflow SDK's wait_for_job_conditions
(Running, then Succeeded; RuntimeError for a Failed job), get_job_logs(follow=True) until
the job ends, the typed events of the run, get_job, list_jobs, delete_job; the job's
NetworkPolicy, created with it as by the CLI's submit. The same calls on
the local backend: tests/integration/test_api.py."""
from __future__ import annotations

import threading
from typing import Iterator

import pytest

from launcher.api import TrainingClient
from launcher.backends.base import NotFound
from launcher.events import JobCondition, ReplicaPhase
from launcher.spec import JobSpec, ReplicaSpec
from tests.e2e.tfjobs import log_text, wait_running
from tests.support.k8s_backend import Collector
from tests.support.polling import wait_threads_end

WAIT_S = 120.0
THREADS_END_S = 10.0  # a stopped wait closes its watches within about a second
REPLICAS = {"chief-0", "ps-0", "worker-0"}


@pytest.fixture
def client(control_plane) -> Iterator[tuple[TrainingClient, str]]:
    """(TrainingClient on the control plane's kubeconfig, a fresh namespace)."""
    cp = control_plane
    with cp.in_process() as env, cp.namespace("e2e-api", wait=False) as namespace:
        env.delenv("TFJOB_CRD", raising=False)  # the cluster's CRD
        with TrainingClient(backend="k8s", kubeconfig=str(cp.kubeconfig)) as training:
            yield training, namespace


def spec(name: str, namespace: str, **fields) -> JobSpec:
    return JobSpec(name=name, namespace=namespace, replicas={"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1),
                                                             "Worker": ReplicaSpec(1)}, **fields)


def test_create_wait_follow_logs_events_and_delete(client, control_plane):
    training, namespace = client
    sent = training.create_job(spec("api", namespace, job_dir="gs://bucket-1/runs/api"))
    job = control_plane.kubectl_json("get", "tfjob", "api", "-n", namespace)
    assert job["spec"]["tfReplicaSpecs"].keys() == sent["spec"]["tfReplicaSpecs"].keys()
    (policy,) = control_plane.kubectl_json("get", "networkpolicy", "-n", namespace)["items"]  # as the CLI's submit
    assert policy["metadata"]["name"] == "api-tf-port"
    assert [(o["kind"], o["uid"]) for o in policy["metadata"]["ownerReferences"]] == [("TFJob", job["metadata"]["uid"])]
    seen = []
    running = training.wait_for_job_conditions("api", namespace, expected_conditions={"Running"},
                                               wait_timeout=WAIT_S, callback=seen.append)
    assert running.phase == "Running" and seen[-1].phase == "Running", seen
    wait_running(control_plane, namespace, "api", len(REPLICAS))
    follow = Collector(training.get_job_logs("api", namespace, follow=True))
    last = log_text()[-1]
    follow.wait_for(lambda lines: {line.replica for line in lines if line.line == last} == REPLICAS,
                    "every replica's log to its last line", WAIT_S)
    assert not follow.done  # the job runs: following goes on
    events = Collector(training.events("api", namespace))
    # its first list read before the job ends: after the end the ps and worker pods are deleted
    events.wait_for(lambda items: {e.replica for e in items if isinstance(e, ReplicaPhase)} == REPLICAS,
                    "every replica in the events", WAIT_S)
    control_plane.finish_pod(namespace, "api-chief-0", 0)
    done = training.wait_for_job_conditions("api", namespace, wait_timeout=WAIT_S)
    assert done.phase == "Succeeded"
    lines = follow.wait_done(WAIT_S)  # following ends with the job
    for replica in REPLICAS:
        assert [line.line for line in lines if line.replica == replica][:len(log_text())] == log_text(), replica
    items = events.wait_done(WAIT_S)
    conditions = [(e.type, e.status) for e in items if isinstance(e, JobCondition)]
    assert conditions[0] == ("Created", "True") and conditions[-1] == ("Succeeded", "True"), conditions
    assert items[-1].terminal
    assert {e.replica for e in items if isinstance(e, ReplicaPhase)} == REPLICAS
    assert [job.name for job in training.list_jobs(namespace)] == ["api"]
    assert training.get_job("api", namespace).phase == "Succeeded"
    training.delete_job("api", namespace, wait=True)
    with pytest.raises(NotFound):
        training.get_job("api", namespace)


def test_wait_for_job_conditions_raises_for_a_job_that_failed(client, control_plane):
    training, namespace = client
    # ExitCode: the operator retries retryable codes (>128) only; 1 is permanent
    training.create_job(spec("api-fail", namespace, restart_policy="ExitCode"))
    wait_running(control_plane, namespace, "api-fail", len(REPLICAS))
    control_plane.finish_pod(namespace, "api-fail-chief-0", 1)
    with pytest.raises(RuntimeError, match=f"tfjob api-fail in {namespace} Failed .*before Succeeded"):
        training.wait_for_job_conditions("api-fail", namespace, wait_timeout=WAIT_S)
    assert training.wait_for_job_conditions("api-fail", namespace, expected_conditions={"Failed"},
                                            wait_timeout=WAIT_S).phase == "Failed"


def test_a_wait_that_times_out_closes_its_watches(client, control_plane):
    """The job keeps running after a TimeoutError, but the wait's TFJob, pod and events
    watches (and the thread that read them) end: a notebook that polls with short waits
    does not pile up open watches."""
    training, namespace = client
    training.create_job(spec("api-slow", namespace))
    wait_running(control_plane, namespace, "api-slow", len(REPLICAS))
    before = set(threading.enumerate())
    with pytest.raises(TimeoutError, match="keeps running"):
        training.wait_for_job("api-slow", namespace, timeout=2)
    with pytest.raises(TimeoutError, match="keeps running"):
        training.wait_for_job_conditions("api-slow", namespace, wait_timeout=2, callback=lambda status: None)
    wait_threads_end(before, THREADS_END_S)
    assert training.get_job("api-slow", namespace).phase == "Running"
