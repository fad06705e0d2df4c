"""`python -m trainer.serve` knows no model: a SavedModel with a string input (built here
with TensorFlow) is served from its signatures alone, b64 values included."""
from __future__ import annotations

import base64
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.launcher_process import LAUNCHER
from tests.support.polling import wait_for
from tests.support.ports import free_port
from tests.support.serving import ROOT, get, post, post_raw
from tests.support.trainer_cluster import reap, trainer_env

pytestmark = pytest.mark.slow
READY_TIMEOUT = 300.0
SERVING_URL = re.compile(r"^Serving text version \d+ from .* at (http://\S+)$", re.M)


@pytest.fixture(scope="module")
def text_export(tmp_path_factory) -> Path:
    """export/3/: signature `serving_default` takes `text` (string [N]) and returns its
    byte length and its first byte."""
    import tensorflow as tf

    class Text(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            return {"length": tf.strings.length(text), "first": tf.strings.substr(text, 0, 1)}

    base = tmp_path_factory.mktemp("text") / "export"
    module = Text()
    tf.saved_model.save(module, str(base / "3"), signatures={"serving_default": module.serve})
    return base


def start_server(base: Path, log: Path, port: int | None = None) -> tuple[subprocess.Popen, str]:
    """`python -m trainer.serve` on `base` (on a free port, or `--port PORT`), once it
    answers ready: (process, model URL: with --port 0, the one its Serving line names)."""
    port = free_port() if port is None else port
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "trainer.serve", "--model-dir", str(base), "--name", "text",
                                 "--port", str(port)], cwd=ROOT, env=trainer_env(), stdout=out, stderr=subprocess.STDOUT)
    urls = [f"http://127.0.0.1:{port}/v1/models/text"] if port else []

    def ready() -> bool:
        if not urls:
            urls.extend(SERVING_URL.findall(log.read_text()))
        try:
            return bool(urls) and get(urls[0])[0] == 200
        except OSError:
            return False

    try:
        wait_for(ready, log.read_text, READY_TIMEOUT, check=lambda: proc.poll() is None or pytest.fail(log.read_text()))
    except BaseException:
        reap(proc)
        raise
    return proc, urls[0]


@pytest.fixture(scope="module")
def text_model(text_export):
    proc, url = start_server(text_export, text_export.parent / "server.log")
    try:
        yield url
    finally:
        reap(proc)


def test_b64_values_reach_a_string_input_and_binary_outputs_come_back(text_model):
    raw = bytes([0xFF, 0x00, 0x41])
    body = {"instances": [{"b64": base64.b64encode(raw).decode()}, "hello"]}
    status, answer = post(f"{text_model}:predict", json.dumps(body).encode())
    assert status == 200, answer
    first, second = answer["predictions"]
    assert first["length"] == 3 and first["first"] == {"b64": base64.b64encode(b"\xff").decode()}
    assert second == {"length": 5, "first": "h"}


def test_launcher_predict_takes_gclouds_text_instances_from_stdin(text_model):
    """`gcloud ai-platform predict --text-instances -`: each line of stdin one string
    instance, without its line end (and a byte order mark)."""
    done = subprocess.run([*LAUNCHER, "predict", "text", "--url", text_model.removesuffix("/v1/models/text"),
                           "--text-instances", "-"], input="\ufeffhello\r\nhi there\n".encode(), cwd=ROOT,
                          env=trainer_env(), capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines() == ["FIRST  LENGTH", "h      5", "h      8"]


def test_launcher_predict_format_json_prints_the_predictions_as_the_server_sent_them(text_model, tmp_path):
    """gcloud's `--format json`, for scripts: the list of predictions, not the table."""
    lines = tmp_path / "instances.json"
    lines.write_text('"hello"\n{"b64": "/wBB"}\n')
    done = subprocess.run([*LAUNCHER, "predict", "text", "--url", text_model.removesuffix("/v1/models/text"),
                           "--json-instances", str(lines), "--format", "json"], cwd=ROOT, env=trainer_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"first": "h", "length": 5}, {"first": {"b64": "/w=="}, "length": 3}]


