"""`serve --backend k8s` against the real apiserver with KServe v0.20's InferenceService
CRD installed (the packaged copy): the server checks the InferenceService with its own
schema, accepts it, `models list` and `models delete` see it. No KServe controller runs
here, so nothing becomes Ready: `serve` without --no-wait times out saying so."""
from __future__ import annotations

import pytest
import yaml

from launcher import schemas
from tests.support.launcher_process import run_launcher
from tests.support.controlplane.procs import has_condition, wait_until
from tests.support.polling import wait_for

EXPORT = "gs://bucket/runs/mnist-1/export"
CRD_NAME = "inferenceservices.serving.kserve.io"
GONE_S = 60.0  # the garbage collector, on a loaded machine


@pytest.fixture(scope="module")
def kserve_crd(control_plane):
    """KServe's InferenceService CRD on the control plane (once; left for later tests)."""
    if control_plane.kubectl("get", f"crd/{CRD_NAME}", check=False).returncode != 0:
        # create, not apply: the 1.9 MB CRD is larger than apply's last-applied annotation may be
        control_plane.kubectl("create", "-f", str(schemas.packaged_path("inferenceservice")))
    wait_until("InferenceService CRD Established", lambda: has_condition(
        control_plane.kubectl_json("get", f"crd/{CRD_NAME}"), "Established"), control_plane.procs, "kube-apiserver")
    return control_plane


def serve(cp, namespace: str, *flags: str, name: str = "mnist"):
    return run_launcher(cp, "serve", name, "--backend", "k8s", "-n", namespace, "--model-dir", EXPORT, *flags)


def test_server_dry_run_is_accepted_and_creates_nothing(kserve_crd):
    with kserve_crd.namespace("e2e-serve") as namespace:
        for flags in ((), ("--runtime-image", "tfjob-trainer:0.1.0", "--service-account", "default")):
            result = serve(kserve_crd, namespace, "--dry-run=server", *flags)
            assert result.returncode == 0, result.stdout + result.stderr
            assert yaml.safe_load(result.stdout)["metadata"]["namespace"] == namespace  # the server's copy
        assert kserve_crd.kubectl_json("get", "inferenceservices", "-n", namespace)["items"] == []


def test_created_listed_and_deleted(kserve_crd):
    with kserve_crd.namespace("e2e-serve") as namespace:
        result = serve(kserve_crd, namespace, "--no-wait", "--service-account", "default")
        assert result.returncode == 0, result.stdout + result.stderr
        stored = kserve_crd.kubectl_json("get", "inferenceservice", "mnist", "-n", namespace)
        assert stored["spec"]["predictor"]["model"]["storageUri"] == EXPORT
        assert stored["spec"]["predictor"]["model"]["modelFormat"] == {"name": "tensorflow"}

        again = serve(kserve_crd, namespace, "--no-wait")
        assert again.returncode == 1 and "already exists" in again.stderr

        listed = run_launcher(kserve_crd, "models", "list", "--backend", "k8s", "-n", namespace)
        assert listed.returncode == 0, listed.stderr
        rows = [line.split() for line in listed.stdout.splitlines()]
        assert rows[0] == ["NAME", "NAMESPACE", "URL", "READY", "AGE"]
        assert rows[1][:2] == ["mnist", namespace]

        deleted = run_launcher(kserve_crd, "models", "delete", "mnist", "--backend", "k8s", "-n", namespace)
        assert deleted.returncode == 0 and "inferenceservice mnist deleted" in deleted.stdout, deleted.stderr
        # without --wait, delete returns once the server accepted it (as kubectl delete
        # --wait=false): the garbage collector removes the object after its foreground finalizer
        wait_for(lambda: kserve_crd.kubectl_json("get", "inferenceservices", "-n", namespace)["items"] == [],
                 "the InferenceService to be gone after models delete", GONE_S)


def test_waiting_for_ready_is_bounded_and_says_why(kserve_crd):
    with kserve_crd.namespace("e2e-serve") as namespace:
        result = serve(kserve_crd, namespace, "--timeout", "3", name="nocontroller")
        assert result.returncode == 1
        assert "not Ready after 3 s" in result.stderr and "KServe controller" in result.stderr


def test_from_job_serves_the_export_of_a_submitted_tfjob(kserve_crd):
    with kserve_crd.namespace("e2e-serve") as namespace:
        submitted = run_launcher(kserve_crd, "submit", "--backend", "k8s", "-n", namespace, "--name", "trained",
                                 "--workers", "1", "--ps", "0", "--job-dir", "gs://bucket/runs/trained/", "--detach")
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        result = run_launcher(kserve_crd, "serve", "mnist", "--backend", "k8s", "-n", namespace,
                              "--from-job", "trained", "--dry-run=server")
        assert result.returncode == 0, result.stdout + result.stderr
        model = yaml.safe_load(result.stdout)["spec"]["predictor"]["model"]
        assert model["storageUri"] == "gs://bucket/runs/trained/export"
