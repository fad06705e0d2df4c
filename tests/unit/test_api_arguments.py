"""launcher.api.TrainingClient refuses what the CLI refuses, before anything is submitted:
the backend's cluster arguments with the local backend, the submit checks (claims on this
machine, a package path that is not there), and a wait's conditions and bound that the
wait would misread (a bare string read as its letters, a negative bound). Backends here
are test doubles (FakeBackend) or the real local backend, which starts nothing."""
from __future__ import annotations

import pytest

from launcher.api import TrainingClient
from launcher.backends import get_backend
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
    (lambda c: c.wait_for_job("mnist", timeout=-5), r"^timeout: -5 is not a number of seconds"),
    (lambda c: c.wait_for_job_conditions("mnist", expected_conditions="Succeeded"),
     r"^expected_conditions: 'Succeeded' is a string"),
    (lambda c: c.wait_for_job_conditions("mnist", wait_timeout="2"), r"^wait_timeout: '2' is not a number"),
    (lambda c: c.wait_for_job_conditions("mnist", callback="x"), r"^callback: 'x' is not callable"),
])
def test_a_wait_refuses_arguments_it_would_misread_before_reading_the_job(call, message):
    backend = FakeBackend(events=lifecycle("Succeeded"), existing=("mnist",))
    with pytest.raises(ValueError, match=message):
        call(TrainingClient(backend=backend))
