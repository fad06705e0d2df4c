"""Serving for real: the MNIST export of a real `launcher submit --backend local` job,
served by `launcher serve` (a `python -m trainer.serve` process: kserve's model server
with TensorFlow), asked by `launcher predict` and by plain HTTP in TF Serving's format and in the Open
Inference Protocol's (KServe v2, JSON and binary)."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from launcher.backends.local.procs import alive
from tests.support.launcher_process import LAUNCHER, run_launcher
from tests.support.polling import wait_for
from tests.support.serving import (COMMAND_TIMEOUT, ROOT, TrainedJob, Request, get, mnist_request, parse_table,
                                   post, post_raw)
from tests.support.ports import free_port
from tests.support.trainer_cluster import reap

pytestmark = pytest.mark.slow
COUNT = 500           # real test images asked for
AGREEMENT = 0.97      # the bar: predicted classes vs. true labels


@dataclass(frozen=True)
class Served:
    name: str
    base: str       # http://127.0.0.1:PORT
    pid: int
    version: str


def server_record(job: TrainedJob, name: str) -> dict:
    return json.loads((Path(job.env["TFJOB_RUNS_DIR"]) / "_models" / name / "server.json").read_text())


def stop_leftover(job: TrainedJob, name: str) -> None:
    """Teardown: whatever the test did, the server of `name` is gone afterwards."""
    folder = Path(job.env["TFJOB_RUNS_DIR"]) / "_models" / name
    if (folder / "server.json").exists():
        pid = server_record(job, name)["pid"]
        run_launcher(job.env, "models", "delete", name, "--backend", "local", timeout=COMMAND_TIMEOUT)
        if alive(pid):
            os.killpg(pid, signal.SIGKILL)


def foreground_serve(job: TrainedJob, name: str, port: int, out: Path) -> tuple[subprocess.Popen, Path]:
    """`launcher serve --foreground` of the job's export, its output in `out`; returns once
    it says the model is ready (bounded). The caller reaps the process."""
    with open(out, "w") as stdout:
        proc = subprocess.Popen([*LAUNCHER, "serve", name, "--model-dir", str(job.export),
                                 "--port", str(port), "--foreground", "--backend", "local"],
                                cwd=ROOT, env=job.env, stdout=stdout, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: "is ready" in out.read_text(), lambda: out.read_text(), COMMAND_TIMEOUT,
                 check=lambda: proc.poll() is None or pytest.fail(out.read_text()))
    except BaseException:
        reap(proc)
        raise
    return proc, out


@pytest.fixture(scope="module")
def served(mnist_job) -> Served:
    port = free_port()
    done = run_launcher(mnist_job.env, "serve", "mnist", "--from-job", mnist_job.name, "--port", str(port),
                        "--backend", "local", timeout=COMMAND_TIMEOUT)
    try:
        assert done.returncode == 0, done.stderr
        assert f"Model mnist is ready: http://127.0.0.1:{port}/v1/models/mnist:predict" in done.stdout
        assert f"Open Inference Protocol (KServe v2, binary tensors for throughput): http://127.0.0.1:{port}" \
            "/v2/models/mnist/infer" in done.stdout
        version = max(p.name for p in mnist_job.export.iterdir() if p.name.isdigit())
        yield Served("mnist", f"http://127.0.0.1:{port}", server_record(mnist_job, "mnist")["pid"], version)
    finally:
        stop_leftover(mnist_job, "mnist")


@pytest.fixture(scope="module")
def request_file(tmp_path_factory) -> Request:
    return mnist_request(tmp_path_factory.mktemp("request") / "request.json", COUNT)


@pytest.fixture(scope="module")
def in_process(mnist_job, served, request_file) -> dict[str, np.ndarray]:
    """The same SavedModel called in this process: what the server must reproduce."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(mnist_job.export / served.version))
    images = np.asarray([row["image"] for row in request_file.rows], np.float32)
    keys = np.asarray([row["key"] for row in request_file.rows], np.int64)
    outputs = loaded.signatures["serving_default"](image=tf.constant(images), key=tf.constant(keys))
    return {name: value.numpy() for name, value in outputs.items()}


