"""Serving on the real node with the real KServe controller (v0.20, Standard mode): the
MNIST export of a real `launcher submit --backend local` job, on a PersistentVolumeClaim,
served by `launcher serve --backend k8s --runtime-image` of the serving image (the
Dockerfile's `serve` target) in a real pod under Pod Security "restricted"; KServe makes the
Deployment and Service and mounts the claim (no storage initializer), the InferenceService
gets Ready with its URL; `launcher predict --backend k8s` reaches it through the API
server's service proxy and agrees with the true labels of real MNIST test images; a
the Open Inference Protocol (v2) with binary tensors reaches it too; a malformed request
gets HTTP 400 with {"error": ...}; `models delete --wait` removes it and
its pods. The launcher runs as the tfjob-launcher service account of k8s/rbac.yaml."""
from __future__ import annotations

import json
import os
import shutil
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from tests.support.launcher_process import run_launcher
from tests.support.node.jobs import CLAIM, TRAINER_UID, container_pids, process_uid, training_namespace
from tests.support.polling import wait_for
from tests.support.serving import Request, mnist_request, parse_table, post_raw

NAME = "mnist"
COUNT = 500            # real test images asked for
AGREEMENT = 0.97       # the bar: predicted classes vs. true labels
SERVE_TIMEOUT_S = 420  # the pod starts, TensorFlow loads the SavedModel, KServe marks it Ready
COMMAND_TIMEOUT_S = SERVE_TIMEOUT_S + 60
ISVC_LABEL = "serving.kserve.io/inferenceservice"


@dataclass
class Served:
    namespace: str
    env: dict[str, str]      # the launcher as tfjob-launcher (k8s/rbac.yaml)
    output: str              # of `launcher serve`
    isvc: dict
    pods: list[dict]
    server_uids: set[int]
    request: Request
    shared: Path


