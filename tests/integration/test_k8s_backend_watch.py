"""KubernetesBackend.events over the FAKE API server's watch protocol: each transition once
through a lifecycle with every container state written step by step, a stream dropped
mid-way, 410 Gone, closing, and requests that do not grow with the number of replicas. A
real lifecycle, a job deleted while watched and an unknown job run against the real control
plane in tests/e2e/test_k8s_backend.py."""
from __future__ import annotations

import json
import time

import pytest

from launcher.backends.k8s import watch as k8s_watch
from launcher.backends.base import BackendError
from launcher.events import JobCondition, ReplicaPhase
from tests.support.k8s_backend import WAIT, Collector, manifest, watch_lifecycle, watches_open
from tests.support.polling import wait_for

PODS = ("mnist-chief-0", "mnist-ps-0", "mnist-worker-0", "mnist-worker-1")
REPLICAS = ("chief-0", "ps-0", "worker-0", "worker-1")


def conditions(items: list) -> list[tuple[str, str]]:
    return [(e.type, e.status) for e in items if isinstance(e, JobCondition)]


def states(items: list, replica: str) -> list[tuple[str, str]]:
    """(phase, message) of each ReplicaPhase event of one replica, in order."""
    return [(e.phase, e.message) for e in items if isinstance(e, ReplicaPhase) and e.replica == replica]


def latest(items: list, replica: str) -> ReplicaPhase | None:
    found = [e for e in items if isinstance(e, ReplicaPhase) and e.replica == replica]
    return found[-1] if found else None


def all_in(items: list, phase: str, replicas=REPLICAS) -> bool:
    return all(getattr(latest(items, r), "phase", None) == phase for r in replicas)


@pytest.fixture
def job(k8s_backend, fake_apiserver):
    """A submitted job and a Collector on its events, both watches open before pods exist."""
    k8s_backend.submit(manifest(workers=2))
    events = Collector(k8s_backend.events("mnist", "default"))
    wait_for(lambda: watches_open(fake_apiserver), "the backend's two watches", WAIT)
    return events


def create_pods(operator, events: Collector) -> None:
    operator.create_pods("mnist")
    events.wait_for(lambda it: conditions(it) == [("Created", "True")] and all_in(it, "Pending"),
                    "Created and four Pending replicas")


def finish(operator, events: Collector, pods=PODS) -> list:
    for pod in pods:
        if "-ps-" not in pod:
            operator.exit(pod, 0)
    events.wait_for(lambda it: all_in(it, "Succeeded", [p.split("-", 1)[1] for p in pods if "-ps-" not in p]),
                    "chief and workers Succeeded")
    operator.set_condition("mnist", "Succeeded")
    return events.wait_done()


def test_a_lifecycle_reports_each_transition_once(job, fake_operator):
    """Kept on the double for what the real control plane cannot be made to show: every
    container state written in turn, ContainerCreating between Pending and Running (KWOK's
    pods go from scheduled straight to Running), and a TFJob update without a new condition
    at a chosen moment. The real operator's lifecycle, each replica's transitions once:
    tests/e2e/test_k8s_backend.py::test_a_lifecycle_reports_each_condition_once_and_ends."""
    create_pods(fake_operator, job)
    for pod in PODS:
        fake_operator.start(pod)
    fake_operator.set_condition("mnist", "Running")
    job.wait_for(lambda it: ("Running", "True") in conditions(it) and all_in(it, "Running"), "Running")
    fake_operator.set_active("mnist", "Worker", 2)  # a TFJob update without a new condition
    fake_operator.set_condition("mnist", "Running")  # the operator's no-op re-set

    items = finish(fake_operator, job)

    assert conditions(items) == [("Created", "True"), ("Running", "True"), ("Running", "False"), ("Succeeded", "True")]
    assert items[-1].terminal
    assert states(items, "worker-0") == [("Pending", ""), ("Pending", "ContainerCreating"), ("Running", ""),
                                         ("Succeeded", "Completed")]
    assert states(items, "ps-0") == [("Pending", ""), ("Pending", "ContainerCreating"), ("Running", "")]
    assert latest(items, "chief-0").exit_code == 0


