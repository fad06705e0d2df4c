"""The InferenceService `serve --backend k8s` renders: checked against KServe v0.20's real
CRD schema (package data), user strings never reach YAML unescaped, dry runs print it."""
from __future__ import annotations

import pytest
import yaml

from launcher.backends.base import BackendError
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


def test_runtime_image_reads_a_gs_export_itself_so_kserve_adds_no_storage_initializer():
    isvc = k8s.render("mnist", "training", EXPORT, runtime_image="gcr.io/p/trainer:0.1.0")
    k8s.validate(isvc)
    (container,) = isvc["spec"]["predictor"]["containers"]
    assert "model" not in isvc["spec"]["predictor"]
    assert container["command"] == ["python", "-m", "trainer.serve"]
    assert container["args"] == ["--model-dir", EXPORT, "--name", "mnist", "--host", "0.0.0.0", "--port", "8080"]
    assert "env" not in container  # STORAGE_URI would make KServe inject kserve/storage-initializer
    assert container["readinessProbe"]["httpGet"] == {"path": "/v1/models/mnist", "port": 8080}
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"  # the server's error line, for KServe
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # Pod Security "restricted", and nothing of its own written: a read-only root
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert isvc["spec"]["predictor"]["securityContext"]["runAsNonRoot"] is True


def test_runtime_image_serves_a_pvc_export_where_kserve_mounts_the_claim():
    isvc = k8s.render("mnist", "training", "pvc://shared/runs/mnist-1/export", runtime_image="trainer:0.1.0")
    k8s.validate(isvc)
    (container,) = isvc["spec"]["predictor"]["containers"]
    assert container["args"][:2] == ["--model-dir", k8s.MOUNT]
    assert container["env"] == [{"name": "STORAGE_URI", "value": "pvc://shared/runs/mnist-1/export"}]


@pytest.mark.parametrize("uri", ["s3://bucket/export", "https://host/export"])
def test_runtime_image_refuses_storage_its_server_cannot_read(uri):
    with pytest.raises(Exception) as error:
        k8s.render("mnist", "training", uri, runtime_image="trainer:0.1.0")
    assert str(error.value).startswith("--model-dir: ") and "gs://" in str(error.value)
    assert k8s.render("mnist", "training", uri)["spec"]["predictor"]["model"]["storageUri"] == uri  # TF Serving's


def test_a_model_kserve_failed_to_load_is_named_with_the_servers_own_line():
    isvc = {"status": {"modelStatus": {"transitionStatus": "InProgress"}}}
    assert k8s.load_failure(isvc) is None
    isvc["status"]["modelStatus"] = {
        "transitionStatus": "BlockedByFailedLoad", "states": {"targetModelState": "FailedToLoad"},
        "lastFailureInfo": {"reason": "ModelLoadFailed", "exitCode": 2,
                            "message": "Serving...\nerror: --model-dir: no SavedModel in /mnt/models; pass ...\n"}}
    assert k8s.load_failure(isvc) == ("ModelLoadFailed (exit code 2): error: --model-dir: no SavedModel in "
                                      "/mnt/models; pass ...")


def pod(**container_status) -> dict:
    return {"status": {"containerStatuses": [{"name": "kserve-container", "image": "trainer:1", **container_status}]}}


