"""`submit` end to end against FakeBackend: exit codes 0 / 1 / 130, dry runs, detach,
name conflicts, the local backend's defaults, and the merged events + logs stream."""
from __future__ import annotations

import os
import signal

import pytest
import yaml

from launcher.backends.base import BackendError
from launcher.cli import main
from launcher.events import JobCondition
from tests.support.fakes.backend import FakeBackend, lifecycle, replica_phase

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

CHIEF_LOGS = {"chief-0": [
    "starting",
    "Train [chief/0] step 50 of 100: loss 0.5000, accuracy 0.8000 (1.0 s) 50.0 global steps/s",
    "Train [chief/0] step 100 of 100: loss 0.2500, accuracy 0.9000 (2.0 s) 50.0 global steps/s",
]}


def submit(cli, backend, *extra):
    return cli("submit", "--name", "mnist", "--backend", backend.name if backend.name in ("k8s", "local") else "k8s",
               *extra, backend=backend)


def test_succeeded_exits_0_and_shows_events_logs_and_progress(cli):
    backend = FakeBackend(name="k8s", logs=CHIEF_LOGS)
    result = submit(cli, backend)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "tfjob mnist submitted (namespace default, k8s backend)"
    assert "mnist: Created (TFJobCreated)" in lines
    assert "[worker-0] Running (node node-1)" in lines
    assert "[chief-0] starting" in lines
    assert "mnist: Succeeded (TFJobSucceeded: job succeeded)" in lines
    assert lines[-1] == "mnist: Succeeded at step 100 of 100, 50.0 steps/s, loss 0.2500, accuracy 0.9000"
    assert backend.log_requests == [("mnist", "chief-0", True)]
    (tfjob, replace), = backend.submitted
    assert tfjob["metadata"]["name"] == "mnist" and replace is False


def test_a_side_car_evaluators_results_and_errors_show_beside_the_chiefs_lines(cli):
    """Its Eval lines, a skipped checkpoint and the trainer's one-line errors; not its other
    lines, nor its SIGTERM when the job's end stops it. Nothing of it is parsed as the job's
    progress or result."""
    logs = {**CHIEF_LOGS, "evaluator-0": [
        "Evaluator watching /job/checkpoints", "Eval step 50: loss 0.3000, accuracy 0.9100",
        "Skipped /job/checkpoints/ckpt-60: DataLossError after 3 attempts",
        "Train [chief/0] step 100 of 100: loss 9.0000, accuracy 0.1000 (2.0 s) 50.0 global steps/s",
        "Final metrics after 100 steps: loss 9.0000, accuracy 0.1000", "trainer: SIGTERM; exiting 143",
        "trainer: --job-dir /job: checkpoint ckpt-70 does not match --model mnist"]}
    backend = FakeBackend(name="k8s", logs=logs, events=lifecycle(replicas=("chief-0", "worker-0", "evaluator-0")))
    result = submit(cli, backend, "--workers", "1", "--evaluator", "1")
    assert result.code == 0, result.err
    shown = [line for line in result.out.splitlines() if line.startswith("[evaluator-0] ")
             and not line.startswith(("[evaluator-0] Pending", "[evaluator-0] Running"))]
    assert shown == ["[evaluator-0] Eval step 50: loss 0.3000, accuracy 0.9100",
                     "[evaluator-0] Skipped /job/checkpoints/ckpt-60: DataLossError after 3 attempts",
                     "[evaluator-0] trainer: --job-dir /job: checkpoint ckpt-70 does not match --model mnist"]
    assert result.out.splitlines()[-1] == \
        "mnist: Succeeded at step 100 of 100, 50.0 steps/s, loss 0.2500, accuracy 0.9000"
    assert sorted(backend.log_requests) == [("mnist", "chief-0", True), ("mnist", "evaluator-0", True)]


def test_failed_exits_1(cli):
    result = submit(cli, FakeBackend(name="k8s", events=lifecycle("Failed")))
    assert result.code == 1
    assert result.out.splitlines()[-1] == "mnist: Failed"


@pytest.mark.parametrize("kind, after, hints", [
    ("k8s", 3, ["keeps running in namespace default", "python -m launcher logs mnist --backend k8s -f",
                "python -m launcher delete mnist --backend k8s"]),
    ("local", 1, ["Interrupted; stopping local job mnist ...", "Stopped local job mnist: every replica has exited.",
                  "python -m launcher logs mnist --backend local --replica all"]),
])
def test_ctrl_c_exits_130_and_says_what_happens_to_the_job(cli, kind, after, hints):
    backend = FakeBackend(name=kind, interrupt_after=after)  # a real SIGINT mid-stream
    try:
        result = submit(cli, backend)
    finally:
        backend.release.set()
    assert result.code == 130
    for hint in hints:
        assert hint in result.err
    assert backend.deleted == [] and "mnist" in backend.jobs
    # a local foreground job is stopped before the launcher returns (real processes: tests/integration)
    assert backend.stopped == ([("mnist", "default")] if kind == "local" else [])


def test_ctrl_c_right_after_the_submit_before_the_live_view_still_stops_the_local_job(cli):
    """A real SIGINT as the job is sent, before the live view follows it (the backend's
    submit returns into it): the job was left running on its own with the generic
    'Interrupted.'."""
    class CtrlCAtSubmit(FakeBackend):
        def submit(self, tfjob, replace=False, network_policy=None):
            super().submit(tfjob, replace, network_policy)
            os.kill(os.getpid(), signal.SIGINT)  # delivered as submit returns

    backend = CtrlCAtSubmit(name="local")
    result = submit(cli, backend)
    assert result.code == 130 and backend.stopped == [("mnist", "default")], result.err
    assert "Stopped local job mnist: every replica has exited." in result.err
    detached = CtrlCAtSubmit(name="local")
    result = submit(cli, detached, "--detach")
    assert result.code == 130 and detached.stopped == []  # --detach: it is meant to run on its own


