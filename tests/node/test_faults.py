"""Faults on the real node, each on a 1 chief + 1 ps + 2 worker job of the real image:

- a worker's trainer process killed (SIGKILL, as by the OOM killer): the kubelet restarts
  the container (restartPolicy OnFailure) and the job still ends at exactly --train-steps;
  the live view shows the restart, and `launcher logs -f --replica worker-0` follows the
  worker across it into the new container;
- the chief's trainer process killed: the kubelet restarts it in its pod and it resumes
  from the job dir's latest checkpoint ("Restored ... at step N"), ending at exactly
  --train-steps;
- the chief pod deleted: training-operator v1.9.4 counts a terminating replica pod as
  failed and fails the TFJob; the following `launcher submit` sees that the first fault was
  the deletion, submits the same TFJob again (--max-resubmits), and the new chief resumes
  from the job dir's checkpoint to Succeeded (README "Failures");
- the TFJob deleted whole (`launcher delete`): every pod gets SIGTERM; the ps serves on until
  the chief has saved its checkpoint at the step it reached and left (a checkpoint the job
  would not otherwise write: --checkpoint-every-steps 0).
"""
from __future__ import annotations

import re

from tests.support.launcher_process import launcher_process
from tests.support.node.jobs import kill_trainer, restarts, training_namespace
from tests.support.polling import wait_for

STEPS = 200
RUN_TIMEOUT_S = 900.0
TRAINER_ARGS = ("--train-steps", str(STEPS), "--checkpoint-every-steps", "40", "--log-every-steps", "20",
                "--eval-every-steps", "0", "--warmup-steps", "20")
CHECKPOINT = re.compile(r"ckpt-(\d+)\.index$")


def test_worker_killed_is_restarted_and_the_job_ends_at_exactly_the_steps(node_cluster, trainer_image):
    job = "mnist-worker"
    with training_namespace(node_cluster, "node-worker") as ns:
        args = ns.submit_args(job, trainer_image, "--workers", "2", "--ps", "1", trainer=TRAINER_ARGS)
        follow_args = ("logs", job, "--backend", "k8s", "-n", ns.name, "--replica", "worker-0", "-f")
        with launcher_process(node_cluster, *args) as submit:
            submit.wait_for_line("[chief-0] Train [", RUN_TIMEOUT_S / 3)
            with launcher_process(node_cluster, *follow_args) as follow:
                follow.wait_for_line("Starting worker/0", 60)  # the first container's output
                kill_trainer(ns.pod(f"{job}-worker-0"))
                wait_for(lambda: restarts(ns.pod(f"{job}-worker-0")) >= 1,
                         lambda: f"worker-0 not restarted:\n{submit.output}", 180)
                exit_code = submit.wait(RUN_TIMEOUT_S)
                follow_code = follow.wait(120)  # `logs -f` ends with the job
        assert exit_code == 0, submit.output
        # the live view saw the restart; `logs -f` followed worker-0 across it, into the new container
        assert re.search(r"^\[worker-0\] \w+ \(restarts 1", submit.output, re.M), submit.output
        assert follow_code == 0 and follow.output.count("Starting worker/0") == 2, follow.output[-3000:]
        # the kubelet's timestamps, asked to resume a cut stream, are not shown unless asked for
        assert re.search(r"^\[worker-0\] Starting worker/0", follow.output, re.M), follow.output[-3000:]
        assert not re.search(r"^\[worker-0\] \d{4}-\d\d-\d\dT", follow.output, re.M), follow.output[-3000:]
        chief_log = node_cluster.kubectl("logs", f"{job}-chief-0", "-n", ns.name).stdout
        # (the restart was seen by the poll above: once the job succeeds, the operator's
        # cleanPodPolicy deletes the still-running worker pods, so it cannot be re-read here)
        assert f"Final metrics after {STEPS} steps" in chief_log, chief_log[-3000:]


