"""Restarts that restore everything or refuse, with real trainer processes (real MNIST slice).

- A job dir trained by one model and restarted with another: the chief and the evaluator
  refuse with one line naming the job dir (exit 2), nothing written.
- SIGTERM to the chief of a parameter-server job (pod deletion, spot preemption): it
  saves a checkpoint at the step it reached and exits 143; restarted, it resumes there
  while the ps and the worker kept serving.
- SIGTERM to every replica at once (the job deleted; the local backend's stop): the ps serves
  on until the chief has saved its checkpoint and left, then exits 143.
- Ctrl-C (SIGINT) on a trainer run by hand: the same save, exit 130.
- SIGTERM to an evaluator outside any training loop: exit 143, no temporary files left.
"""
from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.polling import wait_for
from tests.support.trainer_cluster import (LOCAL, TrainerCluster, final_metrics, progress, reap, run_module, spawn,
                                          trainer_env)

pytestmark = pytest.mark.slow
WAIT_S = 540
_STOPPED = re.compile(r"^trainer: SIGTERM: saved checkpoint at step (\d+) in (\S+); exiting 143", re.M)


def args(job_dir: Path, data_dir: str, steps: int, model: str = "mnist", every: int = 0) -> list[str]:
    return ["--job-dir", str(job_dir), "--data-dir", data_dir, "--model", model, "--train-steps", str(steps),
            "--batch-size", "16", "--steps-per-execution", "5", "--log-every-steps", "10",
            "--eval-every-steps", "0", "--checkpoint-every-steps", str(every)]


def trainer_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("trainer:")]


def test_sigterm_to_every_replica_at_once_still_saves_the_chiefs_checkpoint(mnist_dir, tmp_path):  # noqa: F811
    """Before, the ps left at once: the chief's save found no variables (exit 1, a traceback)
    and the progress since the last checkpoint was lost."""
    job = tmp_path / "job"
    with TrainerCluster({"Chief": 1, "PS": 1, "Worker": 1}, args(job, mnist_dir, 100000), tmp_path) as cluster:
        cluster.wait_for_line("chief-0", "Train [chief/0] step 20 of", WAIT_S)
        for replica in cluster.replicas.values():
            replica.process.send_signal(signal.SIGTERM)
        assert cluster.wait(120, names=["chief-0"]) == {"chief-0": 143}, cluster.tails()
        assert cluster.wait(60, names=["ps-0", "worker-0"]) == {"ps-0": 143, "worker-0": 143}, cluster.tails()
        step = int(_STOPPED.search(cluster.log("chief-0"))[1])
        assert step >= progress(cluster.log("chief-0"))[-1].step >= 20
        assert (job / "checkpoints" / f"ckpt-{step}.index").is_file()
        for server in ("ps-0", "worker-0"):
            assert "trainer: SIGTERM: the chief has left; exiting 143" in cluster.log(server), cluster.tails()


def test_ctrl_c_on_a_trainer_run_by_hand_saves_and_exits_130(mnist_dir, tmp_path):  # noqa: F811
    """Before: a KeyboardInterrupt traceback, exit 1, nothing saved since the last checkpoint."""
    job = tmp_path / "job"
    with TrainerCluster({"Chief": 1}, args(job, mnist_dir, 100000), tmp_path) as cluster:
        cluster.wait_for_line("chief-0", "Train [chief/0] step 20 of", WAIT_S)
        cluster.replicas["chief-0"].process.send_signal(signal.SIGINT)
        assert cluster.wait(120) == {"chief-0": 130}, cluster.tails()
        log = cluster.log("chief-0")
    stopped = re.search(r"^trainer: SIGINT: saved checkpoint at step (\d+) in \S+; exiting 130", log, re.M)
    assert stopped and (job / "checkpoints" / f"ckpt-{stopped[1]}.index").is_file(), log[-2000:]
    assert "Traceback" not in log


def test_a_job_dir_already_at_train_steps_says_there_is_nothing_to_train(mnist_dir, tmp_path):  # noqa: F811
    """A job resubmitted under the name of a deleted one (its outputs kept) or rerun with
    the same --job-dir: the restored step already reaches --train-steps."""
    job = tmp_path / "job"
    first = run_module("trainer.task", args(job, mnist_dir, 10), timeout=WAIT_S)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "Nothing to train" not in first.stdout
    again = run_module("trainer.task", args(job, mnist_dir, 10), timeout=WAIT_S)
    assert again.returncode == 0, again.stderr[-2000:]
    assert (f"Restored {job}/checkpoints/ckpt-10 at step 10\nNothing to train: step 10 reaches --train-steps 10; the "
            "restored model is evaluated and exported (a larger --train-steps trains on, a new --job-dir starts "
            "over)\n") in again.stdout
    assert progress(again.stdout) == [] and final_metrics(again.stdout)[0] == 10