def test_a_predictor_that_exits_or_cannot_pull_its_image_is_named():
    starting = pod(state={"waiting": {"reason": "ContainerCreating"}})
    assert k8s.pod_failure([]) is None and k8s.pod_failure([starting]) is None
    assert k8s.pod_failure([pod(state={"running": {}}, lastState={"terminated": {"exitCode": 0}})]) is None
    crashed = pod(state={"waiting": {"reason": "CrashLoopBackOff"}}, lastState={"terminated": {
        "exitCode": 2, "reason": "Error", "message": "I0000 oneDNN ...\nerror: --model-dir: no SavedModel in /mnt/models\n"}})
    assert k8s.pod_failure([starting, crashed]) == "Error (exit code 2): error: --model-dir: no SavedModel in /mnt/models"
    pulling = pod(state={"waiting": {"reason": "ErrImageNeverPull", "message": 'image "trainer:1" is not present'}})
    assert k8s.pod_failure([pulling]) == 'ErrImageNeverPull: image "trainer:1" is not present'
    # the server's error line, not whatever was logged after it
    said_after = pod(state={"terminated": {"exitCode": 2, "reason": "Error", "message":
                                           "error: --model-dir: cannot read gs://b/export\nStopped serving mnist.\n"}})
    assert k8s.pod_failure([said_after]) == "Error (exit code 2): error: --model-dir: cannot read gs://b/export"
    # another container of the pod (a sidecar a mesh injects) is not the model server
    sidecar = {"status": {"containerStatuses": [{"name": "istio-proxy", "state": {"terminated": {"exitCode": 1}}},
                                                {"name": "kserve-container", "state": {"running": {}}}]}}
    assert k8s.pod_failure([sidecar]) is None


def test_cluster_address_is_the_predictor_service():
    isvc = {"metadata": {"name": "mnist"},
            "status": {"address": {"url": "http://mnist-predictor.training.svc.cluster.local"}}}
    assert k8s.cluster_address(isvc) == ("training", "mnist-predictor", 80)
    isvc["status"]["address"]["url"] = "http://mnist-predictor.training.svc.cluster.local:8080"  # headless
    assert k8s.cluster_address(isvc) == ("training", "mnist-predictor", 8080)
    isvc["status"]["address"]["url"] = "https://mnist-predictor.training.svc"  # TLS: its default port
    assert k8s.cluster_address(isvc) == ("training", "mnist-predictor", 443)
    with pytest.raises(Exception, match="no cluster address"):
        k8s.cluster_address({"metadata": {"name": "mnist"}, "status": {"url": "http://mnist.training.example.com"}})
    with pytest.raises(Exception, match="no cluster address"):  # an ingress host is no Service
        k8s.cluster_address({"metadata": {"name": "mnist"},
                             "status": {"address": {"url": "http://mnist.training.example.com"}}})


@pytest.mark.parametrize("hostile", ['a"b', "x: y", "{evil: 1}", "- item", "#c", "'q'", "a\\b", "ü & *ref",
                                     "caf\U0001f642"])  # beyond U+FFFF: was written as a surrogate pair
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


@pytest.mark.parametrize("uri", ["/local/export", "runs/export", "gs://", "gs://b/x\ny", "pvc://", "pvc://Bad_Claim/x"])
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


def test_models_list_says_ready_not_ready_or_unknown_as_the_ready_condition_does():
    def listed(conditions):
        return k8s.summary({"metadata": {"name": "m", "namespace": "n", "creationTimestamp": "t"},
                            "status": {"conditions": conditions}})
    assert listed([{"type": "Ready", "status": "True"}]) == ("m", "n", "", "Ready", "t")
    assert listed([{"type": "Ready", "status": "False"}])[3] == "NotReady"
    assert listed([])[3] == listed([{"type": "Ready", "status": "Unknown"}])[3] == "Unknown"  # no status yet