def test_pod_ends_the_pod_watch_has_not_brought_come_before_the_terminal_condition(job, fake_apiserver,
                                                                                   fake_operator):
    """The operator writes Succeeded after it saw the chief's pod end, but the pod watch
    (another watch cache) may bring that end later than the TFJob watch brings Succeeded."""
    create_pods(fake_operator, job)
    for pod in PODS:
        fake_operator.start(pod)
    fake_operator.set_condition("mnist", "Running")
    job.wait_for(lambda it: all_in(it, "Running"), "four Running replicas")
    fake_apiserver.lag_watches("pods")
    try:
        fake_operator.exit("mnist-chief-0", 0)
        fake_operator.exit("mnist-worker-0", 3)
        fake_operator.set_condition("mnist", "Succeeded")
        items = job.wait_done()
    finally:
        fake_apiserver.lag_watches("pods", lag=False)
    assert items[-1].terminal and (items[-1].type, items[-1].status) == ("Succeeded", "True")
    assert (latest(items, "chief-0").phase, latest(items, "chief-0").exit_code) == ("Succeeded", 0)
    assert (latest(items, "worker-0").phase, latest(items, "worker-0").exit_code) == ("Failed", 3)
    assert latest(items, "worker-1").phase == "Running"


def test_a_restart_and_a_crashed_replica_are_reported(job, fake_operator):
    create_pods(fake_operator, job)
    for pod in PODS:
        fake_operator.start(pod)
    fake_operator.set_condition("mnist", "Running")
    fake_operator.crash("mnist-worker-1", code=1)
    fake_operator.set_condition("mnist", "Restarting")
    job.wait_for(lambda it: ("Restarting", "True") in conditions(it), "Restarting")
    fake_operator.start("mnist-worker-1")
    fake_operator.set_condition("mnist", "Running")
    job.wait_for(lambda it: conditions(it).count(("Running", "True")) == 2, "Running again")

    items = finish(fake_operator, job)

    assert conditions(items) == [("Created", "True"), ("Running", "True"), ("Restarting", "True"),
                                 ("Running", "True"), ("Running", "False"), ("Succeeded", "True")]
    crashed = [e for e in items if isinstance(e, ReplicaPhase) and e.replica == "worker-1" and e.restarts]
    assert [(e.phase, e.restarts, e.message.split(":")[0]) for e in crashed] == \
        [("Running", 1, "CrashLoopBackOff"), ("Running", 1, ""), ("Succeeded", 1, "Completed")]


def test_a_failed_chief_ends_with_failed(job, fake_operator):
    create_pods(fake_operator, job)
    fake_operator.start("mnist-chief-0")
    fake_operator.exit("mnist-chief-0", 2)
    job.wait_for(lambda it: getattr(latest(it, "chief-0"), "exit_code", None) == 2, "the chief's exit code")
    fake_operator.set_condition("mnist", "Failed",
                                message="TFJob default/mnist has failed because 1 Chief replica(s) failed.")
    items = job.wait_done()
    assert items[-1] == JobCondition("Failed", "True", "TFJobFailed", items[-1].message, items[-1].time)
    assert latest(items, "chief-0").phase == "Failed"


def test_a_pod_the_server_cannot_read_keeps_the_stream_and_its_exit_code_comes_at_the_relist(job, fake_apiserver,
                                                                                           fake_operator):
    create_pods(fake_operator, job)
    fake_apiserver.unavailable.add(("pods", "get"))  # the GET for the exit code fails (a restarting server)
    fake_operator.start("mnist-chief-0")
    fake_operator.exit("mnist-chief-0", 2)
    job.wait_for(lambda it: getattr(latest(it, "chief-0"), "phase", None) == "Failed", "the chief's failure")
    assert latest(job.items, "chief-0").exit_code is None and fake_apiserver.count("pods", "get") == 1
    fake_apiserver.unavailable.clear()
    fake_apiserver.drop_watches(hold=True)  # a restart: streams cut, a change meanwhile, the history gone
    fake_operator.start("mnist-worker-0")
    fake_apiserver.compact()
    fake_apiserver.release_watches()  # the relist reads the pod again
    job.wait_for(lambda it: getattr(latest(it, "chief-0"), "exit_code", None) == 2, "the exit code after the relist")
    fake_operator.set_condition("mnist", "Failed",
                                message="TFJob default/mnist has failed because 1 Chief replica(s) failed.")
    items = job.wait_done()
    assert items[-1].type == "Failed" and [e.exit_code for e in items if getattr(e, "replica", "") == "chief-0"
                                           and e.phase == "Failed"] == [None, 2]