def test_launcher_predict_gives_the_labels_and_the_saved_models_own_answers(mnist_job, served, request_file,
                                                                           in_process):
    done = run_launcher(mnist_job.env, "predict", "mnist", "--json-instances", str(request_file.path), "--backend",
                        "local", timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, done.stderr
    keys, classes, probabilities = parse_table(done.stdout)
    assert keys == list(range(COUNT))  # the instances' own keys, through serving_default as TF Serving does
    assert "Using signature" not in done.stderr
    agreement = np.mean(np.asarray(classes) == np.asarray(request_file.labels))
    assert agreement >= AGREEMENT, f"only {agreement:.3f} of {COUNT} test images right"
    assert classes == in_process["classes"].tolist()
    np.testing.assert_allclose(probabilities, in_process["probabilities"], rtol=0, atol=1e-6)


def test_launcher_predict_sends_image_only_lines_to_the_unkeyed_signature(mnist_job, served, request_file,
                                                                         in_process, tmp_path):
    bare = tmp_path / "bare.json"
    bare.write_text("".join(json.dumps({"image": row["image"]}) + "\n" for row in request_file.rows[:5]))
    done = run_launcher(mnist_job.env, "predict", "mnist", "--json-instances", str(bare), "--backend", "local",
                        timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert "Using signature 'unkeyed': its inputs are the instances' fields (image)" in done.stderr
    keys, classes, _ = parse_table(done.stdout)
    assert keys == list(range(5)) and classes == in_process["classes"][:5].tolist()


def test_gclouds_predict_command_line_gives_the_same_answers(mnist_job, served, request_file, in_process, tmp_path):
    """`gcloud ai-platform predict --model M --version V --region R --json-request FILE`
    with `gcloud ai-platform` replaced: --model names the model, --version and --region are
    noted and ignored, and the request body's instances (and its signature_name) are sent."""
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"instances": request_file.rows}, indent=2))  # a body over many lines
    done = run_launcher(mnist_job.env, "predict", "--model", "mnist", "--version", "v1", "--region", "us-central1",
                        "--json-request", str(body), "--backend", "local", timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, done.stderr
    keys, classes, probabilities = parse_table(done.stdout)
    assert keys == list(range(COUNT)) and classes == in_process["classes"].tolist()
    np.testing.assert_allclose(probabilities, in_process["probabilities"], rtol=0, atol=1e-6)
    assert done.stderr.splitlines() == [
        "note: --version v1 is ignored: a model here serves the one export `serve` loaded (serve mnist again with "
        "another --model-dir to change it)",
        "note: --region is a Cloud ML setting with no equivalent here; ignored"]
    body.write_text(json.dumps({"signature_name": "unkeyed", "instances": [{"image": row["image"]}
                                                                           for row in request_file.rows[:3]]}))
    done = run_launcher(mnist_job.env, "predict", "--model", "mnist", "--json-request", str(body), "--backend",
                        "local", timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert "Using signature" not in done.stderr  # the body named it
    keys, classes, _ = parse_table(done.stdout)
    assert keys == list(range(3)) and classes == in_process["classes"][:3].tolist()


def test_plain_http_in_tf_serving_format(served, request_file, in_process):
    model = f"{served.base}/v1/models/{served.name}"
    assert get(model) == (200, {"name": "mnist", "ready": True})
    status, answer = get(f"{model}/versions/{served.version}")
    assert status == 200 and answer["model_version_status"][0]["state"] == "AVAILABLE"
    status, answer = get(f"{model}/metadata")
    signatures = answer["metadata"]["signature_def"]["signature_def"]
    assert status == 200 and sorted(signatures) == ["serving_default", "unkeyed"]
    assert sorted(signatures["serving_default"]["inputs"]) == ["image", "key"]
    assert sorted(signatures["unkeyed"]["inputs"]) == ["image"]

    images = [row["image"] for row in request_file.rows[:3]]
    # the seeds' request lines to the default signature, in the row format, as
    # `curl -d @body.json URL` sends them (no JSON content type)
    instances = [{"image": image, "key": 70 + number} for number, image in enumerate(images)]
    status, answer = post(f"{model}:predict", json.dumps({"instances": instances}).encode(),
                          content_type="application/x-www-form-urlencoded")
    assert status == 200, answer
    assert [p["classes"] for p in answer["predictions"]] == in_process["classes"][:3].tolist()
    assert [p["key"] for p in answer["predictions"]] == [70, 71, 72]
    # columnar format on the versioned path with the image-only signature
    body = {"signature_name": "unkeyed", "inputs": {"image": images}}
    status, answer = post(f"{model}/versions/{served.version}:predict", json.dumps(body).encode())
    assert status == 200, answer
    assert answer["outputs"]["key"] == [0, 1, 2]
    assert answer["outputs"]["classes"] == in_process["classes"][:3].tolist()


def test_malformed_requests_get_400_with_an_error_and_the_server_keeps_serving(served, request_file):
    model = f"{served.base}/v1/models/{served.name}"
    image = request_file.rows[0]["image"]
    bad = {
        "not JSON": b"image=0.5",
        "not JSON, JSON content type": b"{instances: [",
        "wrong shape": json.dumps({"instances": [image[:100]], "signature_name": "unkeyed"}).encode(),
        "ragged": json.dumps({"instances": [image, image[:10]], "signature_name": "unkeyed"}).encode(),
        "both instances and inputs": json.dumps({"instances": [image], "inputs": [image]}).encode(),
        "unknown signature": json.dumps({"instances": [image], "signature_name": "nope"}).encode(),
        "unknown input": json.dumps({"instances": [{"image": image, "key": 1, "label": 3}]}).encode(),
        "b64 for a float input": json.dumps({"instances": [{"b64": "AAAA"}], "signature_name": "unkeyed"}).encode(),
        "bare image to serving_default": json.dumps({"instances": [image]}).encode(),
        "string key": json.dumps({"instances": [{"image": image, "key": "a7"}]}).encode(),
        "key on some instances": json.dumps({"instances": [{"image": image, "key": 1}, {"image": image}]}).encode(),
    }
    for what, body in bad.items():
        status, answer = post(f"{model}:predict", body,
                              content_type=None if what == "not JSON" else "application/json")
        assert status == 400, (what, status, answer)
        assert isinstance(answer.get("error"), str) and answer["error"], (what, answer)
    status, answer = post(f"{model}/versions/1:predict", json.dumps({"instances": [image]}).encode())
    assert status == 404 and "error" in answer
    status, answer = post(f"{served.base}/v1/models/other:predict", json.dumps({"instances": [image]}).encode())
    assert status == 404 and "error" in answer
    assert alive(served.pid)
    status, answer = post(f"{model}:predict", json.dumps({"instances": [{"image": image, "key": 3}]}).encode())
    assert status == 200 and [p["key"] for p in answer["predictions"]] == [3]


def v2_binary(header: dict, *tensors: bytes) -> tuple[bytes, dict[str, str]]:
    """An Open Inference Protocol request with the binary data extension, by hand: the JSON
    header, then the raw tensors; its length in Inference-Header-Content-Length."""
    head = json.dumps(header).encode()
    return head + b"".join(tensors), {"Content-Type": "application/octet-stream",
                                      "Inference-Header-Content-Length": str(len(head))}


def test_open_inference_protocol_binary_tensors_in_and_out(served, request_file, in_process):
    infer = f"{served.base}/v2/models/{served.name}/infer"
    images = np.asarray([row["image"] for row in request_file.rows[:64]], "<f4")
    keys = np.arange(100, 164, dtype="<i8")
    body, headers = v2_binary({"id": "batch-1", "inputs": [
        {"name": "image", "datatype": "FP32", "shape": [64, 784], "parameters": {"binary_data_size": images.nbytes}},
        {"name": "key", "datatype": "INT64", "shape": [64], "parameters": {"binary_data_size": keys.nbytes}}],
        "outputs": [{"name": "classes", "parameters": {"binary_data": True}}, {"name": "probabilities"},
                    {"name": "key"}]}, images.tobytes(), keys.tobytes())
    status, answer_headers, answer = post_raw(infer, body, headers)
    assert status == 200, answer[:500]
    length = int(answer_headers["inference-header-content-length"])
    head = json.loads(answer[:length])
    assert head["id"] == "batch-1" and head["model_name"] == "mnist" and head["model_version"] == served.version
    classes, probabilities, key = head["outputs"]
    assert classes == {"name": "classes", "datatype": "INT64", "shape": [64], "parameters": {"binary_data_size": 512}}
    assert np.frombuffer(answer[length:], "<i8").tolist() == in_process["classes"][:64].tolist()
    assert probabilities["datatype"] == "FP32" and probabilities["shape"] == [64, 10]
    np.testing.assert_allclose(np.reshape(probabilities["data"], (64, 10)), in_process["probabilities"][:64],
                               rtol=0, atol=1e-6)
    assert key["data"] == keys.tolist()
    # JSON data (nested rows), the image-only signature, the versioned path; all outputs, as JSON
    status, answer_headers, answer = post_raw(f"{served.base}/v2/models/{served.name}/versions/{served.version}/infer",
                                              json.dumps({"parameters": {"signature_name": "unkeyed"}, "inputs": [
                                                  {"name": "image", "datatype": "FP32", "shape": [3, 784],
                                                   "data": images[:3].tolist()}]}).encode(),
                                              {"Content-Type": "application/json"})
    assert status == 200 and "inference-header-content-length" not in answer_headers, answer[:500]
    outputs = {o["name"]: o for o in json.loads(answer)["outputs"]}
    assert sorted(outputs) == ["classes", "key", "probabilities"]
    assert outputs["classes"]["data"] == in_process["classes"][:3].tolist()
    # the v2 metadata describes serving_default from the signature
    status, answer = get(f"{served.base}/v2/models/{served.name}")
    assert status == 200, answer
    assert {i["name"]: i["datatype"] for i in answer["inputs"]} == {"image": "FP32", "key": "INT64"}
    assert {o["name"]: o["datatype"] for o in answer["outputs"]} == {"classes": "INT64", "key": "INT64",
                                                                     "probabilities": "FP32"}


def test_malformed_open_inference_protocol_requests_get_400_and_the_server_keeps_serving(served, request_file):
    infer = f"{served.base}/v2/models/{served.name}/infer"
    image = np.asarray(request_file.rows[0]["image"], "<f4")
    one = {"name": "image", "datatype": "FP32", "shape": [1, 784], "parameters": {"binary_data_size": image.nbytes}}
    key = {"name": "key", "datatype": "INT64", "shape": [1], "data": [1]}
    bad = {
        "FP64 for an FP32 input": v2_binary({"inputs": [dict(one, datatype="FP64"), key]}, image.tobytes() * 2),
        "fewer bytes than the shape": v2_binary({"inputs": [one, key]}, image.tobytes()[:-4]),
        "bytes left over": v2_binary({"inputs": [one, key]}, image.tobytes() + b"\0\0"),
        "header length beyond the body": (b'{"inputs": []}', {"Inference-Header-Content-Length": "4096"}),
        "key missing": v2_binary({"inputs": [one]}, image.tobytes()),
        "unknown output": v2_binary({"inputs": [one, key], "outputs": [{"name": "logits"}]}, image.tobytes()),
        "unknown signature": v2_binary({"inputs": [one, key], "parameters": {"signature_name": "nope"}},
                                       image.tobytes()),
        "not JSON": (b"image=0.5", {}),
    }
    for what, (body, headers) in bad.items():
        status, _, answer = post_raw(infer, body, headers)
        assert status == 400, (what, status, answer)
        assert json.loads(answer)["error"], what
    status, _, answer = post_raw(f"{served.base}/v2/models/{served.name}/versions/1/infer",
                                 *v2_binary({"inputs": [one, key]}, image.tobytes()))
    assert status == 404 and json.loads(answer)["error"]
    assert alive(served.pid)
    status, headers, answer = post_raw(infer, *v2_binary({"inputs": [one, key], "parameters": {
        "binary_data_output": True}, "outputs": [{"name": "key"}]}, image.tobytes()))
    length = int(headers["inference-header-content-length"])
    assert status == 200 and struct.unpack("<q", answer[length:]) == (1,)


def test_models_list_shows_the_served_model_ready(mnist_job, served):
    done = run_launcher(mnist_job.env, "models", "list", "--backend", "local", timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    assert rows[0][:4] == ["NAME", "URL", "MODEL_DIR", "STATUS"]
    assert ["mnist", f"{served.base}/v1/models/mnist", str(mnist_job.export), "Ready"] == rows[1][:4]


def test_batch_prediction_writes_one_json_line_per_instance(mnist_job, served, request_file, in_process, tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    lines = request_file.path.read_text().splitlines(keepends=True)
    (inputs / "part-0.json").write_text("".join(lines[:200]))
    (inputs / "part-1.json").write_text("".join(lines[200:]))
    out = tmp_path / "out"
    done = run_launcher(mnist_job.env, "predict", "mnist", "--input-paths", str(inputs / "part-*.json"),
                        "--output-path", str(out), "--batch-size", "64", "--backend", "local",
                        timeout=COMMAND_TIMEOUT)
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in (out / "prediction.results-00000-of-00001").read_text().splitlines()]
    assert [r["key"] for r in results] == list(range(COUNT))
    assert [r["classes"] for r in results] == in_process["classes"].tolist()
    assert (out / "prediction.errors_stats-00000-of-00001").read_text() == ""


def test_a_signature_the_model_lacks_is_one_line_and_exit_2_online_and_in_batch(mnist_job, served, request_file,
                                                                                 tmp_path):
    refusal = "error: --signature-name: model mnist has no signature 'nosuch'; use one of serving_default, unkeyed"
    done = run_launcher(mnist_job.env, "predict", "mnist", "--json-instances", str(request_file.path),
                        "--signature-name", "nosuch", "--backend", "local", timeout=COMMAND_TIMEOUT)
    assert (done.returncode, done.stderr.strip().splitlines(), done.stdout) == (2, [refusal], "")
    out = tmp_path / "out"
    done = run_launcher(mnist_job.env, "predict", "mnist", "--input-paths", str(request_file.path), "--output-path",
                        str(out), "--signature-name", "nosuch", "--backend", "local", timeout=COMMAND_TIMEOUT)
    assert (done.returncode, done.stderr.strip().splitlines()) == (2, [refusal])
    assert not out.exists()  # nothing written


def test_the_server_refuses_a_taken_port_with_one_line_and_exit_2(mnist_job):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "trainer.serve", "--model-dir", str(mnist_job.export),
                               "--name", "mnist", "--port", str(port)], cwd=ROOT, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: --port: 127.0.0.1:{port} is in use; stop what listens there or pick another --port"]


def test_ctrl_c_on_a_foreground_serve_leaves_no_process(mnist_job, tmp_path):
    port = free_port()
    proc, out = foreground_serve(mnist_job, "mnist-fg", port, tmp_path / "serve.out")
    try:
        pid = server_record(mnist_job, "mnist-fg")["pid"]
        assert get(f"http://127.0.0.1:{port}/v1/models/mnist-fg")[0] == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130, out.read_text()
    finally:
        reap(proc)
        stop_leftover(mnist_job, "mnist-fg")
    assert not alive(pid)
    assert not (Path(mnist_job.env["TFJOB_RUNS_DIR"]) / "_models" / "mnist-fg").exists()
    with socket.socket() as again:  # nothing listens there any more (TIME_WAIT allowed)
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))