class SlowKServe(k8s.KServeApi):
    """STAND-IN for the API server (no KServe controller answers in unit tests; the e2e tier
    waits on a real one): an InferenceService that never gets Ready, and never goes."""

    def __init__(self):
        self.gets = 0

    def get(self, name, namespace):
        self.gets += 1
        assert self.gets < 1000, "still waiting long after the deadline: the wait is not bounded"
        return {"metadata": {"name": name}, "status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "Waiting", "message": "no pods"}]}}

    def predictor_pods(self, name, namespace):
        return []


def test_waiting_until_ready_or_gone_is_bounded_and_says_what_it_saw(monkeypatch):
    monkeypatch.setattr(k8s, "POLL_SECONDS", 0.01)
    api = SlowKServe()
    with pytest.raises(BackendError, match=r"^inferenceservice m not Ready after 0\.2 s: Ready=False Waiting no pods$"):
        api.wait_ready("m", "n", 0.2)
    assert api.gets > 1  # asked again until the deadline, not once
    with pytest.raises(BackendError, match=r"^inferenceservice m in n still exists after 0\.2 s \(its pods may be "
                                          r"stuck terminating\); check `kubectl get pods -n n -l "
                                          r"serving\.kserve\.io/inferenceservice=m`$"):
        api.wait_gone("m", "n", 0.2)


def test_client_dry_run_prints_the_inferenceservice_without_a_cluster(cli, tmp_path):
    unreachable = tmp_path / "config"  # a cluster nothing listens for: a client dry run asks no server
    unreachable.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: "
                           "c, user: u}}]\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                           "users: [{name: u, user: {token: t}}]\n")
    result = cli("serve", "mnist", "--model-dir", EXPORT, "--dry-run", "-n", "training", "--runtime-version", "2.18.0",
                 "--kubeconfig", str(unreachable), "--timeout", "5m")  # kubectl's durations, as --request-timeout
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


class ReadyKServe:
    """STAND-IN for the API server with KServe's controller (the node tier runs the real
    one): creates the InferenceService and reports it Ready at once, with the URLs given."""

    def __init__(self, url: str, address: str):
        self.url, self.address, self.created = url, address, []

    def __call__(self, *args):  # as the class: KServeApi(kubeconfig, context, request_timeout)
        return self

    def create(self, isvc, dry_run=False):
        self.created.append(isvc)
        return isvc

    def wait_ready(self, name, namespace, timeout):
        return self.url

    def get(self, name, namespace):
        return {"status": {"url": self.url, "address": {"url": self.address}}}

    def close(self):
        pass


def test_serve_says_where_the_ready_model_answers_with_the_clusters_strings_shown_safely(cli, monkeypatch):
    """The URLs are the cluster's strings: a control character in one is shown, not acted on."""
    api = ReadyKServe("http://mnist.training.example.com\x1b]0;owned\x07", "http://mnist-predictor.training.svc")
    monkeypatch.setattr(k8s, "KServeApi", api)
    result = cli("serve", "mnist", "--model-dir", EXPORT, "--backend", "k8s", "-n", "training",
                 "--runtime-image", "trainer:0.1.0")
    assert result.code == 0, result
    assert "\x1b" not in result.out and "\x07" not in result.out
    assert result.out.splitlines() == [
        f"inferenceservice mnist created in namespace training (storageUri {EXPORT})",
        "Model mnist is ready: http://mnist.training.example.com^[]0;owned\\x07/v1/models/mnist:predict",
        "  Open Inference Protocol (KServe v2, binary tensors for throughput): "
        "http://mnist.training.example.com^[]0;owned\\x07/v2/models/mnist/infer",
        "  in the cluster: http://mnist-predictor.training.svc/v1/models/mnist:predict; from here: `python -m "
        "launcher predict mnist --backend k8s -n training --json-instances FILE` (through the API server)"]
    assert [(isvc["metadata"]["name"], isvc["metadata"]["namespace"]) for isvc in api.created] == [("mnist", "training")]


def test_predictions_through_the_api_servers_proxy_are_bounded_by_request_timeout(tmp_path):
    """ServiceProxy: predict's --request-timeout bounds each answer, not the caller's 60 s."""
    import time

    from launcher.serving.client import ServingError
    from tests.support.silent_server import SilentServer

    with SilentServer() as silent:
        config = tmp_path / "kubeconfig"
        config.write_text(yaml.safe_dump(silent.kubeconfig()))
        api = k8s.KServeApi(str(config), None, 1.0)
        try:
            proxy = k8s.ServiceProxy(api, "training", "mnist-predictor", 80, timeout=1.0)
            start = time.monotonic()
            with pytest.raises(ServingError):
                proxy.send("POST", "/v1/models/mnist:predict", {"instances": [1]}, timeout=60.0)
            assert time.monotonic() - start < 20, "the caller's 60 s, not --request-timeout's 1 s"
        finally:
            api.close()
