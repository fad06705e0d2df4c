"""launcher.api.TrainingClient refuses what the CLI refuses, before anything is submitted:
the backend's cluster arguments with the local backend, the submit checks (claims on this
machine, a package path that is not there), a job's name, namespace and replica as the
CLI's NAME, -n and --replica (gcloud's master-N read as chief-N), and a wait's conditions
and bound that the wait would misread (a bare string read as its letters, a negative
bound). Backends here are test doubles (FakeBackend) or the real local backend, which
starts nothing."""
from __future__ import annotations

import dataclasses
import pytest

from launcher.api import TrainingClient
from launcher.backends import get_backend
from launcher.events import LogLine
from launcher.spec import JobSpec, ReplicaSpec, SpecError, Volume
from tests.support.fakes.backend import FakeBackend, lifecycle


def test_the_cluster_arguments_are_refused_with_the_local_backend_and_choose_the_cluster_with_auto():
    with pytest.raises(SpecError, match=r"^kubeconfig: selects a cluster, which the local backend does not use"):
        get_backend("local", kubeconfig="/tmp/kubeconfig")
    with pytest.raises(SpecError, match=r"^context: "):
        get_backend("local", context="gke")
    with pytest.raises(SpecError, match=r"^request_timeout: "):
        get_backend("local", request_timeout=5)
    with pytest.raises(SpecError, match=r"^request_timeout: "):
        get_backend("k8s", request_timeout=-1)


@pytest.mark.parametrize("fields, field", [
    ({"volumes": (Volume("data", "/mnt/data"),)}, "--volume"),  # a claim exists only on a cluster: was dropped
    ({"module_name": "mytrainer.task", "package_path": "/nonexistent/mytrainer"}, "--package-path"),
])
def test_create_job_refuses_what_submit_refuses_and_starts_nothing(tmp_path, monkeypatch, fields, field):
    monkeypatch.setenv("TFJOB_RUNS_DIR", str(tmp_path / "runs"))
    client = TrainingClient(backend="local")
    with pytest.raises(SpecError) as caught:
        client.create_job(JobSpec(name="refused", replicas={"Worker": ReplicaSpec(1)}, **fields))
    assert caught.value.field == field
    assert client.list_jobs(None) == []


@pytest.mark.parametrize("call, message", [
    (lambda c: c.wait_for_job("mnist", conditions="Running"), r"^conditions: 'Running' is a string; give a set"),
    (lambda c: c.wait_for_job("mnist", conditions=("Done",)), r"^conditions: \['Done'\]; use some of"),
    (lambda c: c.wait_for_job("mnist", conditions=5), r"^conditions: 5 is not a set of condition names"),
    (lambda c: c.wait_for_job_conditions("mnist", expected_conditions={1, "Succeeded"}),
     r"^expected_conditions: \{.*\} is not a set of condition names"),  # a TypeError from sorting, it was
    (lambda c: c.wait_for_job("mnist", timeout=-5), r"^timeout: -5 is not a number of seconds"),
    (lambda c: c.wait_for_job_conditions("mnist", expected_conditions="Succeeded"),
     r"^expected_conditions: 'Succeeded' is a string"),
    (lambda c: c.wait_for_job_conditions("mnist", wait_timeout="2"), r"^wait_timeout: '2' is not a number"),
    (lambda c: c.wait_for_job_conditions("mnist", callback="x"), r"^callback: 'x' is not callable"),
])
def test_a_wait_refuses_arguments_it_would_misread_before_reading_the_job(call, message):
    """SpecError, as every other refusal of the API: a ValueError, as the Kubeflow SDK's."""
    backend = FakeBackend(events=lifecycle("Succeeded"), existing=("mnist",))
    with pytest.raises(SpecError, match=message) as caught:
        call(TrainingClient(backend=backend))
    assert isinstance(caught.value, ValueError) and caught.value.field == message[1:].split(":")[0]


def test_conditions_given_as_a_generator_are_read_once():
    """The check of the names read a generator, and the wait then found none given."""
    backend = FakeBackend(events=lifecycle("Succeeded"), existing=("mnist",))
    status = TrainingClient(backend=backend).wait_for_job_conditions(
        "mnist", expected_conditions=(name for name in ("Succeeded",)))
    assert status.phase == "Succeeded"


