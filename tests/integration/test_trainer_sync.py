"""Synchronous training (MultiWorkerMirrored) and single-process training with restart."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.trainer_cluster import TrainerCluster, export_path, final_metrics, mnist_dir, progress  # noqa: F401

pytestmark = pytest.mark.slow
WAIT_S = 540


def args(job_dir: Path, data_dir: str, steps: int) -> list[str]:
    return ["--job-dir", str(job_dir), "--data-dir", data_dir, "--train-steps", str(steps),
            "--batch-size", "16", "--steps-per-execution", "5", "--log-every-steps", "10",
            "--eval-every-steps", "20", "--checkpoint-every-steps", "20"]


def test_two_mirrored_workers_train_and_worker_0_reports(mnist_dir, tmp_path):  # noqa: F811
    job = tmp_path / "job"
    with TrainerCluster({"Worker": 2}, args(job, mnist_dir, 30), tmp_path) as cluster:
        codes = cluster.wait(WAIT_S)
        assert codes == {"worker-0": 0, "worker-1": 0}, cluster.tails()
        lead, other = cluster.log("worker-0"), cluster.log("worker-1")
    assert [p.step for p in progress(lead)] == [10, 20, 30]
    assert "sync mode" in lead and final_metrics(lead)[0] == 30
    assert Path(export_path(lead)).parent == job / "export"
    assert progress(other) == [] and "Finished worker/1 at step 30" in other
    assert sorted(p.name for p in (job / "checkpoints").glob("*.index")) == ["ckpt-20.index", "ckpt-30.index"]


def test_single_process_trains_and_a_restart_continues_from_the_saved_step(mnist_dir, tmp_path):  # noqa: F811
    job = tmp_path / "job"
    with TrainerCluster({"Chief": 1}, args(job, mnist_dir, 40), tmp_path / "first") as first:
        assert first.tf_config("Chief", 0) is None  # one replica: no TF_CONFIG, as the operator does
        assert first.wait(WAIT_S) == {"chief-0": 0}, first.tails()
        log = first.log("chief-0")
    lines = progress(log)
    assert "single mode" in log and [p.step for p in lines] == [10, 20, 30, 40]
    assert lines[-1].loss < lines[0].loss
    assert (job / "checkpoints" / "ckpt-40.index").is_file()

    with TrainerCluster({"Chief": 1}, args(job, mnist_dir, 60), tmp_path / "second") as second:
        assert second.wait(WAIT_S) == {"chief-0": 0}, second.tails()
        log = second.log("chief-0")
    assert f"Restored {job}/checkpoints/ckpt-40 at step 40" in log
    assert [p.step for p in progress(log)] == [50, 60]
    assert final_metrics(log)[0] == 60
    assert (job / "checkpoints" / "ckpt-60.index").is_file()
    assert len(list((job / "export").iterdir())) == 2