def test_replace_says_the_new_job_resumes_from_the_checkpoint_the_replaced_one_saved(cli, tmp_path):
    """--replace stops the running job first, whose chief saves a checkpoint on SIGTERM: the
    note was read before that, so the new job resumed from it without a word."""
    job_dir = tmp_path / "job"

    class SavesOnStop(FakeBackend):
        def submit(self, tfjob, replace=False, network_policy=None):
            if replace:  # the old chief's save as it is stopped
                (job_dir / "checkpoints").mkdir(parents=True)
                (job_dir / "checkpoints" / "ckpt-260.index").write_bytes(b"")
            super().submit(tfjob, replace, network_policy)

    backend = SavesOnStop(name="local", existing=("mnist",))
    result = submit(cli, backend, "--detach", "--replace", "--job-dir", str(job_dir))
    assert result.code == 0, result.err
    assert f"note: the job dir {job_dir} already holds checkpoints (the latest at step 260)" in result.err


def test_ctrl_c_before_the_local_job_exists_says_nothing_runs(cli):
    """Not 'Stopped local job ...; its logs stay: logs ...' for a job whose folder an
    interrupted submission removed."""
    class CtrlCInSubmit(FakeBackend):
        def submit(self, tfjob, replace=False, network_policy=None):
            raise KeyboardInterrupt  # before the job was made

    backend = CtrlCInSubmit(name="local")
    result = submit(cli, backend)
    assert result.code == 130 and backend.stopped == []
    assert result.err.splitlines()[-1] == "Interrupted before local job mnist was submitted: nothing runs.", result.err
    cluster = submit(cli, CtrlCInSubmit(name="k8s"))  # e.g. while --replace waits for the old TFJob's deletion
    assert (cluster.code, cluster.err.splitlines()[-1]) == (130, "Interrupted.")
    assert "keeps running" not in cluster.err  # the TFJob may not exist


def test_a_second_ctrl_c_while_the_local_job_stops_still_waits_for_the_stop(cli):
    """It returned the prompt with the replicas still running (a real SIGINT during stop())."""
    class SecondCtrlC(FakeBackend):
        def stop(self, name, namespace):
            os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl-C again
            super().stop(name, namespace)

    backend, before = SecondCtrlC(name="local", interrupt_after=1), signal.getsignal(signal.SIGINT)
    try:
        result = submit(cli, backend)
    finally:
        backend.release.set()
    assert result.code == 130 and backend.stopped == [("mnist", "default")], result.err
    assert "Stopped local job mnist: every replica has exited." in result.err
    assert signal.getsignal(signal.SIGINT) is before  # Ctrl-C restored


def test_detach_returns_after_submit(cli):
    backend = FakeBackend(name="k8s")
    result = submit(cli, backend, "--detach", "-n", "team-a")
    assert result.code == 0
    assert result.out == "tfjob mnist submitted (namespace team-a, k8s backend)\n"  # the hint: a note on stderr
    assert "python -m launcher logs mnist -n team-a --backend k8s -f" in result.err
    assert backend.log_requests == [] and len(backend.submitted) == 1


def test_dry_run_prints_and_never_touches_a_cluster(capsys):
    def no_backend(kind):
        raise AssertionError("dry-run must not create a k8s backend")

    code = main(["submit", "--name", "mnist", "--backend", "k8s", "--dry-run"], backend_factory=no_backend)
    out, _ = capsys.readouterr()
    assert code == 0
    assert "kind: TFJob" in out and "name: mnist" in out


@pytest.mark.parametrize("flags", [["--server-dry-run"], ["--dry-run=server"], ["--dry-run", "server"],
                                   ["--dry-run=server", "--server-dry-run"]])
def test_server_dry_run_asks_the_backend_and_applies_nothing(cli, flags):
    backend = FakeBackend(name="k8s")
    result = submit(cli, backend, *flags)
    assert result.code == 0
    assert len(backend.dry_runs) == 1 and backend.submitted == []
    assert "dryRun: true" in result.out


def test_a_server_dry_run_on_the_local_backend_says_no_api_server_checked_it(cli):
    backend = FakeBackend(name="local")
    result = submit(cli, backend, "--dry-run=server")
    assert result.code == 0 and len(backend.dry_runs) == 1 and backend.submitted == []
    assert ("note: --dry-run=server: the local backend has no API server; printing what it would run on this "
            "machine (use --backend k8s to have a cluster's API server check the TFJob)\n") in result.err
    assert "no API server" not in submit(cli, FakeBackend(name="k8s"), "--dry-run=server").err


def test_dry_run_client_is_the_bare_dry_run_and_none_submits(cli):
    backend = FakeBackend(name="k8s")
    client = submit(cli, backend, "--dry-run=client")
    assert client.code == 0 and client.out == submit(cli, backend, "--dry-run").out
    assert backend.dry_runs == [] and backend.submitted == []
    assert submit(cli, backend, "--dry-run=none", "--detach").code == 0 and len(backend.submitted) == 1


