"""Faults on the real node: a worker's trainer process killed (as by the OOM killer) is
restarted by the kubelet and the job still ends at exactly --train-steps; the chief pod
deleted comes back (the operator recreates it) and resumes from the job dir's checkpoint."""
from __future__ import annotations

import json
import re

from tests.support.controlplane_procs import poll
from tests.support.launcher_process import launcher_process
from tests.support.node_jobs import kill_trainer, restarts, training_namespace

JOB = "mnist-faults"
STEPS = 400
RUN_TIMEOUT_S = 900.0
TRAINER_ARGS = ("--train-steps", str(STEPS), "--checkpoint-every-steps", "50", "--log-every-steps", "20",
                "--eval-every-steps", "0", "--warmup-steps", "20")


def test_worker_killed_and_chief_deleted_still_ends_at_exactly_the_steps(node_cluster, trainer_image):
    with training_namespace(node_cluster, "node-faults") as ns:
        args = ns.submit_args(JOB, trainer_image, "--workers", "2", "--ps", "1", trainer=TRAINER_ARGS)
        with launcher_process(node_cluster, *args) as submit:
            submit.wait_for_line("[chief-0] Train [", RUN_TIMEOUT_S / 3)
            worker = ns.pod(f"{JOB}-worker-0")
            kill_trainer(worker)
            poll(lambda: restarts(ns.pod(f"{JOB}-worker-0")) >= 1, 180,
                 lambda: f"worker-0 not restarted:\n{submit.output}")
            checkpoints = ns.job_dir(JOB)
            poll(lambda: any(checkpoints.rglob("ckpt-*.index")), RUN_TIMEOUT_S / 3,
                 lambda: f"no checkpoint in {checkpoints}")
            old_chief = ns.pod(f"{JOB}-chief-0")["metadata"]["uid"]
            node_cluster.kubectl("delete", "pod", f"{JOB}-chief-0", "-n", ns.name, "--wait=false")
            poll(lambda: _new_chief_running(ns, old_chief), 300, lambda: f"chief not back:\n{submit.output}")
            exit_code = submit.wait(RUN_TIMEOUT_S)
        assert exit_code == 0, submit.output
        chief_log = node_cluster.kubectl("logs", f"{JOB}-chief-0", "-n", ns.name).stdout
        restored = re.search(r"Restored .* at step (\d+)", chief_log)
        assert restored and 0 < int(restored[1]) < STEPS, chief_log[-3000:]
        assert f"Final metrics after {STEPS} steps" in chief_log, chief_log[-3000:]
        assert restarts(ns.pod(f"{JOB}-worker-0")) >= 1


def _new_chief_running(ns, old_uid: str) -> bool:
    done = ns.cluster.kubectl("get", "pod", f"{JOB}-chief-0", "-n", ns.name, "-o", "json", check=False)
    if done.returncode != 0:
        return False
    pod = json.loads(done.stdout)
    return pod["metadata"]["uid"] != old_uid and pod.get("status", {}).get("phase") == "Running"