def test_nan_and_infinities_reach_a_float_input_and_come_back_as_tf_serving_writes_them(tmp_path):
    """TF Serving's JSON takes and writes NaN, Infinity and -Infinity for floats (api_rest.md,
    "JSON conformance"), whatever the Content-Type; kserve's own handler refused them."""
    import tensorflow as tf

    class Double(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
        def serve(self, x):
            return {"y": 2 * x}

    module = Double()
    tf.saved_model.save(module, str(tmp_path / "export" / "1"), signatures={"serving_default": module.serve})
    proc, url = start_server(tmp_path / "export", tmp_path / "server.log")
    try:
        for content_type in ("application/json", None):
            status, _, answer = post_raw(f"{url}:predict", b'{"instances": [NaN, Infinity, -Infinity, 1.5]}',
                                         {"Content-Type": content_type} if content_type else {})
            assert status == 200, answer
            assert answer.replace(b" ", b"") == b'{"predictions":[NaN,Infinity,-Infinity,3.0]}'
    finally:
        reap(proc)


def test_the_served_version_is_the_highest_numeric_dir_and_metadata_comes_from_the_signature(text_model):
    status, answer = get(f"{text_model}/versions/3")
    assert status == 200 and answer["model_version_status"][0]["version"] == "3"
    status, answer = get(f"{text_model}/metadata")
    inputs = answer["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]
    assert inputs["text"]["dtype"] == "DT_STRING"
    assert inputs["text"]["tensor_shape"]["dim"] == [{"size": "-1", "name": ""}]


def test_a_model_or_version_not_served_is_a_404_logged_in_one_line_as_a_400_is(text_model, text_export):
    """A typo in the URL is the client's error: one INFO line in the server's log, no traceback."""
    base = text_model.removesuffix("/text")
    assert post(f"{base}/txet:predict", json.dumps({"instances": ["a"]}).encode())[0] == 404
    assert get(f"{text_model}/versions/9")[0] == 404
    assert post(f"{text_model}:predict", b'{"instances": []}')[0] == 400
    log = text_export.parent / "server.log"
    wait_for(lambda: "400 Bad Request" in log.read_text(), log.read_text, 30)
    text = log.read_text()
    assert re.search(r" INFO .*404 Not Found: Model with name txet does not exist\.$", text, re.M), text
    assert re.search(r" INFO .*404 Not Found: Model with name text version 9 \(serving version 3\) does not exist\.$",
                     text, re.M), text
    assert "Traceback" not in text and " ERROR " not in text, text


def test_a_path_or_method_the_server_lacks_is_answered_with_an_error_key_as_tf_serving_does(text_model):
    """TF Serving: "In case of error, all APIs will return a JSON object ... with error as key"
    (FastAPI's own 404 and 405 said {"detail": ...})."""
    status, answer = post(f"{text_model}/labels/stable:predict", b'{"instances": ["a"]}')
    assert (status, answer) == (404, {"error": "Not Found: POST /v1/models/text/labels/stable:predict"})
    status, answer = post(f"{text_model}:classify", b'{"examples": []}')
    assert (status, answer) == (405, {"error": "Method Not Allowed: POST /v1/models/text:classify"})


def test_a_savedmodel_that_cannot_be_loaded_is_one_line_and_exit_2(tmp_path):
    """A corrupt or cut-off export is the --model-dir's fault, as a missing one is: one
    `error: --model-dir:` line (what `launcher serve` and KServe's termination message show),
    not a traceback."""
    version = tmp_path / "export" / "5"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"not a SavedModel")
    done = subprocess.run([sys.executable, "-m", "trainer.serve", "--model-dir", str(tmp_path / "export"), "--port",
                           "0"], cwd=ROOT, env=trainer_env(), capture_output=True, text=True, timeout=READY_TIMEOUT)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"error: --model-dir: cannot load the SavedModel {version} ("
                                                           "Cannot parse file"), done.stderr


def test_a_wrong_rank_for_a_known_shape_is_a_400(text_model):
    status, answer = post(f"{text_model}:predict", json.dumps({"inputs": {"text": [["a", "b"]]}}).encode())
    assert status == 400 and "does not match the signature's [-1]" in answer["error"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_stops_the_server_cleanly(text_export, tmp_path, sig):
    log = tmp_path / "server.log"
    proc, url = start_server(text_export, log)
    try:
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 0, log.read_text()
    finally:
        reap(proc)
    assert "Stopped serving text." in log.read_text()
    with pytest.raises(OSError):
        get(url, timeout=5)


def test_port_0_serves_at_a_free_port_that_its_serving_line_names(text_export, tmp_path):
    log = tmp_path / "server.log"
    proc, url = start_server(text_export, log, port=0)
    try:
        assert url.startswith("http://127.0.0.1:") and not url.startswith("http://127.0.0.1:0/"), url
        status, answer = post(f"{url}:predict", json.dumps({"instances": ["hi"]}).encode())
        assert status == 200 and answer["predictions"] == [{"length": 2, "first": "h"}], answer
    finally:
        reap(proc)