@pytest.mark.parametrize("kind", ["k8s", "local"])
def test_render_and_the_dry_run_print_what_submit_sends(cli, kind, tmp_path):
    """What `render` and `submit --dry-run` print (the TFJob, then the k8s NetworkPolicy) is
    what `submit` hands the backend, for the same flags."""
    flags = ["--name", "mnist", "--backend", kind, "-n", "ml-team", "--workers", "3", "--ps", "2", "--evaluator", "1",
             "--env", "MODE=y", "--label", "team=on", "--cpu", "worker=2", "--memory", "4Gi", "--backoff-limit", "0",
             "--ttl-seconds", "60", "--", "--train-steps", "5", "--prepare-data"]
    backend = FakeBackend(name=kind, default_dir=str(tmp_path) if kind == "local" else None)  # a cluster's: none
    rendered = cli("render", *flags, backend=backend)
    dry_run = cli("submit", "--dry-run", *flags, backend=backend)
    sent = cli("submit", "--detach", *flags, backend=backend)
    assert (rendered.code, dry_run.code, sent.code) == (0, 0, 0), (rendered.err, dry_run.err, sent.err)
    printed = list(yaml.safe_load_all(dry_run.out))
    assert printed[0] == yaml.safe_load(rendered.out) == backend.submitted[0][0]
    assert printed[1:] == ([backend.network_policies[0]] if kind == "k8s" else []) and backend.dry_runs == []


def test_the_commands_a_detached_submit_suggests_keep_its_cluster_flags_quoted_for_the_shell(cli, tmp_path):
    """--kubeconfig and --context select the cluster: the suggested logs/status commands
    repeat them, quoted, so that pasted into a shell they reach the same job."""
    import shlex

    kubeconfig = tmp_path / "my clusters" / "config"
    kubeconfig.parent.mkdir()
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                          "users: [{name: u, user: {}}]\ncontexts: [{name: gke prod, context: {cluster: c, user: u}}]\n")
    result = submit(cli, FakeBackend(name="k8s"), "-n", "ml", "--kubeconfig", str(kubeconfig), "--context",
                    "gke prod", "--detach")
    assert result.code == 0, result.err
    follow, status = result.err.splitlines()[-1].removeprefix("Follow it: ").split("   Status: ")
    flags = ["-n", "ml", "--backend", "k8s", "--kubeconfig", str(kubeconfig), "--context", "gke prod"]
    assert shlex.split(follow) == ["python", "-m", "launcher", "logs", "mnist", *flags, "-f"]
    assert shlex.split(status) == ["python", "-m", "launcher", "status", "mnist", *flags, "-w"]


@pytest.mark.parametrize("policy, resubmitted", [("Running", True), ("All", False)])
def test_a_replica_gone_from_a_failed_job_is_a_deletion_unless_clean_pod_policy_all_removed_it(cli, policy,
                                                                                              resubmitted):
    """The watch ended before the chief pod's deletion arrived: a chief missing from the failed
    job's replicas was deleted (resubmitted, launcher.resubmit); under --clean-pod-policy All
    the operator itself deletes the failed chief's pod, so a missing one says nothing."""
    chief_failed = JobCondition("Failed", reason="TFJobFailed",
                                message="TFJob default/mnist has failed because 1 Chief replica(s) failed.")
    run = [JobCondition("Created"), replica_phase("ps-0", "Running", node="node-1"),
           replica_phase("worker-0", "Running", node="node-1"), JobCondition("Running"), chief_failed]
    backend = FakeBackend(name="k8s", events=run, reruns=[lifecycle("Succeeded")])
    result = submit(cli, backend, "--workers", "1", "--job-dir", "gs://bucket/mnist", "--clean-pod-policy", policy)
    assert (result.code, len(backend.submitted)) == ((0, 2) if resubmitted else (1, 1)), result.err


def test_a_local_job_dir_with_checkpoints_says_the_job_resumes_and_how_to_start_over(cli, tmp_path):
    """`delete --purge` removes the outputs of the job's default job dir only: it is suggested
    for that one, not for a --job-dir of the user's."""
    for job_dir, given in ((tmp_path / "mine", True), (tmp_path / "runs" / "default" / "mnist", False)):
        backend = FakeBackend(name="local", default_dir=str(tmp_path / "runs"))
        (job_dir / "checkpoints").mkdir(parents=True)
        (job_dir / "checkpoints" / "ckpt-40.index").write_bytes(b"")
        result = submit(cli, backend, "--detach", *(["--job-dir", str(job_dir)] if given else []), "--",
                        "--prepare-data")
        assert result.code == 0, result.err
        purge = "" if given else ", or remove them first with `python -m launcher delete mnist --purge`"
        assert (f"note: the job dir {job_dir} already holds checkpoints (the latest at step 40): the job resumes "
                f"from it; to start over, use another --job-dir{purge}\n") in result.err


