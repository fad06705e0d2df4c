"""The README's taxi commands with gs:// paths (`trainer.data --dataset taxi --out
gs://my-bucket/data/taxi`, then training, make_request and predict on them), through
TensorFlow's own GCS filesystem against the real fake-gcs-server of the `gcs` fixture
(tests/support/gcs.py)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.trainer_cluster import TrainerCluster, export_path, run_module
from tests.support.taxi_data import taxi_flags

pytestmark = pytest.mark.slow
WAIT_S = 600


def test_the_trips_written_to_a_bucket_train_and_the_export_there_predicts(gcs, taxi_dir, tmp_path):  # noqa: F811
    bucket = gcs.make_bucket("taxi-gcs-test")
    data_dir, job_dir = f"{bucket}/data/taxi", f"{bucket}/jobs/taxi-1"
    wrote = run_module("trainer.data", ["--dataset", "taxi", "--out", data_dir], gcs.env, timeout=600)
    assert wrote.returncode == 0, wrote.stderr[-2000:]
    assert wrote.stdout == f"Wrote 12002 train and 3000 eval trips to {data_dir}\n"
    objects = {name.rsplit("/", 1)[1]: gcs.client().bucket("taxi-gcs-test").blob(name).download_as_bytes()
               for name in gcs.list(data_dir) if not name.endswith("/")}  # TensorFlow's folder placeholders
    assert objects == {path.name: path.read_bytes() for path in Path(taxi_dir).iterdir()}  # no staging left

    with TrainerCluster({"Chief": 1}, taxi_flags(job_dir, data_dir, 20), tmp_path, env=gcs.env) as cluster:
        assert cluster.wait(WAIT_S) == {"chief-0": 0}, cluster.tails()
        chief = cluster.log("chief-0")
    assert f"Reading train: 4 files in {data_dir}; eval: 1 file in {data_dir}" in chief, chief[-3000:]
    assert re.search(r"^Final metrics after 20 steps: loss [0-9.]+, accuracy [0-9.]+, auc [0-9.]+$", chief, re.M)
    export = export_path(chief)
    assert export.startswith(f"{job_dir}/export/"), export

    trips = f"{bucket}/requests/trips.json"
    made = run_module("trainer.make_request", ["--model", "taxi", "--data-dir", data_dir, "--count", "3",
                                               "--out", trips], gcs.env)
    assert made.returncode == 0, made.stderr[-2000:]
    lines = gcs.client().bucket("taxi-gcs-test").blob("requests/trips.json").download_as_text().splitlines()
    assert len(lines) == 3 and all("payment_type" in json.loads(line) for line in lines)
    done = run_module("trainer.predict", ["--model-dir", f"{job_dir}/export", "--json-instances", trips], gcs.env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0].split() == ["CLASSES", "LOGISTIC", "PROBABILITIES"]
    assert len(done.stdout.splitlines()) == 4
