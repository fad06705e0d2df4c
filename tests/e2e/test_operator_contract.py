"""Contract of the FAKE training-operator (tests/support/fakes/operator.py) with the real one.

The same small TFJob lifecycle runs twice, with the same name in a namespace of the same
name: through the launcher's Kubernetes backend against the FAKE API server driven by
FakeOperator (as the integration tests drive it), and against the real control plane, where
training-operator v1.9.4 makes the pods and services and KWOK runs them. The launcher
renders and submits; the pods appear and run; the chief exits 0; the job Succeeds and
cleanPodPolicy Running removes the replicas still running. Compared: the TFJob as the API
server stored it (with the CRD's defaults), what the launcher relies on in what the operator
writes (pod and service names, labels, owner references,
restart policy, the TF_CONFIG env parsed, service ports and selectors), the TFJob
conditions in their order, and the conditions the launcher's watch reported. A fake that
drifts from the operator fails here.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator

import pytest

from launcher.events import JobCondition
from tests.e2e.tfjobs import owned, tfjob, wait_pods, wait_running
from tests.support.apiserver import FakeApiServer
from tests.support.fakes.operator import FakeOperator
from tests.support.k8s_backend import WAIT, Collector, manifest, watches_open
from tests.support.polling import wait_for

JOB = "contract"
REPLICAS = {"chief": 1, "ps": 1, "workers": 2}
PODS = 4
FINISH_TIMEOUT_S = 120.0
UID = "<the TFJob's uid>"


@dataclass
class Run:
    """What one operator wrote for the lifecycle, and what the launcher saw."""
    uid: str
    running_pods: list[dict]
    services: list[dict]
    pods_after: list[dict]
    conditions: list[dict]
    seen: list  # the launcher's events
    spec: dict  # the TFJob's spec as the API server stored it


def _backend(kubeconfig):
    from launcher.backends.k8s import KubernetesBackend  # the Kubernetes client loads only here

    return KubernetesBackend(kubeconfig=str(kubeconfig))


@pytest.fixture(scope="module")
def real(control_plane) -> Iterator[tuple[str, Run]]:
    cp = control_plane
    with cp.in_process(), cp.namespace("contract") as namespace:
        backend = _backend(cp.kubeconfig)
        try:
            backend.submit(manifest(name=JOB, namespace=namespace, **REPLICAS))
            events = Collector(backend.events(JOB, namespace))
            pods = wait_running(cp, namespace, JOB, PODS)
            services = owned(cp, "services", namespace, JOB)
            cp.finish_pod(namespace, f"{JOB}-chief-0", 0)
            seen = events.wait_done(timeout=FINISH_TIMEOUT_S)
            after = wait_pods(cp, namespace, JOB, lambda ps: len(ps) == 1,
                              "cleanPodPolicy Running to leave only the chief")
            job = tfjob(cp, namespace, JOB)
        finally:
            backend.close()
        yield namespace, Run(job["metadata"]["uid"], pods, services, after, job["status"]["conditions"], seen,
                             job["spec"])


@pytest.fixture(scope="module")
def fake(real, tmp_path_factory) -> Iterator[Run]:
    namespace = real[0]
    server = FakeApiServer(namespaces=(namespace,)).start()
    backend = None
    try:
        operator = FakeOperator(server, namespace)
        backend = _backend(server.write_kubeconfig(tmp_path_factory.mktemp("contract") / "kubeconfig"))
        backend.submit(manifest(name=JOB, namespace=namespace, **REPLICAS))
        events = Collector(backend.events(JOB, namespace))
        wait_for(lambda: watches_open(server, JOB), "the launcher's watches", WAIT)
        names = operator.create_pods(JOB)
        for pod in names:
            operator.start(pod)
        operator.set_condition(JOB, "Running")
        pods = [server.get("pods", namespace, pod) for pod in names]
        services = [server.get("services", namespace, pod) for pod in names]
        operator.exit(f"{JOB}-chief-0", 0)
        operator.set_condition(JOB, "Succeeded")
        for pod in names:  # cleanPodPolicy Running
            if server.get("pods", namespace, pod)["status"]["phase"] == "Running":
                operator.delete_pod(pod)
        seen = events.wait_done()
        after = [p for p in (server.get("pods", namespace, pod) for pod in names) if p]
        job = server.get("tfjobs", namespace, JOB)
        yield Run(job["metadata"]["uid"], pods, services, after, job["status"]["conditions"], seen, job["spec"])
    finally:
        if backend is not None:
            backend.close()
        server.stop()


@pytest.fixture(scope="module")
def runs(real, fake) -> tuple[Run, Run]:
    return fake, real[1]


# ---- what is compared ----------------------------------------------------------------------
def _owners(obj: dict, uid: str) -> list[dict]:
    return [{**o, "uid": UID if o["uid"] == uid else o["uid"]} for o in obj["metadata"].get("ownerReferences", [])]


def _env(container: dict) -> list[tuple[str, object]]:
    return [(e["name"], json.loads(e["value"]) if e["name"] == "TF_CONFIG" else e.get("value"))
            for e in container.get("env") or []]


def pod_view(pod: dict, uid: str) -> dict:
    return {"labels": pod["metadata"]["labels"], "ownerReferences": _owners(pod, uid),
            "restartPolicy": pod["spec"]["restartPolicy"],
            "containers": {c["name"]: _env(c) for c in pod["spec"]["containers"]}}


def service_view(service: dict, uid: str) -> dict:
    spec = service["spec"]
    return {"labels": service["metadata"]["labels"], "ownerReferences": _owners(service, uid),
            "clusterIP": spec["clusterIP"], "selector": spec["selector"],
            "ports": sorted((p.get("name"), p["port"]) for p in spec["ports"])}


def by_name(objects: list[dict], view, uid: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: view(o, uid) for o in objects}


def test_the_stored_tfjob_has_the_apiservers_defaults(runs):
    fake, real = runs
    assert fake.spec == real.spec
    assert real.spec["runPolicy"]["suspend"] is False


def test_pod_names_are_the_operators(runs):
    fake, real = runs
    assert sorted(by_name(fake.running_pods, pod_view, fake.uid)) == sorted(by_name(real.running_pods, pod_view, real.uid))
    assert len(real.running_pods) == PODS


@pytest.mark.parametrize("part", ["labels", "ownerReferences", "restartPolicy", "containers"])
def test_each_pod_has_the_operators(runs, part):
    """`containers`: each container's env in order, TF_CONFIG parsed."""
    fake, real = runs
    fakes, reals = (by_name(r.running_pods, pod_view, r.uid) for r in (fake, real))
    for name in reals:
        assert fakes[name][part] == reals[name][part], name


