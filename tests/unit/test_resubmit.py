"""A TFJob failed by a deleted pod is submitted again (launcher/resubmit.py and submit's
--max-resubmits): what counts as a deletion, in the order the watch delivered it, and
what submit does with it (FakeBackend replays each run's events)."""
from __future__ import annotations

import pytest

from launcher.events import JobCondition
from launcher.resubmit import Deletion, FirstFault, deleted_in
from tests.support.fakes.backend import FakeBackend, lifecycle, replica_phase

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

RUNNING = [replica_phase(r, "Running", node="node-1") for r in ("chief-0", "ps-0", "worker-0")]
CHIEF_FAILED = JobCondition("Failed", reason="TFJobFailed",
                            message="TFJob default/mnist has failed because 1 Chief replica(s) failed.")
WORKER_FAILED = JobCondition("Failed", reason="TFJobFailed",
                             message="TFJob default/mnist has failed because 1 Worker replica(s) failed.")
BACKOFF = JobCondition("Failed", reason="TFJobFailed",
                       message="TFJob default/mnist has failed because it has reached the specified backoff limit")


def terminating(replica):
    return replica_phase(replica, "Running", node="node-1", message="Terminating")


def first_fault(*events):
    fault = FirstFault()
    for event in events:
        fault.see(event)
    return fault


def test_a_running_chief_pod_deleted_before_the_failure_is_a_deletion():
    fault = first_fault(*RUNNING, terminating("chief-0"), CHIEF_FAILED, terminating("ps-0"))
    assert fault.deletion(CHIEF_FAILED) == Deletion("chief-0", "Chief")


def test_the_deleted_pod_may_arrive_after_the_failed_condition():
    # two watches: the pod change can come after the TFJob's status; the pod stream's order decides
    assert first_fault(*RUNNING, CHIEF_FAILED, terminating("chief-0"), terminating("worker-0")).deletion(
        CHIEF_FAILED) == Deletion("chief-0", "Chief")


def test_a_replica_that_failed_on_its_own_is_not_a_deletion_even_when_clean_up_deletes_the_rest():
    fault = first_fault(*RUNNING, replica_phase("chief-0", "Failed", exit_code=1), terminating("ps-0"),
                        terminating("worker-0"), CHIEF_FAILED)
    assert fault.deletion(CHIEF_FAILED) is None


def test_a_failed_pod_seen_first_while_it_is_deleted_is_a_failure_not_a_deletion():
    """The watch may bring a replica's failure and its deletion (cleanPodPolicy All) as one
    change: a pod that had ended Failed when it was deleted failed on its own."""
    fault = first_fault(*RUNNING, replica_phase("chief-0", "Failed", exit_code=1, message="Terminating"),
                        terminating("ps-0"), CHIEF_FAILED)
    assert fault.deletion(CHIEF_FAILED) is None


def test_the_failed_condition_must_name_the_deleted_replicas_type():
    fault = first_fault(*RUNNING, terminating("chief-0"))
    assert fault.deletion(WORKER_FAILED) is None
    assert fault.deletion(BACKOFF) is None  # failed for another reason, then cleaned up
    assert fault.deletion(JobCondition("Succeeded")) is None


def test_a_restart_by_the_operator_starts_the_tally_again():
    # restartPolicy ExitCode: worker-0 ended 137, the operator deleted and recreated it (Restarting)
    before = [*RUNNING, replica_phase("worker-0", "Failed", exit_code=137),
              replica_phase("worker-0", "Failed", exit_code=137, message="Terminating")]
    assert first_fault(*before, terminating("chief-0")).deletion(CHIEF_FAILED) is None
    fault = first_fault(*before, JobCondition("Restarting", message="job mnist is restarting"), terminating("chief-0"))
    assert fault.deletion(CHIEF_FAILED) == Deletion("chief-0", "Chief")


