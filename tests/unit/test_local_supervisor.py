"""The local supervisor's decisions, on the real Supervisor of a job folder (no `main` loop):
restart delays and what a replica says while it waits, what the replicas say once the job
ended, and what a job whose supervisor died says. Processes, where one is needed, are real."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.backends.local import _lost
from launcher.backends.local.plan import build_plan
from launcher.backends.local.runs import RunsDir
from launcher.backends.local.supervisor import Supervisor
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec, RunPolicy


@pytest.fixture
def supervisor(tmp_path, monkeypatch):
    """A supervisor of a chief + 2 workers job (not started), with the default backoff."""
    monkeypatch.delenv("TFJOB_LOCAL_BACKOFF_SECONDS", raising=False)
    monkeypatch.setenv("TFJOB_LOCAL_STOP_GRACE_SECONDS", "5")

    def make(**run_policy) -> Supervisor:
        tfjob = render(JobSpec(name="sup", replicas={"Chief": ReplicaSpec(1), "Worker": ReplicaSpec(2)},
                               run_policy=RunPolicy(**run_policy)))
        run = RunsDir(tmp_path / "runs").job("sup", "default")
        run.create(tfjob, build_plan(tfjob, environ={}))
        return Supervisor(run)

    return make


def test_restarts_wait_longer_each_time_and_start_over_after_a_long_run(supervisor):
    """1 s, 2 s, 4 s ... per replica, as the replica's message says; a replica that ran
    60 s before it failed waits 1 s again (README: 1 s doubling, capped at 30 s)."""
    sup = supervisor()
    worker = sup.replicas[1]
    said = []
    for ran in (0.5, 0.5, 0.5, 61.0, 0.5):
        sup.schedule_restart(worker, 3, ran)
        said.append(worker.message)
    assert said == [f"exited with code 3; restart {n} in {s} s" for n, s in ((1, 1), (2, 2), (3, 4), (4, 1), (5, 2))]
    assert (worker.phase, worker.restarts, sup.total_restarts) == ("Pending", 5, 5)
    restarting = sup.conditions[-1]
    assert (restarting["type"], restarting["message"]) == (
        "Restarting", "TFJob default/sup is restarting because replica worker-0 exited with code 3.")


@pytest.mark.parametrize("outcome, policy, note", [
    ("Succeeded", "Running", "stopped because the job succeeded (cleanPodPolicy Running)"),
    ("Failed", "None", "stopped because the job failed (cleanPodPolicy None; processes cannot outlive a local job)"),
])
def test_at_the_end_a_running_replica_is_stopped_and_one_waiting_to_restart_ends_too(supervisor, outcome, policy,
                                                                                       note):
    """The ps and workers still running when the chief succeeds are stopped and end with the
    job's phase, saying why; one waiting for its restart is not left Pending in a finished job."""
    sup = supervisor(clean_pod_policy=policy)
    chief, running, waiting = sup.replicas
    chief.phase, chief.exit_code = ("Succeeded", 0) if outcome == "Succeeded" else ("Failed", 1)
    running.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], process_group=0)
    running.phase = "Running"
    sup.schedule_restart(waiting, 1, 0.5)
    sup.outcome = (outcome, "Reason", "message")
    try:
        sup.finish()
    finally:
        if running.proc:
            running.proc.kill()
            running.proc.wait()
    rows = {row["id"]: row for row in json.loads(sup.run.status_path.read_text())["replicas"]}
    assert {rid: (row["phase"], row["message"]) for rid, row in rows.items()} == {
        "chief-0": (chief.phase, ""), "worker-0": (outcome, note), "worker-1": (outcome, note)}
    assert rows["worker-0"]["exit_code"] == 128 + signal.SIGTERM and rows["worker-0"]["pid"] is None
    assert waiting.restart_at is None and len(waiting.log_ends) == 1  # its (empty) last process ended
    assert json.loads(sup.run.status_path.read_text())["exit_code"] == (0 if outcome == "Succeeded" else 1)


def test_a_job_whose_supervisor_died_fails_every_replica_not_yet_ended(tmp_path):
    """status after the supervisor was killed (SIGKILL, OOM): what was running or waiting to
    restart died with it; what had ended stays as it ended."""
    run = RunsDir(tmp_path).job("lost", "default")
    rows = [{"id": rid, "type": "Worker", "index": i, "phase": phase, "pid": pid, "restarts": 0}
            for i, (rid, phase, pid) in enumerate((("worker-0", "Succeeded", None), ("worker-1", "Running", 41),
                                                   ("worker-2", "Pending", None)))]
    raw = {"name": "lost", "namespace": "default", "supervisor": {"pid": 40, "start": 1}, "history": [],
           "conditions": [{"type": "Running", "status": "True", "reason": "TFJobRunning", "message": "",
                           "time": ""}], "replicas": rows, "exit_code": None}
    lost = _lost(raw, run)
    assert [(r["phase"], r["pid"], r.get("message")) for r in lost["replicas"]] == [
        ("Succeeded", None, None), ("Failed", None, "supervisor lost"), ("Failed", None, "supervisor lost")]
    failed = lost["conditions"][-1]
    assert (failed["type"], failed["reason"]) == ("Failed", "SupervisorLost")
    assert failed["message"] == (f"the local supervisor (pid 40) exited without finishing the job; its replicas "
                                 f"were killed with it; see {run.supervisor_log}")
    assert [e["replica"]["id"] for e in lost["history"] if "replica" in e] == ["worker-1", "worker-2"]  # the changes