def test_tf_config_task_and_cluster_follow_the_operator(runs):
    """Spelled out, so a change in both at once still shows: the operator's own form."""
    _, real = runs
    for pod in real.running_pods:
        env = dict(_env(next(c for c in pod["spec"]["containers"] if c["name"] == "tensorflow")))
        config = env["TF_CONFIG"]
        assert config["environment"] == "cloud"
        assert sorted(config["cluster"]) == ["chief", "ps", "worker"]
        assert pod["metadata"]["name"] == f"{JOB}-{config['task']['type']}-{config['task']['index']}"


def test_services_are_the_operators(runs):
    fake, real = runs
    assert by_name(fake.services, service_view, fake.uid) == by_name(real.services, service_view, real.uid)


def test_conditions_come_in_the_operators_order(runs):
    fake, real = runs

    def view(conditions):
        return [(c["type"], c["status"], c.get("reason"), c.get("message")) for c in conditions]

    assert view(fake.conditions) == view(real.conditions)
    assert [c["type"] for c in real.conditions] == ["Created", "Running", "Succeeded"]


def test_the_launcher_sees_the_same_conditions(runs):
    fake, real = runs

    def view(events):
        return [(e.type, e.status, e.reason) for e in events if isinstance(e, JobCondition)]

    assert view(fake.seen) == view(real.seen)
    assert [kind for kind, status, _ in view(real.seen) if status == "True"] == ["Created", "Running", "Succeeded"]


def test_clean_pod_policy_leaves_the_same_pods(runs):
    fake, real = runs

    def view(pods):
        return sorted((p["metadata"]["name"], p["status"]["phase"]) for p in pods)

    assert view(fake.pods_after) == view(real.pods_after) == [(f"{JOB}-chief-0", "Succeeded")]

