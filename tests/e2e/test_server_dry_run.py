"""`submit --server-dry-run` sends the TFJob to the real apiserver with dryRun=All: a valid
job is accepted and nothing is created; an invalid one is refused with the server's reason.

To get a bad field past the launcher's own CRD check, the launcher is given an older,
looser copy of the CRD ($TFJOB_CRD, every `pattern` removed), as when a cluster runs a
stricter CRD than the one the launcher validates with."""
from __future__ import annotations

import pytest
import yaml

from launcher.validate import crd_path
from tests.support.launcher_process import run_launcher

JOB = "dry-run-e2e"
BAD_CPU = "1.2.3"  # not a Kubernetes quantity: the CRD's quantity pattern refuses it
FIELD = "spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.requests.cpu"


def without_patterns(node):
    if isinstance(node, dict):
        return {k: without_patterns(v) for k, v in node.items() if k != "pattern"}
    if isinstance(node, list):
        return [without_patterns(v) for v in node]
    return node


@pytest.fixture(scope="module")
def loose_crd(tmp_path_factory):
    path = tmp_path_factory.mktemp("crd") / "tfjobs-without-patterns.yaml"
    path.write_text(yaml.safe_dump(without_patterns(yaml.safe_load(crd_path().read_text()))))
    return str(path)


def submit_dry_run(cp, namespace: str, *flags: str, env=None):
    return run_launcher(cp, "submit", "--backend", "k8s", "-n", namespace, "--name", JOB,
                        "--workers", "2", "--server-dry-run", *flags, env=env)


def test_valid_job_is_accepted_and_nothing_is_created(control_plane):
    with control_plane.namespace("e2e-dry") as namespace:
        result = submit_dry_run(control_plane, namespace)
        assert result.returncode == 0, result.stdout + result.stderr
        assert yaml.safe_load(result.stdout)["metadata"]["name"] == JOB  # the server's copy
        assert control_plane.kubectl_json("get", "tfjobs", "-n", namespace)["items"] == []


def test_the_launchers_own_check_refuses_the_bad_field_first(control_plane):
    with control_plane.namespace("e2e-dry") as namespace:
        result = submit_dry_run(control_plane, namespace, "--cpu", f"worker={BAD_CPU}")
        assert result.returncode == 2, result.stdout + result.stderr
        assert FIELD in result.stderr and "is invalid" not in result.stderr


def test_invalid_job_is_refused_by_the_apiserver_with_its_reason(control_plane, loose_crd):
    with control_plane.namespace("e2e-dry") as namespace:
        result = submit_dry_run(control_plane, namespace, "--cpu", f"worker={BAD_CPU}",
                                env={"TFJOB_CRD": loose_crd})
        assert result.returncode == 1, result.stdout + result.stderr
        # the apiserver's own wording of the CRD schema violation
        assert f'TFJob.kubeflow.org "{JOB}" is invalid: {FIELD}: Invalid value: "{BAD_CPU}"' in result.stderr
        assert f"{FIELD} in body should match" in result.stderr, result.stderr
        assert control_plane.kubectl_json("get", "tfjobs", "-n", namespace)["items"] == []