def test_a_local_job_with_its_own_command_needs_no_tensorflow_here(cli, monkeypatch, tmp_path):
    """The local backend's replicas run a config file's containerCommand, not the trainer: a
    machine without TensorFlow runs it (the trainer's own job is refused there)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorflow" else real(name, *a))
    config = tmp_path / "config.yaml"
    config.write_text("trainingInput:\n  scaleTier: BASIC\n  masterConfig: {containerCommand: [python3, -c, 'pass']}\n")
    backend = FakeBackend(name="local", default_dir=str(tmp_path))
    result = submit(cli, backend, "--config", str(config), "--detach")
    assert result.code == 0, result.err
    assert backend.submitted[0][0]["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0][
        "command"] == ["python3", "-c", "pass"]


@pytest.mark.parametrize("flags, field", [
    (["--dry-run", "--server-dry-run"], "--server-dry-run"),
    (["--dry-run=client", "--server-dry-run"], "--server-dry-run"),
    (["--dry-run=sever"], "--dry-run"),
    (["--dry-run", "--detach"], "--detach"),
    (["--stream-logs", "--async"], "--stream-logs"),
    (["--dry-run", "--stream-logs"], "--stream-logs"),  # a dry run follows nothing
    (["--server-dry-run", "--replace"], "--replace"),
    (["--backend", "local", "--kubeconfig", "/tmp/kubeconfig"], "--kubeconfig"),
    (["--backend", "local", "--context", "gke"], "--context"),
    (["--request-timeout", "0"], "--request-timeout"),
    (["--request-timeout", "soon"], "--request-timeout"),
    (["--backend", "local", "--request-timeout", "5s"], "--request-timeout"),  # no API server to bound
])
def test_conflicting_or_bad_flags_are_refused(cli, flags, field):
    backend = FakeBackend(name="k8s")
    result = cli("submit", "--name", "mnist", *(["--backend", "k8s"] if "--backend" not in flags else []), *flags,
                 backend=backend)
    assert (result.code, result.out) == (2, "") and backend.submitted == [] and backend.dry_runs == []
    assert result.err.startswith(f"error: {field}: ") and result.err.count("\n") == 1, result.err


@pytest.mark.parametrize("backend_name, extra, trainer_args, message", [
    ("local", [], ["--train-steps", "abc"], "argument --train-steps: "
                                            "'abc' is not an integer > 0"),
    ("local", ["--dry-run"], ["--modle", "taxi"], "unrecognized arguments: --modle taxi (did you mean --model?)"),
    ("k8s", [], ["--batch-size", "0"], "argument --batch-size: must be > 0, got 0"),  # the default image's trainer
    ("k8s", ["--dry-run"], ["--model", "nope"], "argument --model: invalid choice: 'nope' "
                                                "(choose from 'mnist', 'mnist-cloudml', 'taxi')"),
])
def test_trainer_arguments_the_trainer_would_refuse_stop_submit(cli, backend_name, extra, trainer_args, message):
    """Every replica would exit 2 on them, and under OnFailure restart on them without end."""
    backend = FakeBackend(name=backend_name)
    result = submit(cli, backend, *extra, "--", *trainer_args)
    assert (result.code, result.out) == (2, "") and backend.submitted == [] and backend.dry_runs == []
    assert result.err == (f"error: trainer arguments (after --): {message}; "
                          "see `python -m trainer.task --help`\n"), result.err


@pytest.mark.parametrize("flags", [["--image", "gcr.io/project/own-program:1"], ["--module-name", "my_trainer.task"]])
def test_arguments_of_another_program_go_through_unchecked(cli, flags):
    backend = FakeBackend(name="k8s")
    # --detach=false is the program's own: the launcher's reading of kubectl's =false (which
    # drops the flag) stops at --
    assert submit(cli, backend, *flags, "--", "--its-own-flag", "x", "--detach=false").code == 0
    tfjob, _ = backend.submitted[0]
    assert tfjob["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]["args"][-3:] == \
        ["--its-own-flag", "x", "--detach=false"]


def test_trainer_arguments_from_a_config_file_are_blamed_on_it(cli, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("trainingInput:\n  scaleTier: BASIC\n  args: [--train_steps, '-5']\n")
    backend = FakeBackend(name="local")
    result = submit(cli, backend, "--config", str(config))
    assert (result.code, result.out, backend.submitted) == (2, "", [])
    assert result.err == (f"error: --config {config}: trainer arguments from the file: argument "
                          "--train-steps: must be > 0, got -5; "
                          "see `python -m trainer.task --help`\n"), result.err


def test_render_refuses_trainer_arguments_too(cli):
    result = cli("render", "--name", "mnist", "--", "--train-steps", "0")
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith("error: trainer arguments (after --): argument --train-steps") and \
        result.err.count("\n") == 1, result.err


def test_existing_name_is_reported_and_replace_replaces(cli):
    backend = FakeBackend(name="k8s", existing=("mnist",))
    taken = submit(cli, backend, "--detach", "--", "--data-dir", "gs://bkt/data/mnist")
    assert taken.code == 1 and taken.out == ""
    assert taken.err.startswith("error: tfjob mnist already exists")
    replaced = submit(cli, backend, "--detach", "--replace")
    assert replaced.code == 0 and backend.submitted[-1][1] is True


def test_local_backend_default_job_dir_and_gpu_note(cli):
    backend = FakeBackend(name="local", default_dir="/runs")
    result = submit(cli, backend, "--detach", "--gpus-per-worker", "1", "--accelerator", "nvidia-tesla-t4")
    assert result.code == 0
    assert "GPU settings are ignored by the local backend" in result.err
    container = backend.submitted[0][0]["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["args"][:2] == ["--job-dir", "/runs/default/mnist"]
    gpus = submit(cli, FakeBackend(name="local", default_dir="/runs"), "--detach", "--gpus-per-worker", "1")
    assert gpus.code == 0, gpus.err  # GPUs without --accelerator: the note all the same
    assert "note: GPU settings are ignored by the local backend (replicas run on this machine's CPU)\n" in gpus.err


def test_the_local_backend_says_what_it_does_not_use(cli):
    result = submit(cli, FakeBackend(name="local", default_dir="/runs"), "--detach", "--image", "gcr.io/p/t:1",
                    "--ttl-seconds", "60")
    assert result.code == 0, result.err
    assert ("note: --image gcr.io/p/t:1 is not used by the local backend: its replicas run this installation's "
            "trainer (python -m trainer.task) on this machine\n") in result.err
    assert "note: --ttl-seconds is ignored by the local backend (a finished job stays until `delete`)\n" in result.err
    quiet = submit(cli, FakeBackend(name="k8s"), "--detach", "--image", "gcr.io/p/t:1", "--ttl-seconds", "60")
    assert "local backend" not in quiet.err


@pytest.mark.parametrize("extra, trainer_args, line", [
    ([], ["--data-dir", "/nonexistent/mnist"],
     "error: trainer arguments (after --): --data-dir '/nonexistent/mnist' does not exist on this machine: every "
     "replica would exit 2 on it and restart; write the data with `python -m trainer.data --dataset mnist --out "
     "/nonexistent/mnist`, or add --prepare-data"),
    (["--workers", "1", "--ps", "0", "--module-name", "no_such_package.task"], [],
     "error: --module-name: no module 'no_such_package' on this machine: every replica would fail `python -m "
     "no_such_package.task` and restart; give its package with --package-path DIR, or install it"),
    (["--job-dir", "/etc/hostname/runs/mnist"], [],  # a file on the way (permissions: root may write anywhere)
     "error: --job-dir: the chief could not write '/etc/hostname/runs/mnist' and would restart on it: /etc/hostname "
     "is not a directory; give another path"),
])
def test_a_local_job_whose_replicas_would_all_fail_at_start_is_refused(cli, extra, trainer_args, line):
    """Under OnFailure they would restart on it without end (1 s, then up to every 30 s)."""
    backend = FakeBackend(name="local", default_dir="/runs")
    result = submit(cli, backend, "--detach", *extra, "--", *trainer_args)
    assert (result.code, result.out, result.err.splitlines()[-1]) == (2, "", line)
    assert backend.submitted == []


@pytest.mark.parametrize("mode", ["--detach", "--dry-run=server"])
def test_a_local_job_beyond_this_machines_memory_is_refused_before_anything_starts(cli, mode):
    """100,002 replicas of at least 200 MB each: more than this (or any) machine has; the
    server dry run would reserve a port for each."""
    backend = FakeBackend(name="local", default_dir="/runs")
    result = submit(cli, backend, mode, "--workers", "100000")
    line = result.err.splitlines()[-1]
    assert (result.code, result.out) == (2, ""), result.err
    assert line.startswith("error: --workers: the local backend runs each of the job's 100,002 replicas as a "
                           "process on this machine, and they need at least 19,531.6 GB of memory (200 MB each); ")
    assert line.endswith(" replicas here, or a cluster (--backend k8s)")
    assert backend.submitted == [] and backend.dry_runs == []
    assert submit(cli, FakeBackend(name="k8s"), mode, "--workers", "100000").code == 0  # the cluster places them
    assert submit(cli, FakeBackend(name="local"), "--dry-run=client", "--workers", "100000").code == 0  # prints it


def test_an_empty_default_data_dir_is_refused_and_prepare_data_lets_it_through(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("MNIST_DATA_DIR", str(tmp_path))  # there, but no train-* records
    result = submit(cli, FakeBackend(name="local", default_dir="/runs"), "--detach")
    assert result.code == 2 and result.err.splitlines()[-1].startswith(
        f"error: trainer arguments (after --): the default data dir ($MNIST_DATA_DIR or data/mnist) '{tmp_path}' has "
        "no train-* records on this machine")
    assert submit(cli, FakeBackend(name="local", default_dir="/runs"), "--detach", "--", "--prepare-data").code == 0
    assert submit(cli, FakeBackend(name="local", default_dir="/runs"), "--dry-run").code == 0  # a dry run shows it
    patterns = ("--train_data_paths", f"{tmp_path}/records/train-*", "--eval_data_paths", f"{tmp_path}/records/eval-*")
    read = submit(cli, FakeBackend(name="local", default_dir="/runs"), "--detach", "--", *patterns)
    assert read.code == 0, read.err  # the records of file patterns, not the data dir's, are read


def test_explicit_job_dir_wins_over_the_local_default(cli):
    backend = FakeBackend(name="local", default_dir="/runs")
    submit(cli, backend, "--detach", "--job-dir", "/data/out")
    container = backend.submitted[0][0]["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]
    assert container["args"][:2] == ["--job-dir", "/data/out"]


@pytest.mark.parametrize("trainer_args", [["--model_dir", "/data/mine"], ["--job_dir=/data/mine"],
                                          ["--output_path", "/data/mine"]])
def test_a_job_dir_given_to_the_trainer_is_the_jobs_no_local_default_added(cli, trainer_args):
    backend = FakeBackend(name="local", default_dir="/runs")
    assert submit(cli, backend, "--detach", "--", *trainer_args).code == 0
    container = backend.submitted[0][0]["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]
    assert "--job-dir" not in container["args"] and container["args"][-len(trainer_args):] == trainer_args

    from launcher.cli.jobs import job_dir_of  # what `tensorboard` and `serve --from-job` read

    assert job_dir_of(backend.submitted[0][0]) == "/data/mine"


@pytest.mark.parametrize("extra, trainer_args, message", [
    (["--job-dir", "gs://aaa/x"], ["--job-dir", "gs://bbb/y"],
     "error: --job-dir: given twice: 'gs://aaa/x' by --job-dir and 'gs://bbb/y' by the trainer argument --job-dir; "
     "give it once, as --job-dir (the launcher passes it to the trainer)"),
    ([], ["--model_dir", "/a", "--job_dir", "/b"],
     "error: --job-dir: given 2 times in the trainer arguments (--model_dir, --job_dir); give it once, as --job-dir"),
    ([], ["--model_dir", "s3://b/x"], "error: trainer arguments (after --): --model_dir: 's3://b/x' is not supported; "
                                      "use a local path or gs://BUCKET/path"),
])
def test_a_job_dir_given_twice_is_refused(cli, extra, trainer_args, message):
    """The trainer would write to the last; tensorboard, serve --from-job and the local
    backend's outputs would follow another."""
    for backend in (FakeBackend(name="local", default_dir="/runs"), FakeBackend(name="k8s")):
        result = submit(cli, backend, *extra, "--", *trainer_args)
        assert (result.code, result.out) == (2, "") and result.err.startswith(message), result.err
        assert backend.submitted == [] and backend.dry_runs == []