def test_the_job_succeeds_with_its_chief_not_with_a_worker_that_exits_0_first(supervisor):
    """The operator's rule: with a chief, the chief's success is the job's; a worker done
    first is just Succeeded while the chief trains on."""
    sup = supervisor()
    chief, worker, _ = sup.replicas
    procs = [subprocess.Popen([sys.executable, "-c", "pass"], process_group=0) for _ in range(2)]
    chief.proc, worker.proc = procs
    try:
        sup.on_exit(worker, worker.proc.wait(timeout=60))
        assert sup.outcome is None and (worker.phase, worker.exit_code) == ("Succeeded", 0)
        sup.on_exit(chief, chief.proc.wait(timeout=60))
        assert sup.outcome == ("Succeeded", "TFJobSucceeded", "TFJob default/sup successfully completed.")
    finally:
        for proc in procs:  # reaped on a failed assertion too
            proc.kill()
            proc.wait()


def test_a_replica_that_cannot_start_fails_the_job_naming_the_program_and_why(supervisor):
    """A container command this machine does not have: no traceback in the supervisor, the
    job Failed naming the replica, the program and the system's reason."""
    sup = supervisor()
    worker = sup.replicas[1]
    worker.spec["argv"] = ["/nonexistent/trainer", "--flag"]
    sup.start(worker)
    assert (worker.phase, worker.exit_code, worker.proc) == ("Failed", 127, None)
    assert worker.message == "cannot start '/nonexistent/trainer': No such file or directory"
    assert sup.outcome == ("Failed", "TFJobFailed",
                           "replica worker-0 could not start '/nonexistent/trainer': No such file or directory")


def test_a_secret_gone_when_a_replica_restarts_fails_the_job_saying_how_to_give_it(tmp_path, monkeypatch):
    """The value is read as each replica starts: one removed after the submit (its file
    deleted, the variable unset) fails the job in the launcher's one line, naming no value."""
    from launcher.spec import SecretEnv

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("TFJOB_LOCAL_SECRETS_DIR", str(tmp_path / "secrets"))
    tfjob = render(JobSpec(name="sec", replicas={"Worker": ReplicaSpec(1)},
                           secret_env=(SecretEnv("HF_TOKEN", "hf-token", "token"),)))
    run = RunsDir(tmp_path / "runs").job("sec", "default")
    run.create(tfjob, build_plan(tfjob, environ={}))
    sup = Supervisor(run)
    worker = sup.replicas[0]
    sup.start(worker)
    assert (worker.phase, worker.exit_code, worker.proc) == ("Failed", 127, None)
    assert worker.message == "no value for secret env HF_TOKEN"
    assert sup.outcome == ("Failed", "TFJobFailed", "replica worker-0: --secret-env HF_TOKEN=hf-token:token: the local "
                           "backend found no value; export HF_TOKEN or write the value to "
                           f"{tmp_path}/secrets/hf-token/token")


KILLED_WITH_TEMP = """
import os, sys, tempfile
made = tempfile.mkdtemp(prefix="trainer-")  # as trainer.task's private_tmp
open(os.path.join(made, "f.py"), "w").close()
print(made, os.environ.get("TMPDIR"), flush=True)
os.kill(os.getpid(), 9)  # outright: its own cleanup never runs
"""


def test_a_replica_has_a_temporary_folder_of_its_own_emptied_as_it_exits(supervisor):
    """A replica killed outright (SIGKILL, OOM) left its trainer-* folder (AutoGraph's files)
    in this machine's /tmp: each replica gets $TMPDIR in the job's folder, as a container
    its own /tmp, removed as its process exits and, for all, at the job's end."""
    sup = supervisor()
    chief, worker, _ = sup.replicas
    chief.spec["argv"] = [sys.executable, "-c", KILLED_WITH_TEMP]
    worker.spec["argv"] = [sys.executable, "-c", "import os; print(os.environ['TMPDIR'], flush=True)"]
    worker.spec["env"]["TMPDIR"] = str(sup.run.path / "mine")  # the job's own TMPDIR wins
    sup.start(chief)
    sup.start(worker)
    started = [chief.proc, worker.proc]
    try:
        code = chief.proc.wait(timeout=60)
        worker.proc.wait(timeout=60)
        made, tmpdir = chief.log_path.read_text().split()
        assert Path(tmpdir) == sup.run.tmp_path("chief-0") and Path(made).parent == Path(tmpdir)
        assert Path(made, "f.py").exists() and code == -signal.SIGKILL  # left by the kill
        sup.on_exit(chief, code)
        assert not Path(tmpdir).exists() and sup.run.tmp.is_dir()
        assert worker.log_path.read_text() == f"{sup.run.path / 'mine'}\n"
        sup.start(chief)  # a restart gets it again
        started.append(chief.proc)
        sup.outcome = ("Failed", "Reason", "message")
        sup.finish()
        assert not sup.run.tmp.exists()
    finally:
        for proc in started:  # reaped on a failed assertion too
            proc.kill()
            proc.wait()
