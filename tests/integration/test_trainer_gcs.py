"""Parameter-server training with --data-dir and --job-dir on gs://, through TensorFlow's
built-in GCS filesystem and the `gcs` emulator fixture (tests/support/gcs.py)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.tls_proxy import Fault
from tests.support.trainer_cluster import (ROOT, TrainerCluster, export_path, final_metrics, run_module, trainer_env,
                                           write_mnist)

pytestmark = pytest.mark.slow
WAIT_S = 540


def test_ps_job_reads_and_writes_gcs(gcs, tmp_path):
    bucket = gcs.make_bucket("trainer-gcs-test")
    data_dir, job_dir = f"{bucket}/mnist", f"{bucket}/jobs/mnist-ps"
    write_mnist(data_dir, gcs.env)
    assert len([n for n in gcs.list(data_dir) if n.endswith(".tfrecord")]) == 10

    args = ["--job-dir", job_dir, "--data-dir", data_dir, "--train-steps", "30", "--batch-size", "16",
            "--steps-per-execution", "5", "--log-every-steps", "10", "--eval-every-steps", "0",
            "--checkpoint-every-steps", "20"]
    with TrainerCluster({"Chief": 1, "PS": 1, "Worker": 1}, args, tmp_path, env=gcs.env) as cluster:
        codes = cluster.wait(WAIT_S)
        assert set(codes.values()) == {0}, cluster.tails()
        chief = cluster.log("chief-0")
        for name in ("ps-0", "worker-0"):  # they saw the done marker in the bucket
            assert "Chief marked the job done in gs://trainer-gcs-test/jobs/mnist-ps/done.json" in cluster.log(name)
    assert final_metrics(chief)[0] == 30

    names = [name[len("jobs/mnist-ps/"):] for name in gcs.list(job_dir)]
    export = export_path(chief)
    stamp = export.rsplit("/", 1)[1]
    assert export == f"{job_dir}/export/{stamp}"
    assert {"checkpoints/checkpoint", "checkpoints/ckpt-30.index", f"export/{stamp}/saved_model.pb",
            "done.json"} <= set(names)
    assert any(n.startswith("train/events.out.tfevents.") for n in names)
    assert any(n.startswith("eval/events.out.tfevents.") for n in names)
    marker = gcs.client().bucket("trainer-gcs-test").blob("jobs/mnist-ps/done.json").download_as_text()
    assert json.loads(marker) | {"step": 30, "export": export} == json.loads(marker)

    request = f"{bucket}/requests/request.json"  # make_request writes gs:// too
    made = run_module("trainer.make_request", ["--data-dir", data_dir, "--count", "2", "--out", request], gcs.env)
    assert made.returncode == 0, made.stderr[-2000:]
    assert gcs.list(f"{bucket}/requests") == ["requests/request.json"]
    done = run_module("trainer.predict", ["--model-dir", export, "--json-instances", request], gcs.env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.splitlines()) == 3


_WATCH = """
import json, sys
import tensorflow as tf
from trainer import lifecycle
job_dir, retries, first = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "first"
lifecycle.write_done(job_dir, step=1, export_path=None)  # an earlier run's marker: the baseline
if first:  # the faults hit the Watch's first read (a server starting while storage hiccups)
    print("ready", flush=True)
    sys.stdin.readline()
watch = lifecycle.Watch(job_dir, None, poll_seconds=0.05, orphan_seconds=60, storage_retries=retries)
if not first:
    print("ready", flush=True)
    sys.stdin.readline()  # the test injects its faults meanwhile
lifecycle.write_done(job_dir, step=2, export_path=None)  # the chief finishes (an upload: POST)
try:
    print(json.dumps({"outcome": watch.wait(), "baseline": watch.baseline is not None}))
except tf.errors.OpError as error:
    print(json.dumps({"error": type(error).__name__}))
"""


def watch_through_faults(gcs, job_dir: str, retries: int, fault: Fault, first: bool = False) -> tuple[dict, str]:
    """Run lifecycle.Watch in a subprocess against `job_dir`, `fault` injected between its
    first read and its polls (`first`: before its first read); (its result, its stderr)."""
    env = trainer_env({**gcs.env, "GCS_RETRY_CONFIG_MAX_RETRIES": "1", "GCS_RETRY_CONFIG_INIT_DELAY_TIME_US": "1000"})
    with subprocess.Popen([sys.executable, "-c", _WATCH, job_dir, str(retries), "first" if first else "polls"],
                          cwd=ROOT, env=env, text=True,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        try:
            assert process.stdout.readline().strip() == "ready", process.stderr.read()[-2000:]
            gcs.proxy.inject(fault)
            out, err = process.communicate("go\n", timeout=300)
        finally:
            if process.poll() is None:
                process.kill()
            gcs.proxy.clear_faults()
    assert process.returncode == 0, err[-2000:]
    return json.loads(out.splitlines()[-1]), err


def test_done_marker_polling_rides_out_transient_storage_errors(gcs):
    job_dir = gcs.make_bucket("trainer-watch-test") + "/jobs/watch"
    fault = Fault(503, ("GET",), "jobs/watch/done.json", times=6)  # 3 polls fail (1 try + 1 TF retry each)
    result, err = watch_through_faults(gcs, job_dir, 10, fault)
    assert result == {"outcome": "done", "baseline": True} and fault.hits == 6
    retries = [line for line in err.splitlines() if line.startswith(f"Could not read {job_dir}/done.json")]
    assert len(retries) == 3 and retries[0].endswith("retrying in 0.05 s (1 of 10)"), err[-2000:]

    # storage that stays down ends the wait after the bounded retries, with TF's error
    result, err = watch_through_faults(gcs, job_dir, 2, Fault(503, ("GET",), "jobs/watch/done.json", times=None))
    assert result == {"error": "AbortedError"} and "(2 of 2)" in err

    # the first read (the baseline a server compares with) rides them out too: nothing to lose
    # there, but a ps or worker that died of it would be restarted for nothing
    fault = Fault(503, ("GET",), "jobs/watch/done.json", times=4)
    result, err = watch_through_faults(gcs, job_dir, 2, fault, first=True)
    # the earlier run's marker read as the baseline, not taken for this run's end
    assert result == {"outcome": "done", "baseline": True} and fault.hits == 4, err[-2000:]