def test_models_delete_stops_a_detached_server(mnist_job):
    port = free_port()
    done = run_launcher(mnist_job.env, "serve", "mnist-del", "--model-dir", str(mnist_job.export), "--port",
                        str(port), "--backend", "local", timeout=COMMAND_TIMEOUT)
    try:
        assert done.returncode == 0, done.stderr
        pid = server_record(mnist_job, "mnist-del")["pid"]
        assert alive(pid)
        deleted = run_launcher(mnist_job.env, "models", "delete", "mnist-del", "--backend", "local",
                               timeout=COMMAND_TIMEOUT)
        assert deleted.returncode == 0 and deleted.stdout.strip() == "model mnist-del deleted", deleted.stderr
        assert not alive(pid)
        listed = run_launcher(mnist_job.env, "models", "list", "--backend", "local", timeout=COMMAND_TIMEOUT)
        assert "mnist-del" not in listed.stdout
    finally:
        stop_leftover(mnist_job, "mnist-del")


def test_port_0_serves_at_a_free_port_that_the_url_predict_and_list_name(mnist_job, request_file, in_process):
    done = run_launcher(mnist_job.env, "serve", "mnist-any", "--model-dir", str(mnist_job.export), "--port", "0",
                        "--backend", "local", timeout=COMMAND_TIMEOUT)
    try:
        assert done.returncode == 0, done.stderr
        found = re.search(r"Model mnist-any is ready: http://127\.0\.0\.1:(\d+)/v1/models/mnist-any:predict",
                          done.stdout)
        assert found, done.stdout
        port = int(found.group(1))
        assert port != 0 and server_record(mnist_job, "mnist-any")["port"] == port
        assert get(f"http://127.0.0.1:{port}/v1/models/mnist-any")[0] == 200
        predicted = run_launcher(mnist_job.env, "predict", "mnist-any", "--json-instances", str(request_file.path),
                                 "--backend", "local", timeout=COMMAND_TIMEOUT)
        assert predicted.returncode == 0, predicted.stderr
        assert parse_table(predicted.stdout)[1] == in_process["classes"].tolist()
        listed = run_launcher(mnist_job.env, "models", "list", "--backend", "local", timeout=COMMAND_TIMEOUT)
        assert f"http://127.0.0.1:{port}/v1/models/mnist-any" in listed.stdout.split()
    finally:
        stop_leftover(mnist_job, "mnist-any")


