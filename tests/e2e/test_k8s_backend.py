"""KubernetesBackend (in-process) against the real control plane: submit, replace, server
dry run, refusals, status (also of a replica the real scheduler cannot place and of one
that exited 1), list, delete, the cluster's CRD, the events' watch and the logs of the
replicas that started, as the real apiserver, scheduler, training-operator and garbage
collector do them. Moved here from the FAKE API server's tests
(tests/integration/test_k8s_backend*.py), which keep what needs the double: dropped
watches, 410 Gone, a restart, a garbage collector held back, container states written step
by step (a restarted container, ContainerCreating), a cluster without the CRD, credentials,
an unreachable server."""
from __future__ import annotations

import copy
from typing import Iterator

import pytest

from launcher.backends.base import AlreadyExists, BackendError, NotFound
from launcher.events import JobCondition, LogLine, ReplicaPhase
from launcher.spec import RunPolicy, SpecError
from tests.e2e.tfjobs import log_text, owned, tfjob, wait_pods
from tests.support.k8s_backend import Collector, manifest
from tests.support.polling import wait_for

WAIT_S = 60.0


@pytest.fixture
def cluster(control_plane) -> Iterator[tuple[object, str]]:
    """(KubernetesBackend on the control plane's kubeconfig, a fresh namespace)."""
    from launcher.backends.k8s import KubernetesBackend  # the Kubernetes client loads only here

    cp = control_plane
    with cp.in_process(), cp.namespace("backend", wait=False) as namespace:
        backend = KubernetesBackend(kubeconfig=str(cp.kubeconfig))
        try:
            yield backend, namespace
        finally:
            backend.close()


def as_stored(spec: dict) -> dict:
    """The rendered spec with the defaults the apiserver fills in from the CRD's schema
    (runPolicy.suspend false, each container port's protocol TCP)."""
    spec = copy.deepcopy(spec)
    spec["runPolicy"].setdefault("suspend", False)
    for replica in spec["tfReplicaSpecs"].values():
        for container in replica["template"]["spec"]["containers"]:
            for port in container.get("ports") or []:
                port.setdefault("protocol", "TCP")
    return spec


def stored(cp, namespace: str, name: str = "mnist") -> dict | None:
    found = cp.kubectl("get", "tfjob", name, "-n", namespace, "-o", "json", check=False)
    return tfjob(cp, namespace, name) if found.returncode == 0 else None


# ---- submit / dry run ------------------------------------------------------------------------
def test_submit_creates_the_rendered_tfjob(cluster, control_plane):
    backend, namespace = cluster
    job = manifest(namespace=namespace)
    backend.submit(job)
    kept = stored(control_plane, namespace)
    assert kept["spec"] == as_stored(job["spec"]) != job["spec"]
    assert kept["metadata"]["labels"] == job["metadata"]["labels"]
    assert backend.status("mnist", namespace).conditions is not None


def test_submitting_the_same_name_twice_is_already_exists(cluster):
    backend, namespace = cluster
    backend.submit(manifest(namespace=namespace))
    with pytest.raises(AlreadyExists) as err:
        backend.submit(manifest(namespace=namespace))
    assert str(err.value) == f"tfjob mnist already exists in {namespace}; use --replace or delete it"