def test_follows_worker_0_without_a_chief(cli):
    backend = FakeBackend(name="k8s", events=lifecycle(replicas=("worker-0", "worker-1")))
    result = submit(cli, backend, "--ps", "0", "--workers", "2")
    assert result.code == 0
    assert backend.log_requests == [("mnist", "worker-0", True)]


def test_event_stream_ending_early_falls_back_to_status(cli):
    events = [JobCondition("Created"), replica_phase("chief-0", "Running"), JobCondition("Running")]
    result = submit(cli, FakeBackend(name="k8s", events=events))
    assert result.code == 1
    assert "event stream ended while mnist was Running" in result.err


class BrokenEvents(FakeBackend):
    def events(self, name, namespace, stop=None):
        yield JobCondition("Created")
        raise BackendError("watch failed: connection reset")


def test_broken_event_stream_exits_1(cli):
    result = submit(cli, BrokenEvents(name="k8s"))
    assert result.code == 1
    assert "lost the event stream of mnist" in result.err


@pytest.mark.parametrize("outcome, code", [("Succeeded", 0), ("Failed", 1)])
def test_status_watch_exit_codes(cli, outcome, code):
    backend = FakeBackend(name="k8s", events=lifecycle(outcome), existing=("mnist",))
    backend.script, events = backend.script[:2], backend.script
    backend.events = lambda name, namespace: iter(events)
    result = cli("status", "mnist", "-w", "--backend", "k8s", backend=backend)
    assert result.code == code
    assert result.out.splitlines()[-1] == f"mnist: {outcome}"


