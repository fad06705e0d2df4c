"""The trainer's gs:// output checks (trainer/outputs.unwritable_url) against the real GCS
emulator, through TensorFlow's own gs:// filesystem: what `trainer.data --out` and
`trainer.make_request --out` say before any work, in one line, exit 2.

A bucket that does not exist was the worst: TensorFlow's makedirs looks for an existing
parent up to the bucket and past it, without end (`trainer.data --out gs://no-such-bucket/x`
hung, asking for the bucket hundreds of times a second, and a trainer with such a --job-dir
hung after its first steps, deaf to SIGTERM). Permission denied and a failing GCS are
answered by the test TLS proxy's injected faults (tests/support/tls_proxy.py `Fault`): the
emulator has no IAM and does not fail.

TensorFlow runs in a subprocess: a gs:// call can hold the GIL while it waits for the
proxy, which runs in this process."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.tls_proxy import Fault
from tests.support.tools import ROOT
from tests.support.trainer_cluster import run_module

pytestmark = pytest.mark.slow
TIMEOUT_S = 180  # each command: it hung without end on a missing bucket
MISSING = "gs://s52-no-such-bucket"

_CHECKS = """
import json, sys
import tensorflow as tf
from trainer import outputs
root = sys.argv[1]
with tf.io.gfile.GFile(root + "/afile", "w") as handle:
    handle.write("an object")
with tf.io.gfile.GFile(root + "/folder/obj", "w") as handle:
    handle.write("an object in a folder")
cases = json.loads(sys.argv[2])
results = {}
for name, (out, example) in cases.items():
    try:
        results[name] = outputs.unwritable_url(out, example)
    except tf.errors.OpError as error:
        results[name] = "raised " + type(error).__name__
print(json.dumps(results))
"""


@pytest.fixture
def proxy(gcs):
    """The session's proxy, its injected faults removed after the test."""
    yield gcs.proxy
    gcs.proxy.clear_faults()