def test_chief_killed_restarts_in_its_pod_and_resumes_from_the_checkpoint(node_cluster, trainer_image):
    job = "mnist-chief"
    with training_namespace(node_cluster, "node-chief") as ns:
        args = ns.submit_args(job, trainer_image, "--workers", "2", "--ps", "1", trainer=TRAINER_ARGS)
        with launcher_process(node_cluster, *args) as submit:
            _wait_for_a_checkpoint(ns, job, submit)
            kill_trainer(ns.pod(f"{job}-chief-0"))
            wait_for(lambda: restarts(ns.pod(f"{job}-chief-0")) >= 1,
                     lambda: f"chief-0 not restarted:\n{submit.output}", 180)
            exit_code = submit.wait(RUN_TIMEOUT_S)
        assert exit_code == 0, submit.output
        _assert_the_chief_resumed(node_cluster, ns, job)  # the restarted one


def test_chief_pod_deleted_the_launcher_submits_the_job_again_and_it_resumes(node_cluster, trainer_image):
    job = "mnist-delete"
    with training_namespace(node_cluster, "node-delete") as ns:
        args = ns.submit_args(job, trainer_image, "--workers", "1", "--ps", "1", trainer=TRAINER_ARGS)
        with launcher_process(node_cluster, *args) as submit:
            _wait_for_a_checkpoint(ns, job, submit)
            first_uid = node_cluster.kubectl_json("get", "tfjob", job, "-n", ns.name)["metadata"]["uid"]
            node_cluster.kubectl("delete", "pod", f"{job}-chief-0", "-n", ns.name, "--wait=false")
            exit_code = submit.wait(RUN_TIMEOUT_S)
        assert exit_code == 0, submit.output
        assert f"tfjob {job} failed because its chief-0 pod was deleted" in submit.output, submit.output
        assert f"tfjob {job} submitted again" in submit.output, submit.output
        tfjob = node_cluster.kubectl_json("get", "tfjob", job, "-n", ns.name)
        assert tfjob["metadata"]["uid"] != first_uid  # a new TFJob of the same name and job dir
        assert any(c["type"] == "Succeeded" and c["status"] == "True" for c in tfjob["status"]["conditions"])
        _assert_the_chief_resumed(node_cluster, ns, job)  # the new chief


def test_the_tfjob_deleted_whole_keeps_the_chiefs_checkpoint_at_the_step_reached(node_cluster, trainer_image):
    """Before, the ps left at once and the chief's save found no variables. On a cluster the
    chief's name may stop resolving while it saves: the ps waits for a refusal instead."""
    job = "mnist-deleted"
    with training_namespace(node_cluster, "node-deleted") as ns:
        args = ns.submit_args(job, trainer_image, "--workers", "1", "--ps", "1",
                              trainer=("--train-steps", "100000", "--checkpoint-every-steps", "0",
                                       "--log-every-steps", "20", "--eval-every-steps", "0"))
        with launcher_process(node_cluster, *args) as submit:
            submit.wait_for_line("[chief-0] Train [chief/0] step 40 of", RUN_TIMEOUT_S / 3)
            assert _checkpoint_step(ns.job_dir(job)) == 0  # none before the deletion
            with launcher_process(node_cluster, "delete", job, "--backend", "k8s", "-n", ns.name) as delete:
                assert delete.wait(180) == 0, delete.output
            submit.wait(180)
        wait_for(lambda: _checkpoint_step(ns.job_dir(job)) >= 40,
                 lambda: f"no checkpoint at step 40 or later in {ns.job_dir(job)}:\n{submit.output}", 120)


def _assert_the_chief_resumed(node_cluster, ns, job: str) -> None:
    """The running chief restored a checkpoint between step 0 and the end, then finished."""
    chief_log = node_cluster.kubectl("logs", f"{job}-chief-0", "-n", ns.name).stdout
    restored = re.search(r"Restored \S+ at step (\d+)", chief_log)
    assert restored and 0 < int(restored[1]) < STEPS, chief_log[-3000:]
    assert f"Final metrics after {STEPS} steps" in chief_log, chief_log[-3000:]


def _wait_for_a_checkpoint(ns, job: str, submit) -> None:
    """Bounded: until the job dir holds a checkpoint after step 0."""
    wait_for(lambda: _checkpoint_step(ns.job_dir(job)) > 0,
             lambda: f"no checkpoint after step 0 in {ns.job_dir(job)}:\n{submit.output}", RUN_TIMEOUT_S / 3)


def _checkpoint_step(job_dir) -> int:
    steps = [int(m[1]) for path in job_dir.rglob("ckpt-*.index") if (m := CHECKPOINT.search(path.name))]
    return max(steps, default=0)