class Unasked(FakeBackend):
    """A FakeBackend that fails the test when a job is read, listed or deleted."""

    def status(self, name, namespace):
        raise AssertionError(f"status({name!r}, {namespace!r}) asked of the backend")

    def list(self, namespace):
        raise AssertionError(f"list({namespace!r}) asked of the backend")

    def events(self, name, namespace, stop=None):
        raise AssertionError(f"events({name!r}, {namespace!r}) asked of the backend")

    def logs(self, name, namespace, replica=None, follow=False, options=None, ends=False):
        raise AssertionError(f"logs({name!r}, {namespace!r}, {replica!r}) asked of the backend")

    def delete(self, name, namespace, wait=False):
        raise AssertionError(f"delete({name!r}, {namespace!r}) asked of the backend")


@pytest.mark.parametrize("call, message", [
    (lambda c: c.list_jobs(namespace="Bad_NS"), "namespace: 'Bad_NS' is not a valid namespace; use lowercase "
                                                "letters, digits, '-'"),
    (lambda c: c.get_job("mnist", namespace=""), "namespace: '' is not a valid namespace; use lowercase letters, "
                                                 "digits, '-'"),
    (lambda c: c.get_job("Mnist"), "name: 'Mnist' is not a TFJob name; use the name shown by "
                                   "`python -m launcher list`"),
    (lambda c: c.get_job("census_1"), "name: 'census_1' is a Cloud ML job id; its TFJob is named census-1 (submit "
                                      "turns '_' into '-' and capitals into lower case)"),
    (lambda c: c.get_job(None), "name: None; use a string, e.g. 'mnist-ps'"),
    (lambda c: c.events("mnist", namespace=5), "namespace: 5 is an int; use a string, e.g. 'default'"),
    (lambda c: c.wait_for_job("a" * 64), f"name: {'a' * 64!r} is not a TFJob name; use the name shown by "
                                         "`python -m launcher list`"),
    (lambda c: c.wait_for_job_conditions("mnist", namespace="Training"),
     "namespace: 'Training' is not a valid namespace; use lowercase letters, digits, '-'"),
    (lambda c: c.delete_job("mnist/x"), "name: 'mnist/x' is not a TFJob name; use the name shown by "
                                        "`python -m launcher list`"),
    (lambda c: c.get_job_logs("mnist", replica="chief"),
     "replica: 'chief' is not a replica; use e.g. chief-0, ps-0, worker-1 or all"),
    (lambda c: c.get_job_logs("mnist", replica="Worker-1"),
     "replica: 'Worker-1' is not a replica; use e.g. chief-0, ps-0, worker-1 or all"),
    (lambda c: c.get_job_logs("mnist", follow="false"), "follow: 'false' is a str; use True or False"),
    (lambda c: c.delete_job("mnist", wait=1), "wait: 1 is an int; use True or False"),
])
def test_the_read_calls_check_a_job_as_the_cli_does_before_asking_the_backend(call, message):
    with pytest.raises(SpecError) as refused:
        call(TrainingClient(backend=Unasked(existing=("mnist",))))
    assert str(refused.value) == message


def test_logs_read_gcloud_master_as_the_chief_and_all_as_every_replica():
    backend = FakeBackend(logs={"chief-0": ["step 1"], "worker-0": ["step 2"]}, existing=("mnist",))
    client = TrainingClient(backend=backend)
    assert list(client.get_job_logs("mnist", replica="master-0")) == [LogLine("chief-0", "step 1")]
    assert list(client.get_job_logs("mnist", replica="all")) == [LogLine("chief-0", "step 1"),
                                                                 LogLine("worker-0", "step 2")]
    assert backend.log_requests == [("mnist", "chief-0", False), ("mnist", None, False)]


def test_create_job_refuses_replace_that_is_not_a_bool_and_submits_nothing():
    backend = FakeBackend(existing=("mnist",))
    with pytest.raises(SpecError, match=r"^replace: 'false' is a str; use True or False$"):
        TrainingClient(backend=backend).create_job(JobSpec(name="mnist", replicas={"Worker": ReplicaSpec(1)}),
                                                   replace="false")
    assert backend.submitted == []


