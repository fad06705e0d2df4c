"""JobSpec rules: every bad value is refused with the field that names the flag."""
import pytest

from launcher.spec import JobSpec, ReplicaSpec, RunPolicy, SpecError


def ps_job(**kw):
    replicas = kw.pop("replicas", {"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1), "Worker": ReplicaSpec(2)})
    return JobSpec(name=kw.pop("name", "mnist"), replicas=replicas, **kw)


@pytest.mark.parametrize("kwargs, field", [
    ({"name": "Bad_Name"}, "--name"),
    ({"name": "1starts-with-digit"}, "--name"),
    ({"name": "ends-with-"}, "--name"),
    ({"name": "a" * 60}, "--name"),
    ({"namespace": "No"}, "--namespace"),
    ({"replicas": {"Worker": ReplicaSpec(-1)}}, "--workers"),
    ({"replicas": {"Worker": ReplicaSpec(0)}}, "--workers"),
    ({"replicas": {"PS": ReplicaSpec(1), "Worker": ReplicaSpec(2)}}, "--chief"),
    ({"replicas": {"Chief": ReplicaSpec(2)}}, "--chief"),
    ({"replicas": {"Chief": ReplicaSpec(1), "Evaluator": ReplicaSpec(2)}}, "--evaluator"),
    ({"replicas": {"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1, gpus=1)}}, "--gpus-per-ps"),
    ({"replicas": {"Worker": ReplicaSpec(1, gpus=-1)}}, "--gpus-per-worker"),
    ({"replicas": {"Worker": ReplicaSpec(1, cpu="two")}}, "--cpu worker="),
    ({"replicas": {"Worker": ReplicaSpec(1, memory="4 GB")}}, "--memory worker="),
    ({"restart_policy": "Sometimes"}, "--restart-policy"),
    ({"run_policy": RunPolicy(clean_pod_policy="Some")}, "--clean-pod-policy"),
    ({"run_policy": RunPolicy(backoff_limit=-1)}, "--backoff-limit"),
    ({"run_policy": RunPolicy(ttl_seconds_after_finished=-5)}, "--ttl-seconds"),
    ({"image": "has space"}, "--image"),
    ({"accelerator": "nvidia-tesla-t4"}, "--accelerator"),
    ({"node_selector": {"bad key!": "x"}}, "--node-selector"),
    ({"labels": {"team": "a: b"}}, "--label"),
    ({"env": {"TF_CONFIG": "{}"}}, "--env"),
    ({"env": {"1=2": "x"}}, "--env"),
    ({"job_dir": "gs://"}, "--job-dir"),
    ({"job_dir": "s3://bucket/x"}, "--job-dir"),
    ({"job_dir": "gs://B/x"}, "--job-dir"),
    ({"service_account": "Not Valid"}, "--service-account"),
])
def test_bad_values_name_the_field(kwargs, field):
    with pytest.raises(SpecError) as err:
        ps_job(**kwargs)
    assert err.value.field == field
    assert str(err.value).startswith(field)
    assert "\n" not in str(err.value)


def test_gpu_replicas_get_selector_toleration_and_limits_ps_do_not():
    spec = ps_job(replicas={"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1), "Worker": ReplicaSpec(2, gpus=2)},
                  accelerator="nvidia-tesla-t4", node_selector={"pool": "train"})
    assert spec.replica_node_selector("Worker") == {"pool": "train",
                                                   "cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    assert spec.replica_node_selector("PS") == {"pool": "train"}
    assert spec.replica_tolerations("Worker") == [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                   "effect": "NoSchedule"}]
    assert spec.replica_tolerations("PS") == []
    assert spec.replica_resources("Worker") == {"limits": {"nvidia.com/gpu": "2"}}
    assert spec.replica_resources("PS") == {}


def test_roles_are_ordered_and_zero_counts_inactive():
    spec = ps_job(replicas={"Worker": ReplicaSpec(2), "Evaluator": ReplicaSpec(0), "Chief": ReplicaSpec(1)})
    assert list(spec.replicas) == ["Chief", "Worker", "Evaluator"]
    assert spec.active_roles() == ["Chief", "Worker"]


def test_job_dir_goes_first_in_container_args():
    spec = ps_job(job_dir="gs://my-bucket/run1", trainer_args=("--train-steps", "5"))
    assert spec.container_args() == ["--job-dir", "gs://my-bucket/run1", "--train-steps", "5"]


def test_spec_is_immutable():
    spec = ps_job(env={"A": "1"})
    with pytest.raises(TypeError):
        spec.env["B"] = "2"