def test_a_watch_dropped_mid_stream_resumes_from_the_last_version(job, fake_apiserver, fake_operator):
    create_pods(fake_operator, job)
    last = {res: max(c.version for c in fake_apiserver.history if c.resource == res) for res in ("pods", "tfjobs")}
    fake_apiserver.drop_watches(hold=True)  # streams cut; no new one until released
    for pod in PODS:
        fake_operator.start(pod)
    fake_operator.set_condition("mnist", "Running")
    fake_apiserver.release_watches()
    job.wait_for(lambda it: ("Running", "True") in conditions(it) and all_in(it, "Running"),
                 "what changed while the streams were down")

    items = finish(fake_operator, job)

    assert conditions(items) == [("Created", "True"), ("Running", "True"), ("Running", "False"), ("Succeeded", "True")]
    assert states(items, "worker-1") == [("Pending", ""), ("Pending", "ContainerCreating"), ("Running", ""),
                                         ("Succeeded", "Completed")]
    for resource, lists in (("pods", 2), ("tfjobs", 1)):
        assert fake_apiserver.count(resource, "list") == lists  # resumed, not relisted (pods: and the last states)
        assert fake_apiserver.watches(resource)[1].query["resourceVersion"] == str(last[resource])


@pytest.mark.parametrize("ending", ["timeout", "silence"])
def test_a_watch_the_server_ends_or_that_falls_silent_reopens_from_its_last_version(
        monkeypatch, k8s_backend, fake_apiserver, fake_operator, ending):
    monkeypatch.setattr(k8s_watch, "WATCH_SECONDS" if ending == "timeout" else "SILENCE_SECONDS", 1)
    k8s_backend.submit(manifest(workers=2))
    job = Collector(k8s_backend.events("mnist", "default"))
    create_pods(fake_operator, job)
    last = max(c.version for c in fake_apiserver.history if c.resource == "pods")
    wait_for(lambda: len(fake_apiserver.watches("pods")) >= 3, "the pod watch opened twice more", WAIT)
    for pod in PODS:
        fake_operator.start(pod)
    job.wait_for(lambda it: all_in(it, "Running"), "every replica Running after the re-opened watches")

    items = finish(fake_operator, job)

    assert states(items, "worker-1") == [("Pending", ""), ("Pending", "ContainerCreating"), ("Running", ""),
                                         ("Succeeded", "Completed")]
    assert fake_apiserver.count("pods", "list") == 2  # resumed, not relisted (the 2nd: the last states)
    assert int(fake_apiserver.watches("pods")[2].query["resourceVersion"]) >= last  # from where it was
    pods = k8s_backend.api.received.snapshot()["pod"]
    counted = "rewatches" if ending == "timeout" else "drops"
    assert pods.get(counted, 0) >= 2 and not pods.get("relists")
    assert not pods.get("drops" if ending == "timeout" else "rewatches")


@pytest.mark.parametrize("gone_mode", ["event", "http"])
def test_410_gone_relists_and_reports_only_real_changes(job, fake_apiserver, fake_operator, gone_mode):
    fake_apiserver.gone_mode = gone_mode
    create_pods(fake_operator, job)
    fake_apiserver.drop_watches(hold=True)
    for pod in PODS[:3]:  # worker-1 stays Pending: the relist must not report it again
        fake_operator.start(pod)
    fake_operator.set_condition("mnist", "Running")
    fake_apiserver.compact()  # the versions the backend knows are gone
    fake_apiserver.release_watches()
    job.wait_for(lambda it: ("Running", "True") in conditions(it) and all_in(it, "Running", REPLICAS[:3]),
                 "the state after the relist")
    fake_operator.start("mnist-worker-1")
    job.wait_for(lambda it: all_in(it, "Running"), "worker-1 Running")

    items = finish(fake_operator, job)

    assert conditions(items) == [("Created", "True"), ("Running", "True"), ("Running", "False"), ("Succeeded", "True")]
    assert states(items, "worker-0") == [("Pending", ""), ("Running", ""), ("Succeeded", "Completed")]
    assert states(items, "worker-1") == [("Pending", ""), ("Pending", "ContainerCreating"), ("Running", ""),
                                         ("Succeeded", "Completed")]
    # the first list, the relist, and for pods the last states before the end
    assert fake_apiserver.count("pods", "list") == 3 and fake_apiserver.count("tfjobs", "list") == 2


def test_without_rights_on_events_pods_are_followed_without_the_schedulers_reasons(k8s_backend, fake_apiserver,
                                                                                   fake_operator):
    fake_apiserver.forbidden.add("events")
    k8s_backend.submit(manifest(workers=2))
    events = Collector(k8s_backend.events("mnist", "default"))
    wait_for(lambda: watches_open(fake_apiserver), "the backend's pod and TFJob watches", WAIT)
    create_pods(fake_operator, events)
    fake_operator.unschedulable("mnist-worker-1", "0/3 nodes are available: 3 Insufficient cpu.")
    assert k8s_backend.status("mnist", "default").replicas[-1].message == ""
    fake_apiserver.forbidden.clear()
    assert "Insufficient cpu" in k8s_backend.status("mnist", "default").replicas[-1].message
    for pod in PODS[:3]:
        fake_operator.start(pod)
    items = finish(fake_operator, events, PODS[:3])
    assert items[-1].type == "Succeeded" and states(items, "worker-1") == [("Pending", "")]


