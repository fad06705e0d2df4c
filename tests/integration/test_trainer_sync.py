"""Synchronous training (MultiWorkerMirrored) and single-process training with restart."""
from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.polling import WaitTimeout, wait_for
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


# TensorFlow's coordination service (MultiWorkerMirrored's peer health check) reports a task
# whose heartbeats stopped for this long (its default) as crashed, and a task whose heartbeat
# finds the service's process gone reports that: lines a successful job must not show
HEARTBEAT_TIMEOUT_S = 10
_LOST_TASK = re.compile(r"StartAbort|UNAVAILABLE|crashed|stopped sending heartbeats|coordination service")


def _chief_waiting_for_a_stopped_evaluator(cluster: TrainerCluster) -> subprocess.Popen:
    """Once the side-car evaluator has evaluated step 20, stop it (SIGSTOP) until the test
    continues it: the chief, its training done, then waits for it to evaluate the last
    step. Returns the evaluator's process once the chief says it waits."""
    cluster.wait_for_line("evaluator-0", "Eval step 20:", WAIT_S)
    evaluator = cluster.replicas["evaluator-0"].process
    evaluator.send_signal(signal.SIGSTOP)
    try:
        cluster.wait_for_line("chief-0", "for the side-car evaluator to evaluate step 60", WAIT_S)
    except BaseException:
        evaluator.send_signal(signal.SIGCONT)
        raise
    return evaluator


def test_a_mirrored_worker_done_long_before_the_chief_is_not_reported_lost(mnist_dir, tmp_path):  # noqa: F811
    """The chief finishes long after its worker: it waits for a side-car evaluator to evaluate
    the last checkpoint (held stopped by the test for longer than TensorFlow's heartbeat
    timeout). The worker used to leave at once, and the chief's log of this successful job
    then said `StartAbort UNAVAILABLE ... The tasks have crashed`: now the MultiWorkerMirrored
    tasks leave together (sync.leave), and no log holds such a line."""
    job = tmp_path / "job"
    with TrainerCluster({"Chief": 1, "Worker": 1, "Evaluator": 1}, [*args(job, mnist_dir, 60), "--poll-seconds", "1"],
                        tmp_path) as cluster:
        evaluator = _chief_waiting_for_a_stopped_evaluator(cluster)
        lost = lambda: [line for line in cluster.lines_with("") if _LOST_TASK.search(line)]
        try:  # the chief waits on, longer than the heartbeat timeout: no line may come meanwhile
            found = wait_for(lost, "a line reporting a task lost", HEARTBEAT_TIMEOUT_S + 5, interval=0.5)
        except WaitTimeout:
            found = []
        finally:
            evaluator.send_signal(signal.SIGCONT)
        assert found == [], cluster.tails()
        assert cluster.wait(WAIT_S) == {"chief-0": 0, "worker-0": 0, "evaluator-0": 0}, cluster.tails()
        assert lost() == [], cluster.tails()
        assert final_metrics(cluster.log("chief-0"))[0] == 60
        assert "Finished worker/0 at step 60" in cluster.log("worker-0")
        assert re.findall(r"^Eval step (\d+): loss", cluster.log("evaluator-0"), re.M)[-1] == "60"


def test_sigterm_to_a_mirrored_worker_waiting_for_the_chief_to_finish_ends_it_at_once(mnist_dir, tmp_path):  # noqa: F811
    """A worker waiting at the end for the chief (sync.leave) acts on SIGTERM (its pod deleted)
    at once: TensorFlow's own binding of the barrier held the GIL, and the signal's handler
    ran only when the chief arrived (58 s later, after the chief's wait for the evaluator)."""
    job = tmp_path / "job"
    with TrainerCluster({"Chief": 1, "Worker": 1, "Evaluator": 1}, [*args(job, mnist_dir, 60), "--poll-seconds", "1"],
                        tmp_path) as cluster:
        evaluator = _chief_waiting_for_a_stopped_evaluator(cluster)
        try:
            cluster.replicas["worker-0"].process.send_signal(signal.SIGTERM)
            assert cluster.wait(10, names=["worker-0"]) == {"worker-0": 143}, cluster.tails()
        finally:
            evaluator.send_signal(signal.SIGCONT)
        assert "trainer: SIGTERM; exiting 143" in cluster.log("worker-0")
        assert cluster.wait(WAIT_S) == {"chief-0": 0, "worker-0": 143, "evaluator-0": 0}, cluster.tails()


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
        assert "Detected at node" not in line, line  # the cause, not the header of where the op was defined
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