def test_status_after_the_watch_ended_tells_a_deletion_from_a_failure():
    assert deleted_in(CHIEF_FAILED, (terminating("chief-0"), RUNNING[1])) == Deletion("chief-0", "Chief")
    assert deleted_in(CHIEF_FAILED, (replica_phase("chief-0", "Failed", exit_code=1), terminating("ps-0"))) is None
    assert deleted_in(WORKER_FAILED, (terminating("chief-0"),)) is None
    # one worker failed on its own, another is being deleted (the operator's clean-up): a failure
    assert deleted_in(WORKER_FAILED, (replica_phase("worker-0", "Failed", exit_code=1), terminating("worker-1"))) is None
    assert deleted_in(BACKOFF, (terminating("chief-0"),)) is None
    # the deleted pod already gone when status is asked (its trainer saved and exited at SIGTERM)
    counts = {"Chief": 1, "PS": 1, "Worker": 1}
    assert deleted_in(CHIEF_FAILED, tuple(RUNNING[1:]), counts) == Deletion("chief-0", "Chief")
    assert deleted_in(CHIEF_FAILED, tuple(RUNNING), counts) is None  # every chief there, none deleted
    assert deleted_in(WORKER_FAILED, tuple(RUNNING[:2]), counts) == Deletion("worker-0", "Worker")
    assert deleted_in(CHIEF_FAILED, tuple(RUNNING[1:])) is None  # no counts: a missing pod proves nothing


def deleted_run():
    return [JobCondition("Created"), *RUNNING, JobCondition("Running"), terminating("chief-0"), CHIEF_FAILED]


def submit(cli, backend, *extra):
    return cli("submit", "--name", "mnist", "--backend", "k8s", *extra, backend=backend)


def test_submit_submits_again_after_a_deletion_and_exits_0_when_the_new_run_succeeds(cli):
    backend = FakeBackend(name="k8s", events=deleted_run(), reruns=[lifecycle("Succeeded")])
    result = submit(cli, backend, "--job-dir", "gs://bucket/mnist")
    assert result.code == 0, result.err
    assert [replace for _, replace in backend.submitted] == [False, True]
    assert backend.submitted[0][0] == backend.submitted[1][0]  # the same TFJob, the same job dir
    assert ("tfjob mnist failed because its chief-0 pod was deleted" in result.err
            and "submitting it again (1 of 3): it resumes from the latest checkpoint in gs://bucket/mnist"
            in result.err), result.err
    assert "tfjob mnist submitted again (namespace default, k8s backend)" in result.out


def test_with_o_name_the_resubmission_is_followed_on_stderr_and_stdout_stays_the_name(cli):
    """submit -o name|json|yaml keeps stdout for that output (NAME=$(submit -o name)); the
    followed job's lines, a new run's too, go to stderr."""
    backend = FakeBackend(name="k8s", events=deleted_run(), reruns=[lifecycle("Succeeded")])
    result = submit(cli, backend, "--job-dir", "gs://bucket/mnist", "-o", "name")
    assert result.code == 0, result.err
    assert result.out == "tfjob.kubeflow.org/mnist\n"
    assert "tfjob mnist submitted again (namespace default, k8s backend)" in result.err


def test_submit_stops_after_max_resubmits(cli):
    backend = FakeBackend(name="k8s", events=deleted_run(), reruns=[deleted_run(), deleted_run()])
    result = submit(cli, backend, "--job-dir", "gs://bucket/mnist", "--max-resubmits", "1")
    assert result.code == 1
    assert len(backend.submitted) == 2
    assert "not submitted again (--max-resubmits 1 reached)" in result.err


@pytest.mark.parametrize("extra, why", [
    ((), "without --job-dir its checkpoints were inside the deleted pods"),
    (("--job-dir", "gs://bucket/mnist", "--max-resubmits", "0"), "--max-resubmits 0 reached"),
])
def test_submit_does_not_resubmit_without_a_job_dir_or_with_0(cli, extra, why):
    backend = FakeBackend(name="k8s", events=deleted_run(), reruns=[lifecycle("Succeeded")])
    result = submit(cli, backend, *extra)
    assert result.code == 1
    assert len(backend.submitted) == 1
    assert why in result.err, result.err


def test_a_job_that_failed_on_its_own_is_not_submitted_again(cli):
    backend = FakeBackend(name="k8s", events=lifecycle("Failed"), reruns=[lifecycle("Succeeded")])
    result = submit(cli, backend, "--job-dir", "gs://bucket/mnist")
    assert result.code == 1 and len(backend.submitted) == 1
    assert "submitting it again" not in result.err


@pytest.mark.parametrize("extra", [("--detach",), ("--dry-run",)])
def test_max_resubmits_needs_a_followed_submit(cli, extra):
    backend = FakeBackend(name="k8s")
    result = submit(cli, backend, "--max-resubmits", "2", *extra)
    assert result.code == 2 and not backend.submitted
    assert result.err.strip().startswith("error: --max-resubmits: only applies while submit follows the job")
