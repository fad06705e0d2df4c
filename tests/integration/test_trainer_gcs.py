"""Parameter-server training with --data-dir and --job-dir on gs://, through TensorFlow's
built-in GCS filesystem and the `gcs` emulator fixture (tests/support/gcs.py)."""
from __future__ import annotations

import json

import pytest

from tests.support.trainer_cluster import TrainerCluster, export_path, final_metrics, run_module, write_mnist

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

    request = tmp_path / "request.json"
    made = run_module("trainer.make_request", ["--data-dir", data_dir, "--count", "2", "--out", str(request)], gcs.env)
    assert made.returncode == 0, made.stderr[-2000:]
    done = run_module("trainer.predict", ["--model-dir", export, "--json-instances", str(request)], gcs.env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.splitlines()) == 3