def test_a_served_models_folder_is_private_also_where_an_older_launcher_left_it_open(mnist_job):
    runs = Path(mnist_job.env["TFJOB_RUNS_DIR"])
    models = runs / "_models"
    models.mkdir(exist_ok=True)
    for folder in (runs, models):
        os.chmod(folder, 0o755)  # as launchers before 0700/0600 left them
    old = os.umask(0o022)
    try:
        done = run_launcher(mnist_job.env, "serve", "mnist-private", "--from-job", mnist_job.name, "--port",
                            str(free_port()), "--backend", "local", timeout=COMMAND_TIMEOUT)
        found = {path: path.lstat().st_mode for path in (runs, models, *models.rglob("*"))}
    finally:
        os.umask(old)
        stop_leftover(mnist_job, "mnist-private")
    assert done.returncode == 0, done.stderr
    assert {models / "mnist-private" / "server.json", models / "mnist-private" / "server.log"} <= set(found), found
    loose = {str(path): oct(stat.S_IMODE(mode)) for path, mode in found.items()
             if stat.S_IMODE(mode) != (0o700 if stat.S_ISDIR(mode) else 0o600)}
    assert not loose, loose


def test_a_foreground_serve_whose_server_dies_exits_1_with_its_last_words(mnist_job, tmp_path):
    port = free_port()
    proc, out = foreground_serve(mnist_job, "mnist-dies", port, tmp_path / "serve.out")
    try:
        os.kill(server_record(mnist_job, "mnist-dies")["pid"], signal.SIGKILL)
        assert proc.wait(timeout=60) == 1
    finally:
        reap(proc)
        stop_leftover(mnist_job, "mnist-dies")
    assert "the model server exited with code 137" in out.read_text()
    assert not (Path(mnist_job.env["TFJOB_RUNS_DIR"]) / "_models" / "mnist-dies").exists()


def test_an_export_in_a_bucket_is_served_through_tensorflows_gcs_filesystem(mnist_job, request_file, in_process,
                                                                             gcs):
    bucket = gcs.make_bucket("serving-test")
    client = gcs.client().bucket("serving-test")
    for path in mnist_job.export.rglob("*"):
        if path.is_file():
            client.blob(f"runs/mnist/export/{path.relative_to(mnist_job.export)}").upload_from_filename(str(path))
    port, env = free_port(), {**mnist_job.env, **gcs.env}
    done = run_launcher(env, "serve", "mnist-gcs", "--model-dir", f"{bucket}/runs/mnist/export", "--port", str(port),
                        "--backend", "local", timeout=COMMAND_TIMEOUT)
    try:
        assert done.returncode == 0, done.stderr
        status, answer = post(f"http://127.0.0.1:{port}/v1/models/mnist-gcs:predict",
                              json.dumps({"instances": request_file.rows[:5]}).encode())  # image and key
        assert status == 200, answer
        assert [p["classes"] for p in answer["predictions"]] == in_process["classes"][:5].tolist()
    finally:
        stop_leftover(mnist_job, "mnist-gcs")