def test_a_job_dir_of_another_model_is_refused_by_chief_and_evaluator(mnist_dir, tmp_path):  # noqa: F811
    job = tmp_path / "job"
    first = run_module("trainer.task", args(job, mnist_dir, 10, "mnist"), timeout=WAIT_S)
    assert first.returncode == 0, first.stderr[-2000:]
    exports = sorted(p.name for p in (job / "export").iterdir())

    again = run_module("trainer.task", args(job, mnist_dir, 20, "mnist-cloudml"), timeout=WAIT_S)
    assert again.returncode == 2, again.stdout[-2000:] + again.stderr[-2000:]
    [line] = trainer_lines(again.stderr)
    assert line.startswith(f"trainer: --job-dir {job}: checkpoint ckpt-10 does not match --model mnist-cloudml "
                           "(it lacks model/mnist_cloudml.conv1.bias")
    assert "use a new --job-dir, or the --model the checkpoint was trained with" in line
    assert "Restored" not in again.stdout and progress(again.stdout) == []
    assert sorted(p.name for p in (job / "checkpoints").glob("*.index")) == ["ckpt-10.index"]
    assert sorted(p.name for p in (job / "export").iterdir()) == exports

    config = json.dumps({"cluster": {"chief": [f"{LOCAL}:{free_port()}"]}, "task": {"type": "evaluator", "index": 0}})
    evaluator = run_module("trainer.task", args(job, mnist_dir, 20, "mnist-cloudml"),
                           {"TF_CONFIG": config, "TRAINER_ORPHAN_SECONDS": "60"}, timeout=WAIT_S)
    assert evaluator.returncode == 2, evaluator.stdout[-2000:] + evaluator.stderr[-2000:]
    [line] = trainer_lines(evaluator.stderr)
    assert line.startswith(f"trainer: --job-dir {job}: checkpoint ckpt-10 does not match --model mnist-cloudml")
    assert "Eval step" not in evaluator.stdout


def test_sigterm_makes_the_chief_save_and_a_restart_resumes_there(mnist_dir, tmp_path):  # noqa: F811
    job = tmp_path / "job"
    with TrainerCluster({"Chief": 1, "PS": 1, "Worker": 1}, args(job, mnist_dir, 100000), tmp_path) as cluster:
        cluster.wait_for_line("chief-0", "Train [chief/0] step 20 of", WAIT_S)
        cluster.replicas["chief-0"].process.send_signal(signal.SIGTERM)
        assert cluster.wait(120, names=["chief-0"]) == {"chief-0": 143}, cluster.tails()
        log = cluster.log("chief-0")
        step = int(_STOPPED.search(log)[1])
        reached = progress(log)[-1].step
        assert step >= reached >= 20  # every step it had results for is in the checkpoint
        assert (job / "checkpoints" / f"ckpt-{step}.index").is_file()
        assert not (job / "export").exists() and not (job / "done.json").exists()

        cluster.restart("chief-0", args(job, mnist_dir, step + 20))
        codes = cluster.wait(WAIT_S)
        assert set(codes.values()) == {0}, cluster.tails()
        second = cluster.log("chief-0").split("Starting chief/0 ")[-1]
    assert f"Restored {job}/checkpoints/ckpt-{step} at step {step}" in second
    assert [p.step for p in progress(second)][0] > step
    assert final_metrics(second)[0] == step + 20


def test_sigterm_outside_the_training_loop_exits_143_and_leaves_no_temporary_files(mnist_dir, tmp_path):  # noqa: F811
    """A side-car evaluator stopped by the supervisor or the kubelet once the job is done
    (or while it waits for checkpoints): exit 143 as SIGTERM's default, and the private
    temporary directory of AutoGraph's files is removed, not left in TMPDIR."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    config = {"cluster": {"chief": [f"{LOCAL}:{free_port()}"]}, "task": {"type": "evaluator", "index": 0}}
    env = {"TF_CONFIG": json.dumps(config), "TMPDIR": str(scratch)}
    log_path = tmp_path / "evaluator-0.log"
    evaluator = spawn(args(tmp_path / "job", mnist_dir, 100), log_path, trainer_env(env))
    try:
        wait_for(lambda: "Evaluator watching" in log_path.read_text() or evaluator.poll() is not None,
                 "the evaluator's start", WAIT_S)
        assert evaluator.poll() is None, log_path.read_text()
        assert [path.name.startswith("trainer-") for path in scratch.iterdir()] == [True]  # its private directory
        evaluator.send_signal(signal.SIGTERM)
        assert evaluator.wait(timeout=60) == 143, log_path.read_text()
    finally:
        reap(evaluator)
    assert "trainer: SIGTERM; exiting 143" in log_path.read_text()
    assert list(scratch.iterdir()) == []
    # its heartbeat went with it: a chief of the same job dir does not count on it
    assert (tmp_path / "job" / "evaluator").is_dir() and not (tmp_path / "job" / "evaluator" / "alive.json").exists()
