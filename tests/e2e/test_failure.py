"""A job whose chief exits 1 ends Failed, and `launcher submit` exits 1."""
from __future__ import annotations

from tests.support.launcher_process import launcher_process
from tests.e2e.tfjobs import condition_sequence, true_conditions, tfjob, wait_running

JOB = "failing-chief"
FINISH_TIMEOUT_S = 120.0


def test_chief_exit_1_fails_the_job_and_the_launcher_exits_1(control_plane):
    cp = control_plane
    with cp.namespace("e2e-fail") as namespace:
        # ExitCode: the operator retries retryable codes (>128) only; 1 is permanent
        args = ("submit", "--backend", "k8s", "-n", namespace, "--name", JOB, "--workers", "1", "--ps", "1",
                "--chief", "1", "--restart-policy", "ExitCode")
        with launcher_process(cp, *args) as launcher:
            wait_running(cp, namespace, JOB, 3)
            cp.finish_pod(namespace, f"{JOB}-chief-0", 1)
            exit_code = launcher.wait(FINISH_TIMEOUT_S)
        assert exit_code == 1, launcher.output
        assert condition_sequence(launcher.output, JOB)[-1] == "Failed", launcher.output
        assert "Failed" in true_conditions(tfjob(cp, namespace, JOB))