@pytest.mark.usefixtures("cli_env")  # data dirs holding a train-* file: the local checks pass
def test_create_job_on_the_local_backend_says_what_it_ignores_naming_the_fields():
    """submit's notes (one local_notes for both), in JobSpec's words; before, the API said nothing."""
    from launcher.spec import RunPolicy

    spec = JobSpec(name="mnist", replicas={"Chief": ReplicaSpec(1, cpu="2"), "Worker": ReplicaSpec(1)},
                   queue_name="team-a", node_selector={"pool": "a"}, run_policy=RunPolicy(ttl_seconds_after_finished=60))
    lines, backend = [], FakeBackend(name="local")
    TrainingClient(backend=backend, note=lines.append).create_job(spec)
    assert lines == [
        "note: CPU and memory requests are ignored by the local backend (replicas share this machine's cores and "
        "memory)",
        "note: queue_name, node_selector/role_node_selectors are ignored by the local backend (it starts every "
        "replica at once, as your processes on this machine, without Istio; the chief decides success)",
        "note: run_policy.ttl_seconds_after_finished is ignored by the local backend (a finished job stays until "
        "`delete`)"]
    assert len(backend.submitted) == 1
    lines = []  # as submit's: the local jobs already running, which the new one's replicas share the cores with
    TrainingClient(backend=FakeBackend(name="local", existing=("other",)), note=lines.append).create_job(spec)
    assert lines[-1].startswith("note: local job other also runs here: the jobs share this machine's "), lines
    lines = lines[:-1]
    with pytest.warns(UserWarning) as caught:
        TrainingClient(backend=FakeBackend(name="local")).create_job(spec)  # the default: a warning each
    assert [str(w.message) for w in caught] == [line.removeprefix("note: ") for line in lines]
    assert {w.filename for w in caught} == {__file__}  # the caller's line
    on_cluster = dataclasses.replace(spec, trainer_args=("--data-dir", "gs://bkt/data/mnist"))  # records pods can read
    TrainingClient(backend=FakeBackend(name="k8s"), note=lambda line: pytest.fail(line)).create_job(on_cluster)
    lines = []
    TrainingClient(backend=FakeBackend(name="k8s"), note=lines.append).create_job(spec)  # data/mnist in each pod
    assert len(lines) == 1 and lines[0].startswith("note: the default data dir ($MNIST_DATA_DIR or data/mnist) "
                                                   "'data/mnist' is inside each pod") \
        and lines[0].endswith("or give a volume (JobSpec.volumes) that holds them"), lines
    with pytest.raises(SpecError, match=r"^note: 'quiet' is not callable"):
        TrainingClient(backend=FakeBackend(name="local"), note="quiet")