@pytest.fixture(scope="module")
def served(node_cluster, serve_image, kserve, mnist_job, tmp_path_factory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("node-serving")
    request = mnist_request(tmp / "request.json", COUNT)
    with training_namespace(node_cluster, "node-serve") as ns:
        export = ns.shared / "models" / NAME
        shutil.copytree(mnist_job.export, export)  # numeric version dirs
        for path in (export, *export.rglob("*")):  # as a TFJob writes it: uid 1000's
            os.chown(path, TRAINER_UID, TRAINER_UID)
        (ns.shared / "models" / "empty").mkdir()
        env = node_cluster.cp.launcher_account(ns.name, tmp / "launcher.kubeconfig")
        done = run_launcher(node_cluster, "serve", NAME, "--backend", "k8s", "-n", ns.name, "--runtime-image",
                            serve_image, "--model-dir", f"pvc://{CLAIM}/models/{NAME}", "--timeout",
                            str(SERVE_TIMEOUT_S), env=env, timeout=COMMAND_TIMEOUT_S)
        output = done.stdout + done.stderr
        if done.returncode != 0:
            pods = node_cluster.kubectl("get", "pods,deploy,isvc", "-n", ns.name, "-o", "wide", check=False).stdout
            pytest.fail(f"serve exited {done.returncode}: {output}\n{pods}\nKServe:\n{kserve.log_tail()}",
                        pytrace=False)
        isvc = node_cluster.kubectl_json("get", "inferenceservice", NAME, "-n", ns.name)
        pods = node_cluster.kubectl_json("get", "pods", "-n", ns.name, "-l", f"{ISVC_LABEL}={NAME}")["items"]
        uids = wait_for(lambda: {process_uid(pid) for pod in pods for pid in container_pids(pod, b"trainer.serve")},
                        lambda: "no trainer.serve process found", 60)
        try:
            yield Served(ns.name, env, output, isvc, pods, uids, request, ns.shared)
        finally:  # the namespace goes with its pods; the controller must not be left reconciling
            run_launcher(node_cluster, "models", "delete", NAME, "--backend", "k8s", "-n", ns.name, env=env)


def predictor_url(node_cluster, namespace: str, path: str) -> str:
    return f"{node_cluster.cp.server}/api/v1/namespaces/{namespace}/services/{NAME}-predictor:80/proxy{path}"


def raw_post(node_cluster, url: str, body: bytes) -> tuple[int, dict]:
    """POST `body` as is through the API server (as `kubectl proxy` would), as the admin."""
    status, _, answer = exchange(node_cluster, url, body, {"Content-Type": "application/json"})
    return status, json.loads(answer)


def exchange(node_cluster, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict, bytes]:
    """POST through the API server as the admin: (status, answer headers in lower case, bytes)."""
    pki = node_cluster.cp.pki
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    return post_raw(url, body, headers, context=context)


def test_serve_returns_once_the_inferenceservice_is_ready_with_its_url(served):
    status = served.isvc["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
    assert f"Model {NAME} is ready: {status['url']}/v1/models/{NAME}:predict" in served.output
    assert f"(KServe v2, binary tensors for throughput): {status['url']}/v2/models/{NAME}/infer" in served.output
    assert status["address"]["url"] == f"http://{NAME}-predictor.{served.namespace}.svc.cluster.local"
    assert f"in the cluster: {status['address']['url']}/v1/models/{NAME}:predict" in served.output
    # KServe's own defaulting webhook ran on it (the launcher does not set the mode)
    assert served.isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Standard"
    assert status["deploymentMode"] == "Standard"


def test_kserve_runs_the_serving_image_in_a_real_pod_reading_the_claim(served, node_cluster, serve_image):
    (pod,) = served.pods
    spec = pod["spec"]
    assert pod["status"]["phase"] == "Running" and spec["nodeName"] == node_cluster.node_name
    (container,) = spec["containers"]
    assert container["image"] == serve_image
    assert container["command"] == ["python", "-m", "trainer.serve"]
    assert "initContainers" not in spec  # no storage initializer: KServe mounted the claim itself
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/mnt/models"]
    assert mount.get("readOnly") is True and mount["subPath"] == f"models/{NAME}"
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    assert volume["persistentVolumeClaim"]["claimName"] == CLAIM
    owner = pod["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "ReplicaSet" and owner["name"].startswith(f"{NAME}-predictor-")
    deployment = node_cluster.kubectl_json("get", "deployment", f"{NAME}-predictor", "-n", served.namespace)
    assert deployment["metadata"]["ownerReferences"][0]["kind"] == "InferenceService"
    assert served.server_uids == {TRAINER_UID}


def test_predict_through_the_api_server_gives_the_labels(served, node_cluster):
    done = run_launcher(node_cluster, "predict", NAME, "--backend", "k8s", "-n", served.namespace,
                        "--json-instances", str(served.request.path), env=served.env, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    keys, classes, probabilities = parse_table(done.stdout)
    assert keys == list(range(COUNT))
    assert np.mean(np.asarray(classes) == np.asarray(served.request.labels)) >= AGREEMENT
    assert np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)


def test_batch_prediction_through_the_api_server(served, node_cluster, tmp_path):
    out = tmp_path / "predictions"
    done = run_launcher(node_cluster, "predict", NAME, "--backend", "k8s", "-n", served.namespace, "--input-paths",
                        str(served.request.path), "--output-path", str(out), "--batch-size", "100", env=served.env,
                        timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    results = [json.loads(line) for line in (out / "prediction.results-00000-of-00001").read_text().splitlines()]
    assert [r["key"] for r in results] == list(range(COUNT))
    assert np.mean(np.asarray([r["classes"] for r in results]) == np.asarray(served.request.labels)) >= AGREEMENT
    assert (out / "prediction.errors_stats-00000-of-00001").read_text() == ""


def test_open_inference_protocol_binary_tensors_through_the_api_server(served, node_cluster):
    """KServe's v2 protocol with the binary data extension, to the real pod: 100 images as
    one FP32 tensor after a JSON header, the classes back as a binary INT64 tensor."""
    images = np.asarray([row["image"] for row in served.request.rows[:100]], "<f4")
    head = json.dumps({"parameters": {"signature_name": "unkeyed"}, "inputs": [
        {"name": "image", "datatype": "FP32", "shape": [100, 784], "parameters": {"binary_data_size": images.nbytes}}],
        "outputs": [{"name": "classes", "parameters": {"binary_data": True}}]}).encode()
    status, headers, answer = exchange(node_cluster, predictor_url(node_cluster, served.namespace,
                                                                   f"/v2/models/{NAME}/infer"),
                                       head + images.tobytes(), {"Content-Type": "application/octet-stream",
                                                                 "Inference-Header-Content-Length": str(len(head))})
    assert status == 200, answer[:500]
    length = int(headers["inference-header-content-length"])
    assert json.loads(answer[:length])["outputs"][0]["parameters"] == {"binary_data_size": 800}
    classes = np.frombuffer(answer[length:], "<i8")
    assert np.mean(classes == np.asarray(served.request.labels[:100])) >= AGREEMENT


@pytest.mark.parametrize("body", [b"not json", b'{"instances": [{"image": [0.5, 0.5], "key": 1}]}'])
def test_a_malformed_request_gets_400_with_an_error_and_the_server_keeps_serving(served, node_cluster, body):
    status, answer = raw_post(node_cluster, predictor_url(node_cluster, served.namespace, f"/v1/models/{NAME}:predict"),
                              body)
    assert status == 400 and set(answer) == {"error"} and answer["error"], answer
    row = json.dumps({"instances": served.request.rows[:1]}).encode()
    status, answer = raw_post(node_cluster, predictor_url(node_cluster, served.namespace, f"/v1/models/{NAME}:predict"),
                              row)
    assert status == 200 and answer["predictions"][0]["classes"] == served.request.labels[0]


def test_launcher_predict_names_the_servers_refusal_in_one_line(served, node_cluster, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"image": [0.5, 0.5], "key": 1}) + "\n")
    done = run_launcher(node_cluster, "predict", NAME, "--backend", "k8s", "-n", served.namespace,
                        "--json-instances", str(bad), env=served.env, timeout=COMMAND_TIMEOUT_S)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and done.stdout == "", done.stdout + done.stderr
    assert len(lines) == 1 and "HTTP 400" in lines[0] and f"/services/{NAME}-predictor:80/proxy" in lines[0], lines


def test_an_export_the_server_cannot_load_fails_serve_with_the_servers_line(served, node_cluster, serve_image):
    """The server exits with its one-line error, which the container's termination message
    keeps; `serve` sees it on the predictor's pod, stops waiting and prints that line. (KServe
    v0.20 in Standard mode does not reconcile on a container crash, so its modelStatus stays
    Pending.)"""
    done = run_launcher(node_cluster, "serve", "broken", "--backend", "k8s", "-n", served.namespace,
                        "--runtime-image", serve_image, "--model-dir", f"pvc://{CLAIM}/models/empty", "--timeout",
                        str(SERVE_TIMEOUT_S), env=served.env, timeout=COMMAND_TIMEOUT_S)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert len(lines) == 1 and "its predictor does not start: Error (exit code 2)" in lines[0], lines
    assert "error: --model-dir: no SavedModel in /mnt/models" in lines[0], lines
    deleted = run_launcher(node_cluster, "models", "delete", "broken", "--backend", "k8s", "-n", served.namespace,
                           "--wait", env=served.env, timeout=COMMAND_TIMEOUT_S)
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr


def test_models_list_then_delete_removes_it_and_its_pods(served, node_cluster):
    listed = run_launcher(node_cluster, "models", "list", "--backend", "k8s", "-n", served.namespace, env=served.env)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert rows[0] == ["NAME", "NAMESPACE", "URL", "READY", "AGE"]
    assert rows[1][:4] == [NAME, served.namespace, served.isvc["status"]["url"], "Ready"]

    done = run_launcher(node_cluster, "models", "delete", NAME, "--backend", "k8s", "-n", served.namespace, "--wait",
                        env=served.env, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0 and f"inferenceservice {NAME} deleted" in done.stdout, done.stdout + done.stderr
    for kind in ("inferenceservices", "deployments", "replicasets", "pods"):
        left = node_cluster.kubectl_json("get", kind, "-n", served.namespace)["items"]
        assert left == [], f"{kind} left after models delete --wait: {[i['metadata']['name'] for i in left]}"
