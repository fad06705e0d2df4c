"""TF_CONFIG follows training-operator v1.9 (pkg/controller.v1/tensorflow) byte for byte."""
import json

from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec
from launcher.tfconfig import cluster_spec, replicas, tf_config


def job(replicas_, name="mnist", namespace="team-a"):
    return render(JobSpec(name=name, namespace=namespace, replicas=replicas_))


def test_worker_config_matches_operator_format_exactly():
    tfjob = job({"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1), "Worker": ReplicaSpec(2)})
    assert tf_config(tfjob, "Worker", 1) == (
        '{"cluster":{"chief":["mnist-chief-0.team-a.svc:2222"],'
        '"ps":["mnist-ps-0.team-a.svc:2222"],'
        '"worker":["mnist-worker-0.team-a.svc:2222","mnist-worker-1.team-a.svc:2222"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}')


def test_evaluator_is_not_in_the_cluster_but_gets_a_task():
    tfjob = job({"Chief": ReplicaSpec(1), "Worker": ReplicaSpec(1), "Evaluator": ReplicaSpec(1)})
    config = json.loads(tf_config(tfjob, "Evaluator", 0))
    assert set(config["cluster"]) == {"chief", "worker"}
    assert config["task"] == {"type": "evaluator", "index": 0}


def test_single_replica_job_gets_no_tf_config():
    assert tf_config(job({"Worker": ReplicaSpec(1)}), "Worker", 0) is None


def test_address_function_maps_hosts_for_local_runs():
    tfjob = job({"Chief": ReplicaSpec(1), "PS": ReplicaSpec(2), "Worker": ReplicaSpec(1)})
    ports = {("chief", 0): 5000, ("ps", 0): 5001, ("ps", 1): 5002, ("worker", 0): 5003}
    cluster = cluster_spec(tfjob, lambda rt, i: f"127.0.0.1:{ports[(rt, i)]}")
    assert cluster == {"chief": ["127.0.0.1:5000"], "ps": ["127.0.0.1:5001", "127.0.0.1:5002"],
                       "worker": ["127.0.0.1:5003"]}


def test_replicas_enumerates_every_index_in_manifest_order():
    tfjob = job({"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1), "Worker": ReplicaSpec(2)})
    assert list(replicas(tfjob)) == [("Chief", 0), ("PS", 0), ("Worker", 0), ("Worker", 1)]
