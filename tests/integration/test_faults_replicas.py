"""Kill any replica of a parameter-server job and lose nothing past the last checkpoint
(issue 7): real trainer processes under the local backend, which restarts them as
training-operator would. Small MNIST slice and step counts; every wait is bounded; the
launcher is reaped and the job stopped even when a test fails.

- worker SIGKILL: ClusterCoordinator reschedules its closures, the worker restarts and
  rejoins, the chief never stops; the job ends at exactly --train-steps.
- chief SIGKILL: the chief restarts and resumes from the latest checkpoint; ps and
  workers keep serving (the new coordinator reconnects to them).
- ps SIGKILL: the chief sees the loss, exits 128 (retryable), the ps and the chief are
  restarted, and the chief restores the latest checkpoint into the empty new ps.
"""
from __future__ import annotations

import pytest

from tests.support.local_jobs import trainer_args
from tests.support.polling import wait_for
from tests.support.faults import (JOB_TIMEOUT, LocalJob, checkpoint_steps, latest_checkpoint, restored, runs,
                                  train_steps)
from tests.support.trainer_cluster import final_metrics

pytestmark = pytest.mark.slow
STEPS = 80
EVERY = 10  # --checkpoint-every-steps of trainer_args
UNEXPLAINED = 'trainer/task.py", line'  # a traceback through the trainer's entry point


def submit(env: dict, name: str, mnist: str, job_dir, policy: str) -> LocalJob:
    return LocalJob(env, name, "--restart-policy", policy, "--job-dir", str(job_dir),
                    *trainer_args(mnist, STEPS), "--batch-size", "32")


def kill_after_checkpoint(env: dict, name: str, mnist: str, job_dir, policy: str, replica: str) -> LocalJob:
    """Submit, SIGKILL `replica` once the job has a checkpoint at step 20 or later, follow the
    job to its end: it must succeed."""
    with submit(env, name, mnist, job_dir, policy) as job:
        wait_for(lambda: job.running() and (latest_checkpoint(job_dir) or 0) >= 20,
                 "a checkpoint at step 20 or later", JOB_TIMEOUT)
        job.kill(replica)
        code, out = job.finish()
    assert code == 0, out[-3000:]
    return job


def assert_exact_end(chief: str, job_dir) -> None:
    """The job ended at --train-steps exactly, and each checkpoint holds the step it is named by."""
    assert train_steps(runs(chief)[-1])[-1] == STEPS
    assert final_metrics(chief)[0] == STEPS
    steps = checkpoint_steps(job_dir)
    assert max(steps) == STEPS and all(number == step for number, step in steps.items()), steps


def assert_resumed(chief: str, job_dir) -> str:
    """The chief's last run restored the latest checkpoint (not step 0), redid at most one
    checkpoint interval and ended exactly; returns the chief's first run."""
    first, *_, last = runs(chief)
    path, step = restored(last)
    assert step >= 20 and path.endswith(f"checkpoints/ckpt-{step}")
    assert 0 <= train_steps(first)[-1] - step <= EVERY  # steps redone <= the checkpoint interval
    assert train_steps(last)[0] > step
    assert_exact_end(chief, job_dir)
    return first


def test_a_killed_worker_rejoins_and_the_job_ends_at_exactly_train_steps(local_env, mnist_dir, tmp_path):  # noqa: F811
    job_dir = tmp_path / "job"
    with submit(local_env, "kill-worker", mnist_dir, job_dir, "OnFailure") as job:
        job.wait_log("chief-0", r"^Train \[chief/0\] step (1[5-9]|[2-6]\d) of")
        job.kill("worker-1")
        code, out = job.finish()
        assert code == 0, out[-3000:]
        assert job.replica("worker-1")["restarts"] == 1
        assert len(runs(job.log("worker-1"), "worker/1")) == 2  # started again and served to the end
    chief = job.log("chief-0")
    assert len(runs(chief)) == 1  # the coordinator itself never stopped
    assert "Worker /job:worker/replica:0/task:1 failed with UnavailableError" in chief  # and rescheduled
    assert_exact_end(chief, job_dir)


def test_a_killed_chief_resumes_from_the_latest_checkpoint(local_env, mnist_dir, tmp_path):  # noqa: F811
    job = kill_after_checkpoint(local_env, "kill-chief", mnist_dir, tmp_path / "job", "OnFailure", "chief-0")
    # the ps and workers kept serving; the new coordinator reconnected to them
    assert [job.replica(r)["restarts"] for r in ("chief-0", "ps-0", "worker-0", "worker-1")] == [1, 0, 0, 0]
    assert len(runs(job.log("chief-0"))) == 2
    assert_resumed(job.log("chief-0"), tmp_path / "job")


def test_a_killed_ps_restarts_the_chief_which_restores_the_latest_checkpoint(local_env, mnist_dir,
                                                                             tmp_path):  # noqa: F811
    # ExitCode: only retryable codes (>= 128) restart; the chief's 128 on a lost ps is one
    job = kill_after_checkpoint(local_env, "kill-ps", mnist_dir, tmp_path / "job", "ExitCode", "ps-0")
    assert job.replica("ps-0")["restarts"] == 1 and job.replica("chief-0")["restarts"] >= 1
    chief = job.log("chief-0")
    first = assert_resumed(chief, tmp_path / "job")
    assert "trainer: lost parameter server ps/0 (" in first
    assert UNEXPLAINED not in chief  # explained in one line, not a traceback out of the trainer