def test_render_refuses_an_out_of_range_count_with_the_packaged_crd(cli, monkeypatch):
    """The CRD check behind the spec's own rules: with the spec's int32 limit lifted, the
    packaged CRD refuses the count."""
    monkeypatch.delenv("TFJOB_CRD", raising=False)
    monkeypatch.setattr("launcher.spec.INT32_MAX", 2**63 - 1)
    result = cli("render", "--workers", "1000000000000")
    assert result.code == 2 and result.out == ""
    assert result.err.startswith("error: spec.tfReplicaSpecs.Worker.replicas:") and "int32" in result.err


class ClusterCRDBackend(FakeBackend):
    """FakeBackend whose cluster has a given TFJob CRD installed (or none readable)."""

    def __init__(self, crd=None, error=None, **kwargs):
        super().__init__(**kwargs)
        self.crd, self.error, self.crd_requests = crd, error, []

    def installed_crd(self, crd_name):
        self.crd_requests.append(crd_name)
        if self.error:
            raise self.error
        return self.crd


def stricter_crd(maximum: int) -> dict:
    import yaml

    from launcher.schemas import packaged_path

    crd = yaml.safe_load(packaged_path("tfjob").read_text())
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "tfReplicaSpecs"]["additionalProperties"]["properties"]["replicas"]["maximum"] = maximum
    return crd


def test_submit_validates_against_the_crd_the_cluster_has_installed(cli):
    backend = ClusterCRDBackend(name="k8s", crd=stricter_crd(1))
    result = submit(cli, backend, "--workers", "2")
    assert result.code == 2 and backend.submitted == []
    assert backend.crd_requests == ["tfjobs.kubeflow.org"]
    assert "spec.tfReplicaSpecs.Worker.replicas" in result.err


def test_tfjob_crd_wins_over_the_clusters_crd(cli, monkeypatch):
    from launcher.schemas import packaged_path

    monkeypatch.setenv("TFJOB_CRD", str(packaged_path("tfjob")))
    backend = ClusterCRDBackend(name="k8s", crd=stricter_crd(1))
    result = submit(cli, backend, "--workers", "2", "--detach")
    assert result.code == 0, result.err
    assert backend.crd_requests == [] and len(backend.submitted) == 1


def test_unreadable_cluster_crd_falls_back_to_the_packaged_copy_with_a_note(cli, monkeypatch):
    from launcher.backends.base import CRDUnavailable

    monkeypatch.setattr("launcher.spec.INT32_MAX", 2**63 - 1)  # the packaged CRD, not the spec, refuses the count
    backend = ClusterCRDBackend(name="k8s", error=CRDUnavailable(
        "cannot read CRD tfjobs.kubeflow.org from https://k8s (not permitted to read it)"))
    result = submit(cli, backend, "--detach")
    assert result.code == 0, result.err
    assert ("note: cannot read CRD tfjobs.kubeflow.org from https://k8s (not permitted to read it); "
            "validating with the packaged CRD of training-operator v1.9.4") in result.err
    bad = submit(cli, ClusterCRDBackend(name="k8s", error=CRDUnavailable("x")), "--workers", "1000000000000")
    assert bad.code == 2 and "int32" in bad.err


