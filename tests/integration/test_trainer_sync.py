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
    for log in (lead, other):  # each worker iterates its own pipeline: no MultiDeviceIterator's warning
        assert "GeneratorDatasetOp" not in log and "will not be optimized" not in log, log


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


_STOPPED = re.compile(r"^trainer: (SIGTERM|a peer got SIGTERM): saved checkpoint at step (\d+) in (\S+); exiting 143 "
                      r"\(retryable\)", re.M)


def test_sigterm_to_one_mirrored_worker_makes_every_worker_save_one_step_and_a_restart_resumes_there(
        mnist_dir, tmp_path):  # noqa: F811
    """Its pod deleted or its spot VM preempted: worker-1 (not the one that writes the job
    dir's checkpoints) gets SIGTERM; the next call's all-reduce tells worker-0 too, both
    save the same step and exit 143, and both restarted resume there."""
    job = tmp_path / "job"
    with TrainerCluster({"Worker": 2}, args(job, mnist_dir, 100000), tmp_path) as cluster:
        cluster.wait_for_line("worker-0", "Train [worker/0] step 30 of", WAIT_S)
        cluster.replicas["worker-1"].process.send_signal(signal.SIGTERM)
        assert cluster.wait(120) == {"worker-0": 143, "worker-1": 143}, cluster.tails()
        stopped = {name: _STOPPED.search(cluster.log(name)) for name in ("worker-0", "worker-1")}
        assert stopped["worker-1"][1] == "SIGTERM" and stopped["worker-0"][1] == "a peer got SIGTERM", cluster.tails()
        step = int(stopped["worker-0"][2])
        assert int(stopped["worker-1"][2]) == step >= progress(cluster.log("worker-0"))[-1].step >= 30
        assert stopped["worker-0"][3] == str(job / "checkpoints")  # worker-1 wrote its copy to a scratch dir
        assert (job / "checkpoints" / f"ckpt-{step}.index").is_file() and not (job / "export").exists()

        for name in ("worker-0", "worker-1"):  # the operator restarts both (ExitCode: 143 is retryable)
            cluster.restart(name, args(job, mnist_dir, step + 10))
        assert cluster.wait(WAIT_S) == {"worker-0": 0, "worker-1": 0}, cluster.tails()
        logs = {name: cluster.log(name).split(f"Starting worker/{name[-1]} ")[-1] for name in ("worker-0", "worker-1")}
    for log in logs.values():
        assert f"Restored {job}/checkpoints/ckpt-{step} at step {step}" in log
    assert final_metrics(logs["worker-0"])[0] == step + 10


def test_sigterm_to_a_single_process_saves_and_a_restart_resumes_there(mnist_dir, tmp_path):  # noqa: F811
    job = tmp_path / "job"
    with TrainerCluster({"Chief": 1}, args(job, mnist_dir, 100000), tmp_path / "first") as first:
        first.wait_for_line("chief-0", "Train [chief/0] step 20 of", WAIT_S)
        first.replicas["chief-0"].process.send_signal(signal.SIGTERM)
        assert first.wait(120) == {"chief-0": 143}, first.tails()
        stopped = _STOPPED.search(first.log("chief-0"))
    assert stopped[1] == "SIGTERM" and stopped[3] == str(job / "checkpoints")
    step = int(stopped[2])
    assert step >= 20 and (job / "checkpoints" / f"ckpt-{step}.index").is_file()
    with TrainerCluster({"Chief": 1}, args(job, mnist_dir, step + 10), tmp_path / "second") as second:
        assert second.wait(WAIT_S) == {"chief-0": 0}, second.tails()
        log = second.log("chief-0")
    assert f"Restored {job}/checkpoints/ckpt-{step} at step {step}" in log
    assert final_metrics(log)[0] == step + 10
