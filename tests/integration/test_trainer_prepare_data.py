"""A replica with no shared data (a pod's own disk, e.g. on kind): without
--prepare-data the trainer says how to create the records and exits 2; with it, the
replica writes real MNIST into --data-dir itself and trains."""
from __future__ import annotations

import pytest

from tests.support.trainer_cluster import final_metrics, run_module


def test_missing_data_exits_2_naming_the_fix(tmp_path):
    done = run_module("trainer.task", ["--job-dir", str(tmp_path / "job"), "--data-dir", str(tmp_path / "none")],
                      timeout=120)
    assert done.returncode == 2
    assert "python -m trainer.data --out" in done.stderr.splitlines()[-1]


@pytest.mark.slow
def test_prepare_data_writes_mnist_then_trains(tmp_path):
    data_dir = tmp_path / "mnist"
    done = run_module("trainer.task", ["--job-dir", str(tmp_path / "job"), "--data-dir", str(data_dir),
                                       "--prepare-data", "--train-steps", "20", "--eval-every-steps", "0",
                                       "--checkpoint-every-steps", "0", "--log-every-steps", "10"],
                      timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"Preparing MNIST in {data_dir}" in done.stdout
    assert sorted(p.name.split("-")[0] for p in data_dir.iterdir()) == ["test"] * 2 + ["train"] * 8
    assert final_metrics(done.stdout)[0] == 20