def test_the_backends_own_notes_reach_note_in_the_apis_words(tmp_path, monkeypatch):
    """auto choosing this machine (and the backend's other notes: replicas not isolated, logs
    a cluster no longer has) were dropped: a notebook expecting its cluster heard nothing."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("TFJOB_RUNS_DIR", str(tmp_path / "runs"))
    lines = []
    assert TrainingClient(note=lines.append).backend.name == "local"
    assert lines == ['No Kubernetes cluster configured; using this machine (local backend). Use backend="k8s" to '
                     'force the cluster.']
    with pytest.warns(UserWarning, match=r'^No Kubernetes cluster configured; .* Use backend="k8s"'):
        TrainingClient()


def test_a_package_path_under_a_mount_given_with_doubled_slashes_is_in_the_pods():
    """The package path is kept without doubled slashes: the mount it lies under is compared so too."""
    backend = FakeBackend(name="k8s")
    spec = JobSpec(name="own", replicas={"Worker": ReplicaSpec(1)}, module_name="trainer.task",
                   package_path="/mnt//code/trainer", volumes=[Volume("code", "/mnt//code/")])
    TrainingClient(backend=backend).create_job(spec)
    assert len(backend.submitted) == 1


@pytest.mark.parametrize("call, message", [
    (lambda c: c.wait_for_job_conditions("mnist", polling_interval=5),
     "polling_interval: 5 is the Kubeflow SDK's and not taken here; the launcher watches the job instead of polling "
     "it; leave polling_interval out"),
    (lambda c: c.wait_for_job_conditions("mnist", timeout=120),
     "timeout: 120 is the Kubeflow SDK's and not taken here; give TrainingClient(request_timeout=SECONDS) to bound "
     "each request"),
    (lambda c: c.wait_for_job_conditions("mnist", "default", {"Running"}),  # the order before job_kind
     "job_kind: {'Running'} is not served here, which runs TFJobs only; give 'TFJob' or leave job_kind out; "
     "job_kind is the third parameter, as in the Kubeflow SDK: give expected_conditions= by name"),
    (lambda c: c.get_job("mnist", job_kind="PyTorchJob"),
     "job_kind: 'PyTorchJob' is not served here, which runs TFJobs only; give 'TFJob' or leave job_kind out"),
    (lambda c: c.list_jobs(timeout=10), "timeout: 10 is the Kubeflow SDK's and not taken here; give "
                                        "TrainingClient(request_timeout=SECONDS) to bound each request"),
    (lambda c: c.get_job_logs("mnist", is_master=False),
     "is_master: False is the Kubeflow SDK's and not taken here; give replica='chief-0' for the chief's log, or "
     "replica=None for every replica"),
    (lambda c: c.get_job_logs("mnist", replica_type="worker", replica_index=0),
     "replica_type: 'worker' is the Kubeflow SDK's and not taken here; give replica='worker-0' (type and index in "
     "one name), or replica=None for every replica"),
    (lambda c: c.get_job_logs("mnist", verbose=True), "verbose: True is the Kubeflow SDK's and not taken here; the "
                                                      "job's events are client.events(name); leave verbose out"),
    (lambda c: c.delete_job("mnist", delete_options={"gracePeriodSeconds": 0}),
     "delete_options: {'gracePeriodSeconds': 0} is the Kubeflow SDK's and not taken here; the launcher deletes as "
     "`launcher delete` does (wait=True: until the replicas are gone); leave delete_options out"),
    (lambda c: c.create_job(name="mnist", base_image="img", num_workers=2),
     "name: the Kubeflow SDK's create_job parameter is not taken here; give a launcher.spec.JobSpec as spec (name, "
     "namespace, image, replicas, env, ...)"),
    (lambda c: c.create_job({"kind": "TFJob"}), "spec: dict is not a JobSpec; give launcher.spec.JobSpec(name=..., "
                                                "replicas=...) (a TFJob object or dict is not taken)"),
    (lambda c: TrainingClient(backend=c.backend, namespace="team-a"),
     "namespace: 'team-a' is the Kubeflow SDK's and not taken here; give namespace= to each call (default: "
     "'default')"),
    (lambda c: TrainingClient(backend=c.backend, config_file="/k/config"),
     "config_file: '/k/config' is the Kubeflow SDK's and not taken here; give kubeconfig=PATH"),
])
def test_the_kubeflow_sdks_parameters_that_mean_nothing_here_are_refused_naming_the_alternative(call, message):
    """A TypeError (unexpected keyword argument) or an AttributeError from a dict, they were;
    the wait's old order read the SDK's job_kind as the conditions."""
    backend = Unasked(existing=("mnist",))
    with pytest.raises(SpecError) as refused:
        call(TrainingClient(backend=backend))
    assert str(refused.value) == message
    assert backend.submitted == []


def test_the_kubeflow_sdks_calls_with_job_kind_tfjob_in_its_order_are_taken():
    backend = FakeBackend(events=lifecycle("Succeeded"), existing=("mnist",))
    client = TrainingClient(backend=backend, job_kind="TFJob")
    assert client.get_job("mnist", "default", "TFJob").phase == "Succeeded"
    assert [job.name for job in client.list_jobs("default", "TFJob")] == ["mnist"]
    assert client.wait_for_job_conditions("mnist", "default", "TFJob", {"Succeeded"}, 60).phase == "Succeeded"
    assert list(client.get_job_logs("mnist", job_kind="TFJob")) == []
    client.delete_job("mnist", "default", "TFJob", None)
    assert backend.deleted == [("mnist", "default", False)]


def test_wait_for_job_conditions_is_a_runtime_error_for_a_failed_job_whose_expected_condition_also_holds():
    """As the SDK, which looks at Failed first: Created stays True on a Failed TFJob, and the
    wait returned the Failed job as reaching Created."""
    client = TrainingClient(backend=FakeBackend(events=lifecycle("Failed"), existing=("mnist",)))
    with pytest.raises(RuntimeError, match=r"^tfjob mnist in default Failed \(TFJobFailed: job failed\) before "
                                           r"Created$"):
        client.wait_for_job_conditions("mnist", expected_conditions={"Created"})
    assert client.wait_for_job_conditions("mnist", expected_conditions={"Created", "Failed"}).phase == "Failed"
