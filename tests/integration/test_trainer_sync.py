"""Synchronous training (MultiWorkerMirrored) and single-process training with restart."""
from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from tests.support.trainer_cluster import TrainerCluster, export_path, final_metrics, progress, summaries

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
    assert [(p.step, p.loss) for p in progress(other)] == [(p.step, p.loss) for p in progress(lead)]
    assert "Train [worker/1] step 30 of 30" in other and "Finished worker/1 at step 30" in other
    assert sorted(p.name for p in (job / "checkpoints").glob("*.index")) == ["ckpt-20.index", "ckpt-30.index"]


def test_single_process_trains_and_a_restart_continues_from_the_saved_step(mnist_dir, tmp_path):  # noqa: F811
    job = tmp_path / "job"
    with TrainerCluster({"Chief": 1}, [*args(job, mnist_dir, 40), "--histogram-every-steps", "20"],
                        tmp_path / "first") as first:
        assert first.tf_config("Chief", 0) is None  # one replica: no TF_CONFIG, as the operator does
        assert first.wait(WAIT_S) == {"chief-0": 0}, first.tails()
        log = first.log("chief-0")
    lines = progress(log)
    assert "single mode" in log and [p.step for p in lines] == [10, 20, 30, 40]
    assert lines[-1].loss < lines[0].loss
    assert (job / "checkpoints" / "ckpt-40.index").is_file()
    board = summaries(str(job / "train"))  # TensorBoard: graph, learning rate, weight histograms
    assert board["graph"] and board["scalars"]["learning_rate"] == [10, 20, 30, 40]
    assert board["histograms"]["mnist/dense/kernel"] == [20, 40] and len(board["histograms"]) == 8

    with TrainerCluster({"Chief": 1}, args(job, mnist_dir, 60), tmp_path / "second") as second:
        assert second.wait(WAIT_S) == {"chief-0": 0}, second.tails()
        log = second.log("chief-0")
    assert f"Restored {job}/checkpoints/ckpt-40 at step 40" in log
    assert [p.step for p in progress(log)] == [50, 60]
    assert final_metrics(log)[0] == 60
    assert (job / "checkpoints" / "ckpt-60.index").is_file()
    assert len(list((job / "export").iterdir())) == 2


def test_a_lost_mirrored_peer_exits_retryable_and_both_workers_resume_from_one_checkpoint(mnist_dir, tmp_path):  # noqa: F811
    job = tmp_path / "job"
    flags = args(job, mnist_dir, 100000)
    with TrainerCluster({"Worker": 2}, flags, tmp_path) as cluster:
        cluster.wait_for_line("worker-0", "Train [worker/0] step 30 of", WAIT_S)
        cluster.replicas["worker-1"].process.send_signal(signal.SIGKILL)
        assert cluster.wait(300, names=["worker-0"]) == {"worker-0": 128}, cluster.tails()
        [line] = [x for x in cluster.log("worker-0").splitlines() if x.startswith("trainer: ")]
        assert line.startswith("trainer: lost peer worker/1 (") and "exiting 128 (retryable)" in line
        state = (job / "checkpoints" / "checkpoint").read_text()
        step = int(re.search(r'^model_checkpoint_path: "(?:.*/)?ckpt-(\d+)"', state, re.M)[1])
        assert step >= 20

        for name in ("worker-0", "worker-1"):  # the operator restarts both (ExitCode: 128 and 137)
            cluster.restart(name, args(job, mnist_dir, step + 10))
        assert cluster.wait(WAIT_S) == {"worker-0": 0, "worker-1": 0}, cluster.tails()
        logs = {name: cluster.log(name).split(f"Starting worker/{name[-1]} ")[-1] for name in ("worker-0", "worker-1")}
    for log in logs.values():  # the same checkpoint on both
        assert f"Restored {job}/checkpoints/ckpt-{step} at step {step}" in log
    assert final_metrics(logs["worker-0"])[0] == step + 10
