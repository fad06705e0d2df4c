"""The InferenceService `serve --backend k8s` renders: checked against KServe v0.20's real
CRD schema (package data), user strings never reach YAML unescaped, dry runs print it."""
from __future__ import annotations

import pytest
import yaml

from launcher.serving import k8s
from launcher.validate import SchemaError

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

EXPORT = "gs://bucket/runs/mnist-1/export"


def test_tensorflow_serving_predictor_is_valid_and_has_the_fields_kserve_reads():
    isvc = k8s.render("mnist", "training", EXPORT, service_account="tfjob-trainer")
    k8s.validate(isvc)
    predictor = isvc["spec"]["predictor"]
    assert predictor["model"] == {"modelFormat": {"name": "tensorflow"}, "runtimeVersion": k8s.DEFAULT_RUNTIME_VERSION,
                                  "storageUri": EXPORT}
    assert predictor["serviceAccountName"] == "tfjob-trainer"
    assert predictor["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_runtime_image_runs_the_projects_model_server_on_the_downloaded_export():
    isvc = k8s.render("mnist", "training", EXPORT, runtime_image="gcr.io/p/trainer:0.1.0")
    k8s.validate(isvc)
    (container,) = isvc["spec"]["predictor"]["containers"]
    assert "model" not in isvc["spec"]["predictor"]
    assert container["command"] == ["python", "-m", "trainer.serve"]
    assert container["args"] == ["--model-dir", "/mnt/models", "--name", "mnist", "--host", "0.0.0.0",
                                 "--port", "8080"]
    assert container["env"] == [{"name": "STORAGE_URI", "value": EXPORT}]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.parametrize("hostile", ['a"b', "x: y", "{evil: 1}", "- item", "#c", "'q'", "a\\b", "ü & *ref"])
def test_user_strings_come_back_exactly_as_given(hostile):
    isvc = k8s.render("mnist", "training", f"gs://bucket/{hostile}", runtime_version=hostile,
                      service_account=hostile)
    again = yaml.safe_load(yaml.safe_dump(isvc))
    assert again["spec"]["predictor"]["model"]["storageUri"] == f"gs://bucket/{hostile}"
    assert again["spec"]["predictor"]["model"]["runtimeVersion"] == hostile
    assert again["spec"]["predictor"]["serviceAccountName"] == hostile


def test_a_field_the_crd_does_not_have_is_named():
    isvc = k8s.render("mnist", "training", EXPORT)
    isvc["spec"]["predictor"]["model"]["storageURI"] = EXPORT
    with pytest.raises(SchemaError) as error:
        k8s.validate(isvc)
    assert error.value.field == "spec.predictor.model"
    assert "'storageURI'" in str(error.value)


@pytest.mark.parametrize("uri", ["/local/export", "runs/export", "gs://", "gs://b/x\ny"])
def test_storage_kserve_cannot_read_is_refused(uri):
    with pytest.raises(Exception) as error:
        k8s.render("mnist", "training", uri)
    assert str(error.value).startswith("--model-dir: ")


def test_ready_url_only_once_ready():
    isvc = {"status": {"url": "http://mnist.training.example.com",
                       "conditions": [{"type": "Ready", "status": "False"}]}}
    assert k8s.ready_url(isvc) is None
    isvc["status"]["conditions"][0]["status"] = "True"
    assert k8s.ready_url(isvc) == "http://mnist.training.example.com"


def test_client_dry_run_prints_the_inferenceservice_without_a_cluster(cli, tmp_path):
    result = cli("serve", "mnist", "--model-dir", EXPORT, "--dry-run", "-n", "training", "--runtime-version", "2.18.0",
                 "--kubeconfig", str(tmp_path / "none"))
    assert result.code == 0, result.err
    isvc = yaml.safe_load(result.out)
    assert isvc["kind"] == "InferenceService" and isvc["metadata"]["namespace"] == "training"
    assert isvc["spec"]["predictor"]["model"]["runtimeVersion"] == "2.18.0"


@pytest.mark.parametrize("argv, field", [
    (["--model-dir", "/tmp/export", "--dry-run"], "--model-dir"),
    (["--model-dir", EXPORT, "--runtime-image", "i:1", "--runtime-version", "2.19.1", "--dry-run"],
     "--runtime-version"),
    (["--model-dir", EXPORT, "--foreground", "--dry-run"], "--foreground"),
    (["--from-job", "mnist-1", "--dry-run"], "--from-job"),
])
def test_bad_k8s_serve_input_is_one_line_exit_2(cli, argv, field):
    result = cli("serve", "mnist", *argv)
    assert result.code == 2 and result.out == ""
    assert result.err.startswith(f"error: {field}: ") and len(result.err.strip().splitlines()) == 1