def test_stopping_the_consumer_closes_both_streams(k8s_backend, fake_apiserver, fake_operator):
    k8s_backend.submit(manifest())
    fake_operator.create_pods("mnist")
    events = k8s_backend.events("mnist", "default")
    assert isinstance(next(events), (JobCondition, ReplicaPhase))
    wait_for(lambda: fake_apiserver.open_watches >= 2, "the pod and TFJob watch streams", WAIT)
    events.close()
    wait_for(lambda: fake_apiserver.open_watches == 0, "the streams closed", WAIT)


def test_requests_do_not_grow_with_the_number_of_replicas(k8s_backend, fake_apiserver, fake_operator):
    small = watch_lifecycle(k8s_backend, fake_apiserver, fake_operator, 10)
    large = watch_lifecycle(k8s_backend, fake_apiserver, fake_operator, 100)
    for backend_count, server_count, items in (small, large):
        assert items[-1].type == "Succeeded" and items[-1].terminal
        assert backend_count == server_count == 7  # one list and one watch per resource, one list at the end
    assert sum(isinstance(e, ReplicaPhase) for e in large[2]) > 100  # it did see the pods
    assert k8s_backend.requests.snapshot() == {"GET pods list": 2, "GET pods watch": 1, "GET events list": 1,
                                               "GET events watch": 1, "GET tfjobs list": 1, "GET tfjobs watch": 1}


def pod_watch_bytes_per_change(backend, server, operator, replicas: int) -> tuple[float, float]:
    """(bytes the backend received per pod change on its pod watch, size of one pod object
    on the server) over a whole job lifecycle."""
    backend.api.received.reset()
    items = watch_lifecycle(backend, server, operator, replicas)[2]
    assert items[-1].type == "Succeeded"
    one_pod = max(len(json.dumps(o)) for (res, _, name), o in server.objects.items()
                  if res == "pods" and name.startswith(f"scale-{replicas}-"))
    return backend.api.received.watch_bytes_per_change("pod"), one_pod


def test_the_pod_watch_payload_does_not_grow_with_the_number_of_replicas(k8s_backend, fake_apiserver,
                                                                           fake_operator):
    small, small_pod = pod_watch_bytes_per_change(k8s_backend, fake_apiserver, fake_operator, 12)
    large, large_pod = pod_watch_bytes_per_change(k8s_backend, fake_apiserver, fake_operator, 200)
    assert large_pod > 3 * small_pod  # TF_CONFIG: every pod object grows with the job
    assert large < 400 and large < small + 64  # per change the launcher receives a row (longer names only)


def test_a_server_that_goes_away_ends_the_events_with_a_clear_error(job, fake_apiserver, fake_operator, monkeypatch):
    """The server answered the watches, so the kubeconfig is right and the job goes on (the
    same against the real apiserver: tests/e2e/test_cluster_errors.py)."""
    monkeypatch.setattr(k8s_watch, "MAX_FAILURES", 1)  # give up after one retry
    create_pods(fake_operator, job)
    fake_apiserver.stop()
    with pytest.raises(BackendError, match="^lost the Kubernetes API server .*; the job goes on in the cluster: "):
        job.wait_done()


def test_a_job_the_operator_has_taken_up_gets_no_note_that_it_has_no_status(k8s_backend, fake_apiserver,
                                                                            fake_operator):
    """The note that no training-operator took the job up (`unclaimed_seconds` after the
    events began) is for a TFJob without any condition; one with Created gets none."""
    notes: list[str] = []
    k8s_backend.note, k8s_backend.unclaimed_seconds = notes.append, 6.0  # after the first list, even under load
    k8s_backend.submit(manifest(workers=1))
    fake_operator.create_pods("mnist")  # Created, before the events begin
    begun = time.monotonic()
    events = Collector(k8s_backend.events("mnist", "default"))
    events.wait_for(lambda it: ("Created", "True") in conditions(it), "Created")
    assert time.monotonic() - begun < k8s_backend.unclaimed_seconds, "the first list came after the note's time"
    wait_for(lambda: time.monotonic() > begun + k8s_backend.unclaimed_seconds + 1.0, "the note's time to pass", WAIT)
    pods = ("mnist-chief-0", "mnist-ps-0", "mnist-worker-0")
    for pod in pods:
        fake_operator.start(pod)
    finish(fake_operator, events, pods)
    assert notes == []
