"""`launcher submit` of a 1 chief + 1 ps + 4 GPU worker job against the real control plane:
the apiserver accepts the TFJob (CRD schema), training-operator makes the pods, services
and TF_CONFIG, the scheduler places the replicas, the watch follows it to Succeeded, and
cleanPodPolicy Running removes the replicas still running at the end."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator

import pytest

from launcher.tfconfig import tf_config
from tests.support.launcher_process import launcher_process
from tests.e2e.tfjobs import (condition_sequence, owned, replica_key, tfjob, wait_pods,
                              wait_running)

JOB = "mnist-e2e"
ACCELERATOR = "nvidia-tesla-t4"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
FINISH_TIMEOUT_S = 120.0


@dataclass
class JobRun:
    namespace: str
    tfjob: dict  # as the server held it while running
    running_pods: list[dict]
    services: list[dict]
    nodes: dict[str, dict]  # name -> labels
    exit_code: int
    output: str
    pods_after: list[dict]


@pytest.fixture(scope="module")
def job_run(control_plane) -> Iterator[JobRun]:
    cp = control_plane
    with cp.namespace("e2e-submit") as namespace:
        args = ("submit", "--backend", "k8s", "-n", namespace, "--name", JOB, "--workers", "4", "--ps", "1",
                "--chief", "1", "--gpus-per-worker", "1", "--accelerator", ACCELERATOR, "--", "--train-steps", "20")
        with launcher_process(cp, *args) as launcher:
            pods = wait_running(cp, namespace, JOB, 6)
            job = tfjob(cp, namespace, JOB)
            services = owned(cp, "services", namespace, JOB)
            nodes = {n["metadata"]["name"]: n["metadata"].get("labels", {})
                     for n in cp.kubectl_json("get", "nodes")["items"]}
            # the launcher's watch caught up before the job ends (a first list after the end shows Running False)
            launcher.wait_for_line(f"{JOB}: Running (", FINISH_TIMEOUT_S)
            cp.finish_pod(namespace, f"{JOB}-chief-0", 0)
            exit_code = launcher.wait(FINISH_TIMEOUT_S)
        after = wait_pods(cp, namespace, JOB, lambda ps: len(ps) == 1,
                          "cleanPodPolicy Running to leave only the chief")
        yield JobRun(namespace, job, pods, services, nodes, exit_code, launcher.output, after)


def test_apiserver_accepted_the_tfjob(job_run):
    spec = job_run.tfjob["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in spec.items()} == {"Chief": 1, "PS": 1, "Worker": 4}
    assert job_run.tfjob["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"


def test_operator_made_six_pods_and_six_headless_services(job_run):
    expected = {("chief", 0), ("ps", 0), *(("worker", i) for i in range(4))}
    assert sorted(map(replica_key, job_run.running_pods)) == sorted(expected)
    assert sorted(map(replica_key, job_run.services)) == sorted(expected)
    for service in job_run.services:
        assert service["spec"]["clusterIP"] == "None", service["metadata"]["name"]
        assert [p["port"] for p in service["spec"]["ports"]] == [2222]


def test_tf_config_is_what_launcher_tfconfig_computes(job_run):
    types = {rtype.lower(): rtype for rtype in job_run.tfjob["spec"]["tfReplicaSpecs"]}
    for pod in job_run.running_pods:
        rtype, index = replica_key(pod)
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env", [])}
        expected = tf_config(job_run.tfjob, types[rtype], index)
        assert env.get("TF_CONFIG") == expected, pod["metadata"]["name"]
        assert json.loads(env["TF_CONFIG"])["task"] == {"type": rtype, "index": index}


def test_scheduler_puts_gpu_workers_on_the_gpu_node_and_ps_on_cpu_nodes(job_run):
    placement = {replica_key(p): p["spec"]["nodeName"] for p in job_run.running_pods}
    for (rtype, index), node in placement.items():
        on_gpu_node = job_run.nodes[node].get(ACCELERATOR_LABEL) == ACCELERATOR
        assert on_gpu_node == (rtype == "worker"), f"{rtype}-{index} on {node}"
    workers = [p for p in job_run.running_pods if replica_key(p)[0] == "worker"]
    assert all(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1" for p in workers)


def test_watch_reports_created_running_succeeded_and_exits_0(job_run):
    assert condition_sequence(job_run.output, JOB) == ["Created", "Running", "Succeeded"], job_run.output
    assert job_run.exit_code == 0, job_run.output


def test_clean_pod_policy_running_removes_the_running_replicas(job_run):
    (chief,) = job_run.pods_after
    assert replica_key(chief) == ("chief", 0)
    assert chief["status"]["phase"] == "Succeeded"