def test_version_prints_the_distribution_version(cli):
    from importlib import metadata

    result = cli("--version")
    assert (result.code, result.out) == (0, f"tfjob-launcher {metadata.version('tfjob-launcher')}\n")


def test_local_submit_off_linux_stops_before_anything_starts(cli, monkeypatch):
    """sys.platform set to darwin: a stand-in for a Mac, where the local backend's process
    supervision (/proc, prctl) cannot work; a client dry run (no process) still prints."""
    import sys

    monkeypatch.setattr(sys, "platform", "darwin")
    backend = FakeBackend(name="local")
    result = submit(cli, backend)
    assert (result.code, result.out, backend.submitted) == (2, "", []), result
    assert result.err.startswith("error: --backend local: the local backend runs each replica as a Linux process (it "
                                 "reads /proc and uses Linux's process controls), and this machine runs ")
    assert result.err.endswith("; submit to a cluster (kind, minikube, GKE) with --backend k8s, or run the launcher in "
                               "a Linux VM or container\n") and result.err.count("\n") == 1
    assert submit(cli, FakeBackend(name="local"), "--dry-run=server").code == 2
    assert submit(cli, FakeBackend(name="local"), "--dry-run").code == 0
    assert submit(cli, FakeBackend(name="k8s")).code == 0


