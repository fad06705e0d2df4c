"""The built serving image (the Dockerfile's `serve` target) run by podman + runc as the
predictor pod of `launcher serve --runtime-image` runs it: its own entrypoint and user
(uid 1000), no network, no capabilities, read-only root, the SavedModel mounted read-only.
The server answers TensorFlow Serving's REST API inside the container (reached with
`podman exec`, as nothing else shares its network), refuses a malformed request with 400
and {"error": ...}; the image holds kserve 0.21.0 beside the trainer's TensorFlow 2.21."""
from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from tests.support.image import package_version
from tests.support.polling import wait_for
from tests.support.tools import ROOT

TRAINER_UID = 1000
READY_TIMEOUT_S = 180.0

# A model-generic SavedModel (the server knows no model): `serving_default` doubles x.
EXPORT = """
import sys, tensorflow as tf
class Double(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
    def serve(self, x):
        return {"y": 2.0 * x}
module = Double()
tf.saved_model.save(module, sys.argv[1], signatures={"serving_default": module.serve})
"""

# What a client inside the container sees (urllib: the standard library, no network tools).
ASK = """
import json, urllib.error, urllib.request
def call(path, body=None):
    request = urllib.request.Request("http://127.0.0.1:8080" + path, data=body, method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
print(json.dumps({"ready": call("/v1/models/double"),
                  "predict": call("/v1/models/double:predict", b'{"instances": [[1.0, 2.0], [3.0, 4.0]]}'),
                  "malformed": call("/v1/models/double:predict", b"not json"),
                  "uid": [int(line.split()[1]) for line in open("/proc/1/status") if line.startswith("Uid:")][0],
                  "program": open("/proc/1/cmdline").read().split("\\0")[:3]}))
"""

FACTS = """
import importlib.metadata as m, json, tensorflow
print(json.dumps({"kserve": m.version("kserve"), "trainer": m.version("tfjob-launcher"),
                  "tensorflow": tensorflow.__version__}))
"""


@pytest.fixture()
def export(run_serve_container, tmp_path) -> Path:
    """export/1/ made by the image's own TensorFlow, owned by uid 1000."""
    base = tmp_path / "export"
    base.mkdir()
    os.chown(base, TRAINER_UID, TRAINER_UID)
    done = run_serve_container("-c", EXPORT, "/export/1", entrypoint="python", volumes=(f"{base}:/export",))
    assert done.returncode == 0, done.stderr[-3000:]
    return base


def test_the_server_starts_as_uid_1000_and_answers_tf_servings_rest_api(run_serve_container, container_exec,
                                                                       export):
    name = run_serve_container("--model-dir", "/models", "--name", "double", user=None,
                               volumes=(f"{export}:/models:ro",), detach=True).stdout

    def answered() -> dict | None:
        done = container_exec(name, "python", "-c", ASK)
        facts = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else None
        return facts if facts and facts["ready"][0] == 200 else None

    facts = wait_for(answered, lambda: f"the server in {name} did not answer", READY_TIMEOUT_S)
    assert facts["program"] == ["python", "-m", "trainer.serve"]  # PID 1: the image's entrypoint
    assert facts["uid"] == TRAINER_UID
    assert facts["ready"] == [200, {"name": "double", "ready": True}]
    assert facts["predict"] == [200, {"predictions": [[2.0, 4.0], [6.0, 8.0]]}]
    status, error = facts["malformed"]
    assert status == 400 and set(error) == {"error"}, facts


def test_the_image_holds_kserve_beside_the_trainers_tensorflow(run_serve_container):
    done = run_serve_container("-c", FACTS, entrypoint="python", user=None)
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    serve_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["serve"]
    assert f"kserve=={facts['kserve']}" in serve_extra, facts
    assert facts["trainer"] == package_version() and facts["tensorflow"].startswith("2.21."), facts