def test_replace_deletes_in_the_foreground_and_creates_again(cluster, control_plane):
    backend, namespace = cluster
    cp = control_plane
    backend.submit(manifest(namespace=namespace, workers=1))
    old_uid = stored(cp, namespace)["metadata"]["uid"]
    old_pods = {p["metadata"]["uid"] for p in wait_pods(cp, namespace, "mnist", lambda ps: len(ps) == 3,
                                                        "the operator's 3 pods")}
    backend.submit(manifest(namespace=namespace, workers=3), replace=True)
    new = stored(cp, namespace)
    assert new["metadata"]["uid"] != old_uid
    assert new["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 3
    pods = wait_pods(cp, namespace, "mnist", lambda ps: len(ps) == 5, "the new job's 5 pods")
    assert not old_pods & {p["metadata"]["uid"] for p in pods}  # the old job's pods went with it
    assert all(p["metadata"]["ownerReferences"][0]["uid"] == new["metadata"]["uid"] for p in pods)


def test_replace_of_a_new_name_just_creates(cluster, control_plane):
    backend, namespace = cluster
    backend.submit(manifest(namespace=namespace), replace=True)
    assert stored(control_plane, namespace) is not None


def test_dry_run_returns_the_servers_object_and_stores_nothing(cluster, control_plane):
    backend, namespace = cluster
    (answer,) = backend.dry_run(manifest(namespace=namespace))
    assert answer["metadata"]["uid"] and answer["spec"] == as_stored(manifest(namespace=namespace)["spec"])
    assert stored(control_plane, namespace) is None


@pytest.mark.parametrize("break_it, field, words", [
    (lambda t: t["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].pop("name"),
     "spec.tfReplicaSpecs.Worker.template.spec.containers[0].name", "Required value"),
    (lambda t: t["spec"]["tfReplicaSpecs"]["Worker"].update(replicas="two"),
     "spec.tfReplicaSpecs.Worker.replicas", "must be of type integer"),
    (lambda t: t["metadata"].update(name="Not_A_Name"), "metadata.name", "RFC 1123 subdomain"),
])
def test_a_refused_tfjob_reports_the_servers_reason_and_field(cluster, control_plane, break_it, field, words):
    backend, namespace = cluster
    job = manifest(namespace=namespace)
    break_it(job)
    for action in (backend.dry_run, backend.submit):
        with pytest.raises(BackendError) as err:
            action(job)
        message = str(err.value)
        assert "Invalid" in message and field in message and words in message, message
        assert "\n" not in message
    assert control_plane.kubectl_json("get", "tfjobs", "-n", namespace)["items"] == []


def test_a_missing_namespace_is_reported(cluster):
    backend, _ = cluster
    with pytest.raises(BackendError, match='namespaces "research-absent" not found'):
        backend.submit(manifest(namespace="research-absent"))


# ---- status / list -----------------------------------------------------------------------------
def test_status_has_the_conditions_and_one_row_per_replica(cluster, control_plane):
    backend, namespace = cluster
    cp = control_plane
    backend.submit(manifest(namespace=namespace, workers=2))
    wait_pods(cp, namespace, "mnist", lambda ps: len(ps) == 4 and all(
        p.get("status", {}).get("phase") == "Running" for p in ps), "4 Running pods")
    wait_for(lambda: backend.status("mnist", namespace).phase == "Running", "the job Running", WAIT_S)

    status = backend.status("mnist", namespace)

    assert [c.type for c in status.conditions] == ["Created", "Running"]
    assert [r.replica for r in status.replicas] == ["chief-0", "ps-0", "worker-0", "worker-1"]
    nodes = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in owned(cp, "pods", namespace, "mnist")}
    for row in status.replicas:
        assert (row.phase, row.node, row.restarts) == ("Running", nodes[f"mnist-{row.replica}"], 0), row
        assert row.started
    assert {r.replica: r.type for r in status.replicas}["chief-0"] == "Chief"
    assert status.created and status.backend == "k8s"


def test_status_says_why_a_replica_waits_and_with_which_code_one_failed(cluster, control_plane):
    """Workers asking for more GPUs than the GPU node has (4): the real scheduler's
    FailedScheduling message; the ps exits 1 under ExitCode: its exit code, read from its
    pod (the row says only Error); the operator fails the job (cleanPodPolicy None keeps
    every pod)."""
    backend, namespace = cluster
    cp = control_plane
    backend.submit(manifest(namespace=namespace, workers=2, gpus_per_worker=5, accelerator="nvidia-tesla-t4",
                            restart_policy="ExitCode", run_policy=RunPolicy(clean_pod_policy="None")))
    wait_pods(cp, namespace, "mnist", lambda ps: sum(p.get("status", {}).get("phase") == "Running" for p in ps) == 2,
              "the chief and the ps Running")
    cp.finish_pod(namespace, "mnist-ps-0", 1)

    def shown():
        status = backend.status("mnist", namespace)
        rows = {r.replica: r for r in status.replicas}
        done = status.phase == "Failed" and rows["ps-0"].phase == "Failed" and all(
            rows[w].message.startswith("Unschedulable: ") for w in ("worker-0", "worker-1"))
        return (status, rows) if done else None

    status, rows = wait_for(shown, lambda: f"the status to show why: {backend.status('mnist', namespace)}", WAIT_S)
    assert [r.replica for r in status.replicas] == ["chief-0", "ps-0", "worker-0", "worker-1"]
    assert (rows["ps-0"].exit_code, rows["ps-0"].node) == (1, owned_node(cp, namespace, "mnist-ps-0"))
    assert (rows["chief-0"].phase, rows["chief-0"].gpus, rows["chief-0"].exit_code) == ("Running", 0, None)
    for worker in ("worker-0", "worker-1"):
        assert (rows[worker].phase, rows[worker].node, rows[worker].gpus) == ("Pending", "", 5)
        assert "Insufficient nvidia.com/gpu" in rows[worker].message, rows[worker]
    assert "Failed" in [c.type for c in status.conditions]


def owned_node(cp, namespace: str, pod: str) -> str:
    return next(p["spec"]["nodeName"] for p in owned(cp, "pods", namespace, "mnist") if p["metadata"]["name"] == pod)


def test_status_of_an_unknown_job_is_not_found(cluster):
    backend, namespace = cluster
    with pytest.raises(NotFound, match=f"tfjob nope not found in namespace {namespace}"):
        backend.status("nope", namespace)


def test_list_one_namespace_or_all(cluster, control_plane):
    backend, namespace = cluster
    with control_plane.namespace("backend-other", wait=False) as other:
        backend.submit(manifest(name="alpha", namespace=namespace, workers=3))
        backend.submit(manifest(name="beta", namespace=other, ps=0, workers=1))
        wait_for(lambda: [(j.name, j.phase) for j in backend.list(namespace)] == [("alpha", "Running")],
                 "alpha Running", WAIT_S)
        rows = [j for j in backend.list(None) if j.namespace in (namespace, other)]
        assert sorted((j.namespace, j.name) for j in rows) == sorted([(namespace, "alpha"), (other, "beta")])
        alpha = next(j for j in rows if j.name == "alpha")
        assert alpha.replicas == {"Chief": 1, "PS": 1, "Worker": 3} and alpha.created


# ---- delete ----------------------------------------------------------------------------------
def test_delete_wait_returns_once_the_job_and_its_pods_are_gone(cluster, control_plane):
    backend, namespace = cluster
    cp = control_plane
    backend.submit(manifest(namespace=namespace))
    wait_pods(cp, namespace, "mnist", lambda ps: len(ps) == 4, "the operator's pods")
    backend.delete("mnist", namespace, wait=True)
    assert stored(cp, namespace) is None
    assert owned(cp, "pods", namespace, "mnist") == []  # Foreground: the pods go first
    with pytest.raises(NotFound):
        backend.delete("mnist", namespace)


# ---- the cluster's CRD -------------------------------------------------------------------------
def test_installed_crd_is_the_one_the_cluster_serves(cluster, control_plane):
    backend, _ = cluster
    crd = backend.installed_crd("tfjobs.kubeflow.org")
    assert crd["metadata"]["uid"] == control_plane.kubectl_json("get", "crd", "tfjobs.kubeflow.org")["metadata"]["uid"]


def test_manifest_is_the_stored_tfjob(cluster):
    backend, namespace = cluster
    job = manifest(namespace=namespace)
    backend.submit(job)
    assert backend.manifest("mnist", namespace)["spec"] == as_stored(job["spec"])
    with pytest.raises(NotFound):
        backend.manifest("ghost", namespace)



# ---- events (the watch) --------------------------------------------------------------------------
def conditions(items: list) -> list[tuple[str, str]]:
    return [(e.type, e.status) for e in items if isinstance(e, JobCondition)]


def last_phases(items: list) -> dict[str, str]:
    return {e.replica: e.phase for e in items if isinstance(e, ReplicaPhase)}


def test_a_lifecycle_reports_each_condition_once_and_ends(cluster, control_plane):
    backend, namespace = cluster
    cp = control_plane
    backend.submit(manifest(namespace=namespace, workers=2))
    events = Collector(backend.events("mnist", namespace))
    # The operator sets Running on a reconcile that sees the chief running; a chief that
    # ends before that takes the job from Created to Succeeded directly.
    events.wait_for(lambda items: list(last_phases(items).values()).count("Running") == 4
                    and ("Running", "True") in conditions(items),
                    "four Running replicas and the Running condition", WAIT_S)
    cp.finish_pod(namespace, "mnist-chief-0", 0)
    items = events.wait_done(timeout=WAIT_S)
    assert conditions(items) == [
        ("Created", "True"), ("Running", "True"), ("Running", "False"), ("Succeeded", "True")]
    assert items[-1].terminal
    chief = [e for e in items if isinstance(e, ReplicaPhase) and e.replica == "chief-0"]
    assert (chief[-1].phase, chief[-1].exit_code) == ("Succeeded", 0)
    # each replica's transitions once, through the operator's many TFJob status updates
    # (replicaStatuses, the Running condition re-set) that bring no new condition
    for replica in ("chief-0", "ps-0", "worker-0", "worker-1"):
        states = [(e.phase, e.restarts, e.node, e.exit_code, e.message) for e in items
                  if isinstance(e, ReplicaPhase) and e.replica == replica]
        assert all(a != b for a, b in zip(states, states[1:])), (replica, states)
        # Running once; a pod the operator deletes once the job succeeded (cleanPodPolicy Running) may
        # also show as Running with the message Terminating if the watch sees it before the job's end
        running = [state for state in states if state[0] == "Running" and state[4] != "Terminating"]
        assert len(running) == 1, (replica, states)


def test_a_job_deleted_while_watched_is_not_found(cluster):
    backend, namespace = cluster
    backend.submit(manifest(namespace=namespace))
    events = Collector(backend.events("mnist", namespace))
    events.wait_for(lambda items: any(isinstance(e, JobCondition) for e in items), "the first condition", WAIT_S)
    backend.delete("mnist", namespace)
    with pytest.raises(NotFound, match=f"tfjob mnist was deleted from namespace {namespace}"):
        events.wait_done(timeout=WAIT_S)


def test_events_of_an_unknown_job_are_not_found(cluster):
    backend, namespace = cluster
    with pytest.raises(NotFound, match=f"tfjob nope not found in namespace {namespace}"):
        list(backend.events("nope", namespace))


# ---- logs --------------------------------------------------------------------------------------
def test_logs_of_one_replica_or_of_all_that_started(cluster, control_plane):
    """KWOK serves k8s/kwok/replica.log as every started container's log, also a finished
    one's; the ps cannot be placed (a node selector no node has): Pending, skipped."""
    backend, namespace = cluster
    cp = control_plane
    backend.submit(manifest(namespace=namespace, workers=2, role_node_selectors={"PS": {"pool": "absent"}}))
    wait_pods(cp, namespace, "mnist", lambda ps: sum(p.get("status", {}).get("phase") == "Running" for p in ps) == 3,
              "the chief and both workers Running")
    cp.finish_pod(namespace, "mnist-worker-0", 0)  # a finished container's log is still there
    wait_pods(cp, namespace, "mnist", lambda ps: any(p["metadata"]["name"] == "mnist-worker-0" and p.get(
        "status", {}).get("phase") == "Succeeded" for p in ps), "worker-0 Succeeded")
    text = log_text()
    assert list(backend.logs("mnist", namespace, replica="worker-1")) == [LogLine("worker-1", line) for line in text]
    everything = list(backend.logs("mnist", namespace))  # ps-0 is Pending: skipped
    assert everything == [LogLine(replica, line) for replica in ("chief-0", "worker-0", "worker-1") for line in text]
    assert list(backend.logs("mnist", namespace, replica="all")) == everything


def test_logs_name_the_replicas_a_job_has(cluster):
    backend, namespace = cluster
    backend.submit(manifest(namespace=namespace, workers=2))
    with pytest.raises(SpecError, match="^--replica: tfjob mnist has no replica worker-2; "
                                        "use one of chief-0, ps-0, worker-0, worker-1 or all$"):
        list(backend.logs("mnist", namespace, replica="worker-2"))
    with pytest.raises(BackendError, match="'leader' is not a replica id"):
        list(backend.logs("mnist", namespace, replica="leader"))
    with pytest.raises(NotFound):
        list(backend.logs("other", namespace))
    with pytest.raises(NotFound):
        list(backend.logs("other", namespace, follow=True))


def test_logs_of_an_ended_job_name_the_replicas_whose_pods_went_with_it(cluster, control_plane):
    """cleanPodPolicy Running (the operator's default and the launcher's): once the chief
    succeeded, the operator deletes the ps and the workers, still running, and the kubelet's
    logs go with the pods. `logs` of all replicas shows the chief's and a note naming the
    others and why; `logs` of one of them fails with that reason instead of printing
    nothing; following does the same."""
    backend, namespace = cluster
    cp = control_plane
    notes: list[str] = []
    backend.note = notes.append
    backend.submit(manifest(namespace=namespace, workers=2))
    wait_pods(cp, namespace, "mnist", lambda ps: sum(p.get("status", {}).get("phase") == "Running" for p in ps) == 4,
              "four Running replicas")
    cp.finish_pod(namespace, "mnist-chief-0", 0)
    wait_pods(cp, namespace, "mnist", lambda ps: [p["metadata"]["name"] for p in ps] == ["mnist-chief-0"],
              "the ps and workers deleted, the chief left")
    wait_for(lambda: "Succeeded" in {c["type"] for c in tfjob(cp, namespace, "mnist")["status"].get("conditions", [])
                                     if c["status"] == "True"} or None, lambda: "the TFJob not Succeeded", WAIT_S)
    why = ("the training-operator deleted {} when the job ended (cleanPodPolicy Running deletes the pods still "
           "running then); submit with --clean-pod-policy None to keep every pod and its log")
    chief = [LogLine("chief-0", line) for line in log_text()]
    for follow in (False, True):
        notes.clear()
        assert list(backend.logs("mnist", namespace, follow=follow)) == chief
        assert notes == [f"note: ps-0, worker-0, worker-1: no log: {why.format('their pods')}"]
        with pytest.raises(BackendError) as error:
            list(backend.logs("mnist", namespace, replica="worker-1", follow=follow))
        assert str(error.value) == f"worker-1 of tfjob mnist has no log: {why.format('its pod')}"
    notes.clear()
    assert list(backend.logs("mnist", namespace, replica="chief-0")) == chief
    assert notes == []
    status = backend.status("mnist", namespace)  # what `status` lists, and which replicas it says are gone
    assert [r.replica for r in status.replicas] == ["chief-0"]
    assert (status.deleted, status.clean_pod_policy) == (("ps-0", "worker-0", "worker-1"), "Running")
