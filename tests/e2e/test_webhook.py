"""training-operator's validating admission webhook on the real control plane, and the
launcher's copy of its rules (launcher/validate.py `_webhook_rules`) checked against it.

tests/support/controlplane/ installs the TFJob webhook of the operator's own manifests
(manifests/base/webhook in the pinned module) pointing at the operator's webhook server
over TLS. A TFJob that passes the CRD schema but breaks a webhook rule
(pkg/webhooks/tensorflow/tfjob_webhook.go validateTFJob) is refused by the real apiserver
with the webhook's message, and the launcher refuses the same TFJob before sending, with
one line naming the field.
"""
from __future__ import annotations

import copy

import pytest
import yaml

from launcher.validate import SchemaError, validate
from tests.support.controlplane import TFJOB_WEBHOOK, WEBHOOK_CONFIGURATION
from tests.support.k8s_backend import manifest
from tests.support.launcher_process import run_launcher

DENIED = f'admission webhook "{TFJOB_WEBHOOK}" denied the request'


def renamed(job: dict, name: str) -> None:
    job["metadata"]["name"] = name


def containers(job: dict, rtype: str = "Worker") -> list[dict]:
    return job["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]["containers"]


def chief_and_master(job: dict) -> None:
    job["spec"]["tfReplicaSpecs"]["Master"] = copy.deepcopy(job["spec"]["tfReplicaSpecs"]["Chief"])


# case -> (change to a launcher-rendered TFJob, the field in the webhook's message
# (Go field path), the field the launcher names)
CASES = {
    "name starts with a digit": (lambda job: renamed(job, "2mnist"), "metadata.name", "metadata.name"),
    "dotted name": (lambda job: renamed(job, "mnist.v2"), "metadata.name", "metadata.name"),
    "name longer than 63": (lambda job: renamed(job, "m" * 64), "metadata.name", "metadata.name"),
    "no tensorflow container": (lambda job: containers(job)[0].update(name="trainer"),
                                "spec.tfReplicaSpecs[Worker].template.spec.containers",
                                "spec.tfReplicaSpecs.Worker.template.spec.containers"),
    "empty image": (lambda job: containers(job)[0].update(image=""),
                    "spec.tfReplicaSpecs[Worker].template.spec.containers[0].image",
                    "spec.tfReplicaSpecs.Worker.template.spec.containers[0].image"),
    "Chief and Master": (chief_and_master, "spec.tfReplicaSpecs", "spec.tfReplicaSpecs"),
}


@pytest.fixture(scope="module")
def namespace(control_plane):
    with control_plane.namespace("webhook") as name:
        yield name


def server_dry_run(cp, job: dict, tmp_path) -> tuple[int, str]:
    path = tmp_path / "tfjob.yaml"
    path.write_text(yaml.safe_dump(job))
    done = cp.kubectl("create", "--dry-run=server", "-f", str(path), check=False)
    return done.returncode, done.stderr.strip()


def test_the_operators_tfjob_webhook_is_installed(control_plane):
    config = control_plane.kubectl_json("get", "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION)
    (hook,) = config["webhooks"]
    assert hook["name"] == TFJOB_WEBHOOK
    assert hook["failurePolicy"] == "Fail"
    assert hook["clientConfig"]["url"].endswith("/validate-kubeflow-org-v1-tfjob")
    assert hook["clientConfig"]["caBundle"]
    (rule,) = hook["rules"]
    assert (rule["apiGroups"], rule["resources"], sorted(rule["operations"])) == (
        ["kubeflow.org"], ["tfjobs"], ["CREATE", "UPDATE"])


def test_a_launcher_rendered_tfjob_passes_the_webhook(control_plane, namespace, tmp_path):
    job = manifest(name="webhook", namespace=namespace)
    assert validate(job)
    assert server_dry_run(control_plane, job, tmp_path) == (0, "")


@pytest.mark.parametrize("case", CASES)
def test_the_webhook_and_the_launcher_refuse_the_same(control_plane, namespace, tmp_path, case):
    change, go_field, field = CASES[case]
    job = manifest(name="webhook", namespace=namespace)
    change(job)
    code, stderr = server_dry_run(control_plane, job, tmp_path)
    assert code != 0 and DENIED in stderr and go_field in stderr, stderr
    with pytest.raises(SchemaError) as refused:
        validate(job)
    assert refused.value.field == field
    assert "\n" not in str(refused.value)


def test_the_cli_refuses_a_name_the_webhook_refuses_before_sending(control_plane, namespace):
    done = run_launcher(control_plane, "submit", "--backend", "k8s", "-n", namespace, "--name", "2mnist",
                        "--workers", "1", "--ps", "1")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "--name" in lines[0] and "DNS-1035" in lines[0], done.stderr
    assert control_plane.kubectl_json("get", "tfjobs", "-n", namespace)["items"] == []
