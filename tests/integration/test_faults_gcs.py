"""GCS errors under TensorFlow's gs:// filesystem (issue 7), injected by the test TLS proxy
in front of the real GCS emulator (tests/support/tls_proxy.py, `Fault`).

- Transient 5xx / 429 are retried by TF itself (RetryingUtils: 10 retries by default,
  delay 1 s doubling to 32 s, plus up to 1 s of jitter; GCS_RETRY_CONFIG_* change it), for
  the upload's first request, metadata reads and object reads; past the limit TF gives up
  with AbortedError "All N retry attempts failed".
- A training job survives such errors; a permanent one (403 on every write) fails it with
  one line naming the path, and the launcher reports Failed with exit code 1.

TensorFlow always runs in a subprocess: a gs:// call can hold the GIL while it waits for
the proxy, which runs in this process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.faults import LocalJob
from tests.support.local_jobs import trainer_args
from tests.support.tls_proxy import Fault
from tests.support.tools import ROOT
from tests.support.trainer_cluster import final_metrics

pytestmark = pytest.mark.slow
SINGLE = ("--workers", "1", "--ps", "0")  # one replica: a single-process trainer (cheap)

_GFILE = """
import json, sys
import tensorflow as tf
root = sys.argv[1]
with tf.io.gfile.GFile(root + "/retry/a.txt", "w") as handle:
    handle.write("survived")
with tf.io.gfile.GFile(root + "/retry/a.txt") as handle:
    text = handle.read()
try:
    with tf.io.gfile.GFile(root + "/retry/never.txt", "w") as handle:
        handle.write("x")
    error = None
except tf.errors.OpError as exc:
    error = type(exc).__name__ + ": " + str(exc)
print(json.dumps({"text": text, "error": error}))
"""


@pytest.fixture
def proxy(gcs):
    """The session's proxy, its injected faults removed after the test."""
    yield gcs.proxy
    gcs.proxy.clear_faults()


def statuses(proxy, method: str, part: str) -> list[tuple[int, bool]]:
    """(status, injected) of each request `method` whose path contains `part`."""
    return [(r.status, r.injected) for r in proxy.forwarded if r.method == method and part in r.path]


def test_gfile_retries_transient_5xx_and_429_and_gives_up_after_its_retries(gcs, proxy):
    bucket = gcs.make_bucket("faults-gfile")[len("gs://"):]
    faults = [proxy.inject(Fault(503, ("POST",), "name=retry/a.txt", times=2)),  # upload start
              proxy.inject(Fault(429, ("GET",), f"/b/{bucket}/o/retry/a.txt?", times=2)),  # metadata
              proxy.inject(Fault(503, ("GET",), f"/{bucket}/retry/a.txt", times=2)),  # object read
              proxy.inject(Fault(503, ("POST",), "name=retry/never.txt", times=None))]  # never recovers
    env = dict(os.environ, **gcs.env, GCS_RETRY_CONFIG_MAX_RETRIES="3",
               GCS_RETRY_CONFIG_INIT_DELAY_TIME_US="100000", TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-c", _GFILE, f"gs://{bucket}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)

    assert result["text"] == "survived"
    assert [f.hits for f in faults[:3]] == [2, 2, 2]
    assert statuses(proxy, "POST", "name=retry%2Fa.txt") == [(503, True), (503, True), (200, False)]
    assert statuses(proxy, "GET", f"/{bucket}/retry%2Fa.txt")[-3:] == [(503, True), (503, True), (206, False)]
    # the limit: 1 try + 3 retries (per upload attempt; closing the file makes more than one),
    # then AbortedError naming the last failure
    attempts = statuses(proxy, "POST", "name=retry%2Fnever.txt")
    assert len(attempts) >= 4 and set(attempts) == {(503, True)}
    assert result["error"].startswith("AbortedError: All 3 retry attempts failed. The last failure: ")
    assert "HTTP response code 503" in result["error"]


def test_a_job_on_gcs_survives_transient_errors(local_env, gcs, proxy, mnist_dir):  # noqa: F811
    bucket = gcs.make_bucket("faults-transient")
    name = bucket[len("gs://"):]
    faults = [proxy.inject(Fault(429, ("GET",), f"/b/{name}/o", times=2)),
              proxy.inject(Fault(503, ("POST",), "name=job/checkpoints/ckpt-10", times=2))]
    with LocalJob({**local_env, **gcs.env}, "gcs-transient", *SINGLE, "--job-dir", f"{bucket}/job",
                  *trainer_args(mnist_dir, 20)) as job:  # TF's default retry settings
        code, out = job.finish()
        assert code == 0, out[-3000:]
        log = job.log("worker-0")
    assert [f.hits for f in faults] == [2, 2]
    assert final_metrics(log)[0] == 20
    names = gcs.list(f"{bucket}/job")
    assert {"job/checkpoints/ckpt-10.index", "job/checkpoints/ckpt-20.index", "job/done.json"} <= set(names)
    marker = gcs.client().bucket(name).blob("job/done.json").download_as_text()
    assert json.loads(marker)["step"] == 20


def test_a_permanent_storage_error_fails_the_job_with_one_line(local_env, gcs, proxy, mnist_dir):  # noqa: F811
    bucket = gcs.make_bucket("faults-denied")
    name = bucket[len("gs://"):]
    denied = proxy.inject(Fault(403, ("POST", "PUT", "PATCH", "DELETE"), f"/b/{name}/o", times=None))
    # ExitCode: exit 1 is a permanent error, so the job fails at once instead of restarting
    with LocalJob({**local_env, **gcs.env}, "gcs-denied", *SINGLE, "--restart-policy", "ExitCode",
                  "--job-dir", f"{bucket}/job", *trainer_args(mnist_dir, 20)) as job:
        code, out = job.finish()
        log = job.log("worker-0")
        status = job.run.status()
    assert code == 1, out[-3000:]
    assert denied.hits >= 1 and gcs.list(f"{bucket}/job") == []
    lines = [line for line in log.splitlines() if line.startswith("trainer: ")]
    assert len(lines) == 1 and 'trainer/task.py", line' not in log, log[-3000:]  # no traceback
    assert lines[0].startswith(f"trainer: storage request for {bucket}/job")
    assert "(PermissionDeniedError, HTTP 403)" in lines[0] and "restarting will not help" in lines[0]
    assert f"[worker-0] {lines[0]}" in out.splitlines()  # the launcher shows the reason
    failed = status["conditions"][-1]
    assert (failed["type"], failed["reason"]) == ("Failed", "TFJobFailed")
    assert "worker-0 exited with code 1 (restartPolicy ExitCode)" in failed["message"]
    assert "gcs-denied: Failed (TFJobFailed: " in out