def test_what_cannot_be_written_in_a_bucket_is_named_before_any_work(gcs, proxy):
    root, objects_only = gcs.make_bucket("s52-outputs"), gcs.make_bucket("s52-objects-only")
    cases = {
        "missing bucket": (f"{MISSING}/data", None),
        "missing bucket, file": (f"{MISSING}/request.json", "request.json"),
        "folder that is an object": (f"{root}/afile", None),
        "folder under an object": (f"{root}/afile/sub", None),
        "file under an object": (f"{root}/afile/request.json", "request.json"),
        "file that is a folder": (f"{root}/folder/", "request.json"),
        "file that is the bucket": (root, "request.json"),
        "new folder": (f"{root}/new/data/", None),
        "existing folder": (f"{root}/folder", None),
        "new file": (f"{root}/folder/request.json", "request.json"),
        "denied": ("gs://s52-denied/data", None),
        "bucket metadata denied": (f"{objects_only}/data", None),
        "failing": ("gs://s52-failing/data", None),
    }
    denied = proxy.inject(Fault(403, ("GET",), "/b/s52-denied", times=None))
    failing = proxy.inject(Fault(503, ("GET",), "/b/s52-failing", times=None))
    bucket_denied = proxy.inject(Fault(403, ("GET",), "/storage/v1/b/s52-objects-only", times=None, exact=True))
    env = dict(os.environ, **gcs.env, GCS_RETRY_CONFIG_MAX_RETRIES="1", GCS_RETRY_CONFIG_INIT_DELAY_TIME_US="1000",
               TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-c", _CHECKS, root, json.dumps(cases)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout)

    missing = f"bucket {MISSING} does not exist; create it (gcloud storage buckets create {MISSING}) or give another"
    assert said["missing bucket"] == said["missing bucket, file"] == missing
    is_a_file = f"{root}/afile is a file (an object), not a folder; give another path"
    assert said["folder that is an object"] == said["folder under an object"] == said["file under an object"] == \
        is_a_file
    assert said["file that is a folder"] == f"{root}/folder/ is a folder; give a file in it, e.g. " \
                                            f"{root}/folder/request.json"
    assert said["file that is the bucket"] == f"{root} is a folder; give a file in it, e.g. {root}/request.json"
    assert said["new folder"] is said["existing folder"] is said["new file"] is None
    assert said["denied"].startswith("cannot read gs://s52-denied (PermissionDeniedError: ")
    assert said["denied"].endswith("give credentials that may read and write it (GOOGLE_APPLICATION_CREDENTIALS, "
                                   "gcloud auth application-default login, the pod's service account)")
    assert denied.hits >= 1
    assert said["failing"] == "raised AbortedError" and failing.hits >= 2  # transient: the caller's to handle
    # roles/storage.objectAdmin (the README's GKE role) may not read the bucket's metadata, and writes objects
    assert said["bucket metadata denied"] is None and bucket_denied.hits >= 1
    assert gcs.list(f"{root}/new") == []  # asked, nothing written


@pytest.mark.parametrize("module, args", [
    ("trainer.data", ["--out", f"{MISSING}/data/mnist", "--offline", "--train-limit", "100", "--test-limit", "50"]),
    ("trainer.make_request", ["--data-dir", "data/mnist", "--count", "2", "--out", f"{MISSING}/request.json"]),
])
def test_a_missing_bucket_is_one_line_and_exit_2_not_a_hang(gcs, module, args, tmp_path):
    """trainer.data hung without end; make_request read its records, then failed with exit 1
    and GCS's JSON error body."""
    if module == "trainer.make_request":  # records to read (a local dir of this test's)
        made = run_module("trainer.data", ["--out", str(tmp_path / "data"), "--offline", "--train-limit", "100",
                                           "--test-limit", "50"], timeout=TIMEOUT_S)
        assert made.returncode == 0, made.stderr[-2000:]
        args = [str(tmp_path / "data") if arg == "data/mnist" else arg for arg in args]
    done = run_module(module, args, gcs.env, timeout=TIMEOUT_S)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith(f"{module}: ")]
    assert lines == [f"{module}: --out: bucket {MISSING} does not exist; create it (gcloud storage buckets create "
                     f"{MISSING}) or give another"], done.stderr[-3000:]
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_trainers_job_dir_in_a_missing_bucket_is_one_line_before_training(gcs, tmp_path):
    """trainer.task trained, then waited on the bucket without end (SIGTERM did not stop it)."""
    made = run_module("trainer.data", ["--out", str(tmp_path / "data"), "--offline", "--train-limit", "100",
                                       "--test-limit", "50"], timeout=TIMEOUT_S)
    assert made.returncode == 0, made.stderr[-2000:]
    done = run_module("trainer.task", ["--job-dir", f"{MISSING}/runs/1", "--data-dir", str(tmp_path / "data"),
                                       "--train-steps", "5"], gcs.env, timeout=TIMEOUT_S)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1] == (f"trainer: --job-dir: bucket {MISSING} does not exist; create it (gcloud "
                                            f"storage buckets create {MISSING}) or give another")
    assert "Train" not in done.stdout and "Traceback" not in done.stderr


@pytest.mark.parametrize("module, args", [
    ("trainer.predict", ["--model-dir", f"{MISSING}/runs/1/export", "--json-instances", "-"]),
    ("trainer.serve", ["--model-dir", f"{MISSING}/runs/1/export", "--port", "0"]),
])
def test_an_export_in_a_missing_bucket_names_the_bucket(gcs, module, args):
    """Both said "no SavedModel in gs://.../export", naming no bucket."""
    done = run_module(module, args, gcs.env, timeout=TIMEOUT_S)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1].endswith(f"--model-dir: bucket {MISSING} does not exist ({MISSING}/runs/1/"
                                                 "export); give the bucket the job exported to"), done.stderr[-3000:]


def test_gcs_failing_after_tensorflows_retries_is_one_line_and_retryable(gcs, proxy):
    """Not bad input: the trainer's storage line and exit 128 (a traceback, exit 1, before)."""
    failing = proxy.inject(Fault(503, ("GET",), "/b/s52-failing", times=None))
    env = {**gcs.env, "GCS_RETRY_CONFIG_MAX_RETRIES": "1", "GCS_RETRY_CONFIG_INIT_DELAY_TIME_US": "1000"}
    done = run_module("trainer.data", ["--out", "gs://s52-failing/data", "--offline", "--train-limit", "100",
                                       "--test-limit", "50"], env, timeout=TIMEOUT_S)
    assert done.returncode == 128, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("trainer.data: ")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert lines[0].startswith("trainer.data: storage request for gs://s52-failing failed (AbortedError, HTTP 503)")
    assert lines[0].endswith("exiting 128 (retryable)") and failing.hits >= 2