def test_local_submit_without_tensorflow_stops_before_anything_starts(cli, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorflow" else real(name, *a))
    backend = FakeBackend(name="local")
    result = submit(cli, backend)
    assert (result.code, result.out) == (2, "") and backend.submitted == []
    assert result.err == ("error: --backend local: the local backend runs the trainer on this machine and needs "
                          "TensorFlow, which is not installed; pip install 'tfjob-launcher[local]', or submit to a "
                          "cluster with --backend k8s\n")
    assert submit(cli, FakeBackend(name="local"), "--dry-run").code == 0  # a dry run starts nothing: allowed


def test_local_backend_notes_ignored_cpu_and_memory_requests(cli):
    result = submit(cli, FakeBackend(name="local"), "--cpu", "worker=2", "--memory", "1Gi")
    assert result.code == 0, result.err
    assert ("note: CPU and memory requests are ignored by the local backend "
            "(replicas share this machine's cores and memory)") in result.err.splitlines()
    assert "CPU and memory" not in submit(cli, FakeBackend(name="local")).err


def test_the_no_cluster_note_comes_with_submit_only(cli, monkeypatch, tmp_path):
    from launcher.backends import LOCAL_NOTE

    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    fake = FakeBackend(name="local", existing=("mnist",))
    assert LOCAL_NOTE.format(force="--backend k8s") in cli("submit", "--name", "job", "--detach", backend=fake).err
    for argv in (["status", "mnist"], ["list"], ["logs", "mnist"], ["delete", "mnist"]):
        result = cli(*argv, backend=FakeBackend(name="local", existing=("mnist",)))
        assert result.code == 0 and "No Kubernetes cluster" not in result.err, (argv, result.err)


def test_output_formats_of_submit(cli):
    import json

    backend = FakeBackend(name="k8s")
    as_json = json.loads(submit(cli, backend, "--dry-run", "--no-network-policy", "-o", "json").out)
    assert as_json["kind"] == "TFJob" and as_json["metadata"]["name"] == "mnist"
    # kubectl's -o name: the resource alone, dry run or not, and nothing else on stdout (the
    # hint of --detach is a note on stderr), so that NAME=$(submit --detach -o name) is the name
    for extra in (("--dry-run=server",), ("--dry-run",), ("--detach",)):
        named = submit(cli, FakeBackend(name="k8s"), *extra, "-o", "name")
        assert named.code == 0 and named.out == "tfjob.kubeflow.org/mnist\n", (extra, named)
    detached = submit(cli, FakeBackend(name="k8s"), "--detach", "-o", "json")
    assert json.loads(detached.out)["kind"] == "TFJob" and "Follow it:" in detached.err
    # followed (no --detach), the job's lines go to stderr, as gcloud's --stream-logs: stdout stays -o's
    for output in ("json", "yaml", "name"):
        followed = submit(cli, FakeBackend(name="k8s", logs=CHIEF_LOGS), "-o", output)
        assert followed.code == 0, followed.err
        assert "[chief-0] starting" in followed.err and "mnist: Succeeded" in followed.err.splitlines()[-1]
        if output == "name":
            assert followed.out == "tfjob.kubeflow.org/mnist\n"
        else:
            assert (json.loads if output == "json" else yaml.safe_load)(followed.out)["metadata"]["name"] == "mnist"


def test_local_backend_notes_cluster_only_scheduling_flags(cli):
    result = submit(cli, FakeBackend(name="local"), "--queue-name", "q", "--success-policy", "AllWorkers",
                    "--gang", "--gang-min-available", "2", "--istio-sidecar", "--service-account", "trainer",
                    "--node-selector", "pool=a")
    assert result.code == 0, result.err
    assert ("note: --queue-name, --gang, --success-policy, --istio-sidecar, --service-account, --node-selector are "
            "ignored by the local backend (it starts every replica at once, as your processes on this machine, "
            "without Istio; the chief decides success)") in result.err.splitlines()
    alone = submit(cli, FakeBackend(name="local"), "--istio-sidecar")
    assert "note: --istio-sidecar is ignored by the local backend" in alone.err


def test_local_backend_notes_an_unused_max_resubmits(cli):
    from launcher.cli.submit import MAX_RESUBMITS_UNUSED

    result = submit(cli, FakeBackend(name="local"), "--max-resubmits", "2")
    assert result.code == 0 and MAX_RESUBMITS_UNUSED in result.err.splitlines(), result.err
    assert "--max-resubmits" not in submit(cli, FakeBackend(name="local")).err
    assert "--max-resubmits" not in submit(cli, FakeBackend(name="k8s"), "--max-resubmits", "2").err


def test_local_submit_names_the_local_jobs_it_will_share_the_cores_with(cli):
    import os

    from launcher.backends.base import JobSummary

    backend = FakeBackend(name="local", existing=("a", "mnist"))
    backend.list = lambda namespace: [JobSummary("a", "default", "Running"), JobSummary("b", "team", "Restarting"),
                                      JobSummary("c", "default", "Succeeded"), JobSummary("mnist", "default", "Running")]
    result = submit(cli, backend, "--replace")
    cores = os.cpu_count()
    assert result.code == 0 and (f"note: local jobs a, b -n team also run here: the jobs share this machine's {cores} "
                                 f"core{'s' if cores > 1 else ''}, each training slower (stop one with `python -m "
                                 "launcher delete NAME`)") in result.err.splitlines(), result.err
    backend.list = lambda namespace: [JobSummary("c", "default", "Failed"), JobSummary("mnist", "default", "Running")]
    assert "also run" not in submit(cli, backend, "--replace").err  # ended jobs, and the job it replaces
    assert "also run" not in submit(cli, FakeBackend(name="local", existing=("a",)), "--dry-run").err


def test_gclouds_async_is_detach_and_stream_logs_the_default(cli):
    backend = FakeBackend(name="k8s")
    detached = submit(cli, backend, "--async")
    assert detached.code == 0 and backend.log_requests == [] and detached.err.splitlines()[-1].startswith("Follow it:")
    streamed = submit(cli, FakeBackend(name="k8s", logs=CHIEF_LOGS), "--stream-logs")
    assert streamed.code == 0 and "[chief-0] starting" in streamed.out


def test_a_job_for_a_kueue_queue_is_shown_queued_from_the_start(cli):
    queued = [JobCondition("Created", reason="TFJobCreated"),
              JobCondition("Suspended", reason="TFJobSuspended", message="TFJob mnist is suspended."),
              JobCondition("Suspended", status="False", reason="TFJobResumed"),
              *lifecycle()[1:]]
    result = submit(cli, FakeBackend(name="k8s", events=queued), "--queue-name", "team-a")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == ("tfjob mnist submitted (namespace default, k8s backend); queued in Kueue LocalQueue team-a: "
                        "no pods until Kueue admits it (kubectl get workloads -n default)")
    assert lines[2].startswith("mnist: Suspended (queued in Kueue LocalQueue team-a") and \
        lines[3] == "mnist: Resumed (admitted by Kueue)"


def test_submit_wide_prints_the_job_as_a_table_row(cli):
    args = ("--workers", "2", "--image", "registry.example/trainer:1", "--job-dir", "gs://my-bucket/runs/1",
            "--queue-name", "team-a", "--detach", "-o", "wide")
    result = submit(cli, FakeBackend(name="k8s"), *args)
    assert result.code == 0, result.err
    header, row = result.out.splitlines()[:2]
    assert header.split() == ["NAME", "NAMESPACE", "BACKEND", "REPLICAS", "IMAGE", "JOB", "DIR", "QUEUE"]
    assert row.split() == ["mnist", "default", "k8s", "chief=1", "ps=1", "worker=2", "registry.example/trainer:1",
                           "gs://my-bucket/runs/1", "team-a"]
    backend = FakeBackend(name="k8s")
    dry = submit(cli, backend, "--dry-run", "-o", "wide")
    assert dry.code == 0 and dry.out.splitlines()[1].endswith("<none>   (dry run)") and backend.submitted == []



@pytest.mark.parametrize("extra, noted", [
    ((), True),  # the default data dir, data/mnist in the image's /app: the image holds no records
    (("--", "--data-dir", "/data/mnist"), True),
    (("--", "--prepare-data"), False),
    (("--", "--data-dir", "gs://bkt/data/mnist"), False),
    (("--volume", "data:/mnt/data", "--", "--data-dir", "/mnt/data/mnist"), False),
    (("--env", "MNIST_DATA_DIR=gs://bkt/mnist"), False),
    (("--image", "gcr.io/p/own:1"), False),  # its own program, or records of its own
    (("--dry-run", "client"), False),  # a preview: the inputs may come later
])
def test_a_cluster_job_whose_pods_cannot_have_the_data_dir_says_so(cli, extra, noted):
    """`submit --workers 4 --ps 1` to a cluster: every replica exited 2 on a data dir the
    default image does not hold, after the job was applied, and nothing said so before."""
    backend = FakeBackend(name="k8s")
    result = submit(cli, backend, *(() if "--dry-run" in extra else ("--detach",)), *extra)
    assert result.code == 0, result.err
    line = ("note: the default data dir ($MNIST_DATA_DIR or data/mnist) 'data/mnist' is inside each pod, and the "
            "image tfjob-trainer:")
    assert ("is inside each pod" in result.err) == noted, result.err  # any data dir's note, not only the two below
    assert not noted or line in result.err or "'/data/mnist' is inside each pod" in result.err, result.err
