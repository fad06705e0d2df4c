"""Log text of TFJob replicas through the real apiserver -> node (KWOK) log path:
`kubectl logs` on one replica and `launcher logs NAME --replica all -f` on all of them."""
from __future__ import annotations

from typing import Iterator

import pytest

from tests.support.launcher_process import launcher_process, run_launcher
from tests.e2e.tfjobs import log_text, wait_running

JOB = "logs-e2e"
REPLICAS = ("chief-0", "ps-0", "worker-0", "worker-1")
LINE_TIMEOUT_S = 60.0
FOLLOW_END_TIMEOUT_S = 90.0


@pytest.fixture(scope="module")
def running_job(control_plane) -> Iterator[str]:
    with control_plane.namespace("e2e-logs") as namespace:
        result = run_launcher(control_plane, "submit", "--backend", "k8s", "-n", namespace, "--name", JOB,
                              "--workers", "2", "--ps", "1", "--chief", "1", "--detach")
        assert result.returncode == 0, result.stdout + result.stderr
        wait_running(control_plane, namespace, JOB, len(REPLICAS))
        yield namespace


def test_kubectl_logs_of_a_replica_shows_text(control_plane, running_job):
    result = control_plane.kubectl("logs", f"{JOB}-worker-1", "-n", running_job, "-c", "tensorflow")
    assert result.stdout.splitlines() == log_text()


def test_launcher_logs_all_follow_shows_every_replica_until_the_job_ends(control_plane, running_job):
    last = log_text()[-1]
    with launcher_process(control_plane, "logs", JOB, "--backend", "k8s", "-n", running_job,
                          "--replica", "all", "-f") as follower:
        for replica in REPLICAS:
            follower.wait_for_line(f"[{replica}] {last}", LINE_TIMEOUT_S)
        control_plane.finish_pod(running_job, f"{JOB}-chief-0", 0)
        exit_code = follower.wait(FOLLOW_END_TIMEOUT_S)
    assert exit_code == 0, follower.output
    for replica in REPLICAS:
        shown = [line.split("] ", 1)[1] for line in follower.lines if line.startswith(f"[{replica}] ")]
        assert shown[:len(log_text())] == log_text(), follower.output
