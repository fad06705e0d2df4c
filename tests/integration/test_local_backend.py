"""Local backend with real OS processes: the manifest's container command runs a small
stand-in replica (tests/support/standin_replica.py), so supervision, restart policies,
logs and cleanup are tested without TensorFlow. Waits poll with deadlines; every job's
processes are stopped at teardown even when a test fails."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from launcher.backends.base import AlreadyExists, BackendError, LogOptions, NotFound
from launcher.backends.local import LocalBackend
from launcher.backends.local.plan import SERVER_NICE
from launcher.events import JobCondition, LogEnded, LogLine, ReplicaPhase
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec, RunPolicy
from tests.support.local_jobs import DEADLINE, REPLICA, gone, replica_pids, wait_ready
from tests.support.polling import wait_for
from tests.support.tools import ROOT

NS = "default"


# ---- helpers ------------------------------------------------------------------------
def make_job(name: str, state: Path, actions: dict, restart: str = "OnFailure",
             chief: int = 1, ps: int = 1, workers: int = 2, **run_policy) -> dict:
    spec = JobSpec(
        name=name,
        replicas={"Chief": ReplicaSpec(chief), "PS": ReplicaSpec(ps), "Worker": ReplicaSpec(workers)},
        restart_policy=restart, run_policy=RunPolicy(**run_policy),
        env={"STATE_DIR": str(state)}, command=("python", str(REPLICA)),
        trainer_args=(json.dumps(actions),))
    return render(spec)


def supervisor_pid(backend: LocalBackend, name: str) -> int:
    return json.loads(backend.runs.job(name, NS).status_path.read_text())["supervisor"]["pid"]


def wait_phase(backend: LocalBackend, name: str, phases=("Succeeded", "Failed")):
    return wait_for(lambda: (s := backend.status(name, NS)).phase in phases and s, f"{name} to reach {phases}",
                    DEADLINE)


def replica(status, rid: str) -> ReplicaPhase:
    return next(r for r in status.replicas if r.replica == rid)


@pytest.fixture
def backend(tmp_path, monkeypatch):
    monkeypatch.setenv("TFJOB_LOCAL_BACKOFF_SECONDS", "0.05")
    monkeypatch.setenv("TFJOB_LOCAL_STOP_GRACE_SECONDS", "5")
    monkeypatch.setenv("TFJOB_RUNS_DIR", str(tmp_path / "runs"))
    backend = LocalBackend()
    yield backend
    for job in backend.list(None):
        backend.stop(job.name, job.namespace)


def run_python(code: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=DEADLINE, check=True, **kwargs)


# ---- success, logs, detach, a second process ---------------------------------------------
def test_detached_job_succeeds_and_every_process_reads_its_state(backend, state, tmp_path):
    tfjob = make_job("ok", state, {"chief-0": ["wait-finish"]})
    manifest = tmp_path / "ok.json"
    manifest.write_text(json.dumps(tfjob))
    # submit from a launcher process that exits at once: the job must keep running
    run_python("import json, sys; from launcher.backends.local import LocalBackend; "
               "LocalBackend().submit(json.load(open(sys.argv[1])))", str(manifest))
    wait_ready(state, "ps-0", "worker-0", "worker-1")
    status = backend.status("ok", NS)
    assert status.phase == "Running"
    assert {r.replica: r.phase for r in status.replicas} == dict.fromkeys(
        ["chief-0", "ps-0", "worker-0", "worker-1"], "Running")
    pids = replica_pids(state)

    (state / "finish").touch()
    events = list(backend.events("ok", NS))
    conditions = [e for e in events if isinstance(e, JobCondition) and e.status == "True"]
    assert [c.type for c in conditions] == ["Created", "Running", "Succeeded"]
    final = backend.status("ok", NS)
    assert final.phase == "Succeeded"
    assert replica(final, "chief-0").exit_code == 0
    for rid in ("ps-0", "worker-0", "worker-1"):  # stopped after the chief succeeded
        assert replica(final, rid).exit_code == 128 + signal.SIGTERM
        assert "cleanPodPolicy Running" in replica(final, rid).message
    assert all(gone(pid) for pid in pids.values())
    assert json.loads(backend.runs.job("ok", NS).status_path.read_text())["exit_code"] == 0

    lines = list(backend.logs("ok", NS, replica="all"))
    for rid in ("chief-0", "ps-0", "worker-0", "worker-1"):
        assert LogLine(rid, f"hello from {rid} attempt 0 action "
                       f"{'wait-finish' if rid == 'chief-0' else 'serve'}") in lines
    # TF_CONFIG follows the operator's rules with the 127.0.0.1 addresses of the plan
    seen = next(json.loads(l.line[len("tf_config "):]) for l in lines
                if l.replica == "worker-1" and l.line.startswith("tf_config "))
    plan = backend.runs.job("ok", NS).plan()["replicas"]
    assert seen["task"] == {"type": "worker", "index": 1} and seen["environment"] == "cloud"
    assert seen["cluster"] == {"chief": [plan[0]["address"]], "ps": [plan[1]["address"]],
                               "worker": [plan[2]["address"], plan[3]["address"]]}
    assert all(a.startswith("127.0.0.1:") for a in sum(seen["cluster"].values(), []))

    # status, list and logs from yet another process
    out = run_python("from launcher.backends.local import LocalBackend; b = LocalBackend(); "
                     "print(b.status('ok', 'default').phase); print([j.phase for j in b.list(None)]); "
                     "print(sum(1 for _ in b.logs('ok', 'default', 'worker-1')))").stdout.split("\n")
    assert out[:2] == ["Succeeded", "['Succeeded']"] and int(out[2]) >= 2


@pytest.mark.parametrize("ps", [1, 0])
def test_under_ps_the_servers_yield_the_cpu_and_the_job_shares_one_session(backend, state, ps):
    """ps and workers run SERVER_NICE above this process's nice value, the chief at it
    (without ps, everyone at it); each replica leads its own process group, all in the
    supervisor's session (one kernel autogroup for the job, inside which nice applies)."""
    backend.submit(make_job("prio", state, {"chief-0": ["wait-finish"]}, ps=ps))
    servers = (["ps-0"] if ps else []) + ["worker-0", "worker-1"]
    wait_ready(state, *servers)
    pids = wait_for(lambda: (p := replica_pids(state)).keys() == {"chief-0", *servers} and p, "every pid", DEADLINE)
    base = os.getpriority(os.PRIO_PROCESS, 0)
    lowered = min(base + SERVER_NICE, 19) if ps else base
    assert {rid: os.getpriority(os.PRIO_PROCESS, pid) for rid, pid in pids.items()} == {
        "chief-0": base, **dict.fromkeys(servers, lowered)}
    session = os.getsid(supervisor_pid(backend, "prio"))
    assert {rid: (os.getpgid(pid) == pid, os.getsid(pid)) for rid, pid in pids.items()} == dict.fromkeys(
        pids, (True, session))
    assert session != os.getsid(0)  # the supervisor's own, not the launcher's
    (state / "finish").touch()
    assert wait_phase(backend, "prio").phase == "Succeeded"
    assert all(gone(pid) for pid in pids.values())


# ---- restart policies -----------------------------------------------------------------
def test_onfailure_restarts_a_killed_worker_and_follow_spans_the_restart(backend, state):
    backend.submit(make_job("restart", state, {"chief-0": ["wait-finish"]}))
    followed: list[LogLine] = []
    marked: list = []  # worker-1 with the ends of its processes marked (the live view's stream)
    chief: list = []
    watched: list = []
    threads = [threading.Thread(target=lambda: followed.extend(
                   backend.logs("restart", NS, replica="worker-1", follow=True)), daemon=True),
               threading.Thread(target=lambda: marked.extend(
                   backend.logs("restart", NS, replica="worker-1", follow=True, ends=True)), daemon=True),
               threading.Thread(target=lambda: chief.extend(
                   backend.logs("restart", NS, replica="chief-0", follow=True, ends=True)), daemon=True),
               threading.Thread(target=lambda: watched.extend(backend.events("restart", NS)), daemon=True)]
    for thread in threads:
        thread.start()
    wait_ready(state, "worker-1")
    previous = LogOptions(previous=True)
    with pytest.raises(BackendError, match=r"^--previous: replica worker-1 has no process before its current one "
                                           r"\(restarts 0\)$"):
        backend.logs("restart", NS, replica="worker-1", options=previous)
    (state / "worker-1.ready").unlink()
    os.kill(replica_pids(state)["worker-1"], signal.SIGKILL)
    wait_ready(state, "worker-1")  # the restarted process is serving again
    status = backend.status("restart", NS)
    assert replica(status, "worker-1").restarts == 1 and replica(status, "worker-1").phase == "Running"
    assert status.phase == "Running"
    # kubectl logs -p: the process before the running one, alone
    before = [l.line for l in backend.logs("restart", NS, replica="worker-1", options=previous)]
    assert "hello from worker-1 attempt 0 action serve" in before
    assert not any("attempt 1" in line for line in before)
    assert [l.replica for l in backend.logs("restart", NS, replica="all", options=previous)] == ["worker-1"] * len(before)

    (state / "finish").touch()
    assert wait_phase(backend, "restart").phase == "Succeeded"
    for thread in threads:
        thread.join(DEADLINE)
        assert not thread.is_alive(), "logs -f / events did not end with the job"
    hellos = [l.line for l in followed if l.line.startswith("hello")]
    assert hellos == ["hello from worker-1 attempt 0 action serve", "hello from worker-1 attempt 1 action serve"]
    assert {l.replica for l in followed} == {"worker-1"}
    # each process's end comes after its last line and before the next one's first, and
    # only when asked for (the supervisor records where each process's lines end)
    first, second = "hello from worker-1 attempt 0 action serve", "hello from worker-1 attempt 1 action serve"
    hello_or_end = [item for item in marked if isinstance(item, LogEnded) or item.line.startswith("hello")]
    assert hello_or_end == [LogLine("worker-1", first), LogEnded("worker-1", 0),
                            LogLine("worker-1", second), LogEnded("worker-1", 1)]
    assert [item for item in marked if isinstance(item, LogLine)] == followed
    assert chief[-2:] == [LogLine("chief-0", "chief-0 done"), LogEnded("chief-0", 0)]
    # once it ended, still the process before its last one
    assert [l.line for l in backend.logs("restart", NS, replica="worker-1", options=previous)] == before
    conditions = [e.type for e in watched if isinstance(e, JobCondition) and e.status == "True"]
    assert conditions == ["Created", "Running", "Restarting", "Running", "Succeeded"]
    worker = [(e.phase, e.restarts, e.exit_code) for e in watched
              if isinstance(e, ReplicaPhase) and e.replica == "worker-1"]
    assert ("Pending", 1, 137) in worker and worker[-1][1] == 1


def test_a_restart_without_delay_is_still_recorded(backend, state, monkeypatch):
    """With no backoff the replica is restarted a poll after its exit, not in the same poll,
    so its Pending state and the job's Restarting condition are written (status, events)."""
    monkeypatch.setenv("TFJOB_LOCAL_BACKOFF_SECONDS", "0")
    backend.submit(make_job("nodelay", state, {"chief-0": ["wait-finish"], "worker-1": ["exit3", "serve"]}))
    wait_ready(state, "worker-1")  # its second process
    (state / "finish").touch()
    events = list(backend.events("nodelay", NS))
    conditions = [e.type for e in events if isinstance(e, JobCondition) and e.status == "True"]
    assert conditions == ["Created", "Running", "Restarting", "Running", "Succeeded"]
    worker = [(e.phase, e.restarts, e.exit_code) for e in events
              if isinstance(e, ReplicaPhase) and e.replica == "worker-1"]
    assert ("Pending", 1, 3) in worker


def test_never_fails_the_job_on_the_first_failure(backend, state):
    backend.submit(make_job("never", state, {"chief-0": ["wait-finish"], "worker-1": ["exit1"]},
                            restart="Never"))
    status = wait_phase(backend, "never")
    assert status.phase == "Failed"
    failed = status.conditions[-1]
    assert (failed.type, failed.reason) == ("Failed", "TFJobFailed") and "worker-1" in failed.message
    assert (replica(status, "worker-1").phase, replica(status, "worker-1").exit_code) == ("Failed", 1)
    assert replica(status, "worker-1").restarts == 0
    assert json.loads(backend.runs.job("never", NS).status_path.read_text())["exit_code"] == 1
    assert all(gone(pid) for pid in replica_pids(state).values())


@pytest.mark.parametrize("actions, phase, restarts", [
    ({"worker-1": ["kill-self", "serve"]}, "Succeeded", 1),  # 137: retryable
    ({"worker-1": ["exit2", "serve"]}, "Failed", 0),  # 2: permanent
])
def test_exit_code_policy_restarts_only_signal_deaths(backend, state, actions, phase, restarts):
    backend.submit(make_job("exitcode", state, {"chief-0": ["wait-ready"], **actions},
                            restart="ExitCode", ps=0))
    status = wait_phase(backend, "exitcode")
    assert status.phase == phase
    assert replica(status, "worker-1").restarts == restarts


def test_backoff_limit_counts_restarts_across_the_job(backend, state):
    backend.submit(make_job("backoff", state, {"chief-0": ["wait-finish"], "worker-0": ["exit1"]},
                            ps=0, backoff_limit=2))
    status = wait_phase(backend, "backoff")
    assert (status.phase, status.conditions[-1].reason) == ("Failed", "BackoffLimitExceeded")
    assert replica(status, "worker-0").restarts == 2
    assert (state / "worker-0.attempts").read_text() == "3"


def test_active_deadline_fails_the_job(backend, state):
    backend.submit(make_job("deadline", state, {}, ps=0, workers=1, active_deadline_seconds=1))
    status = wait_phase(backend, "deadline")
    assert (status.phase, status.conditions[-1].reason) == ("Failed", "DeadlineExceeded")
    assert all(gone(pid) for pid in replica_pids(state).values())


# ---- stopping: Ctrl-C, stop, a killed supervisor, delete ---------------------------------
LAUNCHER = """
import json, sys

from launcher.backends.local import LocalBackend
backend = LocalBackend(foreground=True)  # as the CLI's: the job follows this process
tfjob = json.load(open(sys.argv[1]))
backend.submit(tfjob)
for event in backend.events(tfjob["metadata"]["name"], "default"):
    print(event, flush=True)
"""


def test_sigint_to_a_foreground_launcher_leaves_no_process(backend, state, tmp_path):
    manifest = tmp_path / "fg.json"
    manifest.write_text(json.dumps(make_job("fg", state, {"chief-0": ["wait-finish"]})))
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(manifest)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(state, "ps-0", "worker-0", "worker-1")
        pids = [*replica_pids(state).values(), supervisor_pid(backend, "fg")]
        assert not any(gone(pid) for pid in pids)
        launcher.send_signal(signal.SIGINT)
        assert launcher.wait(DEADLINE) != 0
        wait_for(lambda: all(gone(pid) for pid in pids), "every process of the job to exit", DEADLINE)
    finally:
        launcher.kill()
        launcher.wait()
    status = backend.status("fg", NS)
    assert (status.phase, status.conditions[-1].reason) == ("Failed", "Stopped")


PYTHON_FOLLOWER = """
import json, sys

from launcher.backends.local import LocalBackend
backend = LocalBackend()  # as the Python API's (get_backend's default): not the CLI's foreground
tfjob = json.load(open(sys.argv[1]))
backend.submit(tfjob)
for event in backend.events(tfjob["metadata"]["name"], "default"):
    print(event, flush=True)
    break
"""


def test_a_job_submitted_and_followed_from_python_outlives_the_process(backend, state, tmp_path):
    """TrainingClient's create_job then a wait (or its TimeoutError) made the script the job's
    owner, so the job was stopped once the script exited, where the README says it runs on,
    as a cluster's job does."""
    manifest = tmp_path / "api.json"
    manifest.write_text(json.dumps(make_job("api", state, {"chief-0": ["wait-finish"]})))
    done = subprocess.run([sys.executable, "-c", PYTHON_FOLLOWER, str(manifest)], cwd=ROOT, timeout=DEADLINE,
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout, done.stderr
    supervisor = supervisor_pid(backend, "api")
    wait_ready(state, "ps-0", "worker-0", "worker-1")  # long after the follower left
    assert not backend.runs.job("api", NS).owner_path.exists()
    assert backend.status("api", NS).phase == "Running" and not gone(supervisor)
    backend.stop("api", NS)


def test_stop_returns_once_every_process_is_gone(backend, state):
    backend.submit(make_job("stop", state, {}, ps=1, workers=1))
    wait_ready(state, "chief-0", "ps-0", "worker-0")
    pids = [*replica_pids(state).values(), supervisor_pid(backend, "stop")]
    backend.stop("stop", NS)
    assert [pid for pid in pids if not gone(pid)] == []
    assert backend.status("stop", NS).phase == "Failed"


def test_a_stopped_job_says_what_stopped_it(backend, state, monkeypatch):
    """A job deleted, replaced or stopped on Ctrl-C ended `Stopped: stopped by SIGTERM`, all
    alike, so a foreground submit whose job another shell deleted could not say why; a
    SIGTERM from anyone else still names the signal."""
    from launcher.backends.local.runs import RunDir

    last = {}  # each removed run's terminal condition, read as delete removes its folder
    remove = RunDir.remove

    def recording(run, keep_output=False):
        last[run.path.name] = json.loads(run.status_path.read_text())["conditions"][-1]
        return remove(run, keep_output)

    monkeypatch.setattr(RunDir, "remove", recording)

    def ended(name: str) -> dict:
        return {key: last[name][key] for key in ("type", "reason", "message")}

    def submit(tfjob: dict, replace: bool = False) -> None:  # returns once its replicas serve
        for ready in state.glob("*.ready"):
            ready.unlink()
        backend.submit(tfjob, replace=replace)
        wait_ready(state, "chief-0", "worker-0")

    tfjob = make_job("why", state, {}, ps=0, workers=1)
    submit(tfjob)
    submit(tfjob, replace=True)
    assert ended("why") == {"type": "Failed", "reason": "Stopped",
                            "message": "replaced by a new submission of the same name (--replace)"}
    backend.delete("why", NS)
    assert ended("why") == {"type": "Failed", "reason": "Stopped", "message": "deleted by `delete why`"}

    submit(tfjob)
    backend.stop("why", NS)
    assert backend.status("why", NS).conditions[-1].message == \
        "the launcher that ran it in the foreground was interrupted"

    submit(make_job("kill", state, {}, ps=0, workers=1))
    os.kill(supervisor_pid(backend, "kill"), signal.SIGTERM)
    assert wait_phase(backend, "kill").conditions[-1].message == "stopped by SIGTERM"


def test_following_logs_of_a_job_deleted_meanwhile_says_so(backend, state):
    """logs -f of a job another shell deleted ended as if the job had: nothing said."""
    notes = []
    backend.submit(make_job("gone", state, {}, ps=0, workers=1))
    wait_ready(state, "chief-0", "worker-0")
    follower = LocalBackend(runs_dir=str(backend.runs.root), note=notes.append)
    lines = follower.logs("gone", NS, "chief-0", follow=True)
    backend.delete("gone", NS)
    list(lines)  # ends: the job is gone
    assert notes == [f"note: local job {NS}/gone was deleted while its logs were followed; its logs went with it"]


def test_followers_of_a_job_replaced_under_its_name_stop_at_the_replacement(backend, state):
    """--replace reuses the job's folder: a foreground submit following the old job read on
    into the new one's log from the old one's offset (a torn line) and took the new job's
    export for the old job's; events went on with the new job's history, its first entries
    skipped. Both now end there, and say so."""
    notes = []
    old = make_job("again", state, {"chief-0": ["serve", "exit0"]}, ps=0, workers=1)
    backend.submit(old)
    wait_ready(state, "chief-0", "worker-0")
    follower = LocalBackend(runs_dir=str(backend.runs.root), note=notes.append)
    lines = follower.logs("again", NS, "chief-0", follow=True)
    events = follower.events("again", NS)
    assert next(events)  # following the old job
    assert next(lines).line == "hello from chief-0 attempt 0 action serve"  # reading the old job's log
    backend.submit(old, replace=True)  # the new chief's second attempt exits 0 at once: the new job succeeds
    wait_phase(backend, "again")
    rest = [line.line for line in lines]
    assert not any("attempt 1" in line for line in rest), rest  # the new chief's hello is not the old's
    assert all(line.startswith(("tf_config ", "chief-0 ")) for line in rest), rest  # the old one's rest, whole
    assert notes == ["note: local job default/again was replaced by a new submission of the same name while its "
                     "logs were followed; follow the new one's with `logs again -f`"]
    with pytest.raises(NotFound, match="was replaced by a new submission of the same name$"):
        list(events)


def test_a_killed_supervisor_takes_its_replicas_along(backend, state):
    backend.submit(make_job("orphan", state, {}, ps=1, workers=1))
    wait_ready(state, "chief-0", "ps-0", "worker-0")
    os.kill(supervisor_pid(backend, "orphan"), signal.SIGKILL)
    wait_for(lambda: all(gone(pid) for pid in replica_pids(state).values()), "replicas to die with the supervisor",
             DEADLINE)
    status = wait_phase(backend, "orphan")
    assert (status.phase, status.conditions[-1].reason) == ("Failed", "SupervisorLost")


# A replica that starts a process of its own (a shell's command, a data loader's worker):
# the child's pid in STATE/child, then the replica exits 3 or serves.
SPAWN = ("import os, subprocess, sys, time; state, action = sys.argv[1:]; "
         "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
         "open(os.path.join(state, 'child.tmp'), 'w').write(str(child.pid)); "
         "os.replace(os.path.join(state, 'child.tmp'), os.path.join(state, 'child')); "
         "sys.exit(3) if action == 'exit3' else time.sleep(300)")


def spawning_job(name: str, state: Path, action: str) -> dict:
    return render(JobSpec(name=name, replicas={"Worker": ReplicaSpec(1)}, restart_policy="Never",
                          command=("python", "-c", SPAWN, str(state), action)))


def spawned(state: Path) -> int:
    return int(wait_for(lambda: (state / "child").exists() and (state / "child").read_text(), "the child's pid",
                        DEADLINE))


def test_a_replicas_own_processes_end_with_it(backend, state):
    """A replica that exited left the processes it started running after the job had ended
    (and one more set per restart); a container's processes end with its main one."""
    backend.submit(spawning_job("spawner", state, "exit3"))
    child = spawned(state)
    assert wait_phase(backend, "spawner").phase == "Failed"
    wait_for(lambda: gone(child), "the replica's child to end with it", DEADLINE)


def test_delete_stops_the_processes_a_killed_supervisors_replicas_started(backend, state):
    """A supervisor killed (SIGKILL, the OOM killer) takes its replicas along, but not what
    they started: `delete` left those running too."""
    backend.submit(spawning_job("orphans", state, "serve"))
    child = spawned(state)
    os.kill(supervisor_pid(backend, "orphans"), signal.SIGKILL)
    assert wait_phase(backend, "orphans").conditions[-1].reason == "SupervisorLost"
    backend.delete("orphans", NS)
    assert gone(child)


def test_names_conflict_and_delete_removes_everything(backend, state):
    tfjob = make_job("dup", state, {}, ps=0, workers=1)
    backend.submit(tfjob)
    with pytest.raises(AlreadyExists, match="--replace"):
        backend.submit(tfjob)
    wait_ready(state, "chief-0", "worker-0")
    first = replica_pids(state)
    for ready in state.glob("*.ready"):
        ready.unlink()
    backend.submit(tfjob, replace=True)
    assert all(gone(pid) for pid in first.values())
    wait_ready(state, "chief-0", "worker-0")
    assert set(replica_pids(state).values()).isdisjoint(first.values())
    run = backend.runs.job("dup", NS)
    backend.delete("dup", NS, wait=True)
    assert not run.path.exists()
    assert all(gone(pid) for pid in replica_pids(state).values())
    with pytest.raises(NotFound):
        backend.status("dup", NS)
    with pytest.raises(NotFound):
        backend.delete("dup", NS)
    assert backend.list(None) == []


# ---- $(VAR) in the command, args and env, as the kubelet expands them ----------------------
SHOW = ("import json, os, sys; print('argv', json.dumps(sys.argv[1:])); "
        "print('env', json.dumps({k: os.environ.get(k) for k in ('GREETING', 'PHRASE')}))")


def test_variable_references_are_expanded_from_the_containers_own_env_as_in_a_pod(backend):
    """A job runs here as in its pods: Kubernetes expands $(VAR) in command, args and env
    values from the container's env (an env value from the entries before it; args also
    from TF_CONFIG, which the operator adds), leaves a reference to anything else as it
    is (this machine's HOME is no variable of the pod), and reads $$ as one $. Passed
    through literally before, the same arguments meant other things here than there."""
    spec = JobSpec(name="refs", replicas={"Worker": ReplicaSpec(2)}, command=("python", "-c", SHOW),
                   env={"GREETING": "hi", "PHRASE": "$(GREETING) there $$(GREETING) $(HOME)"},
                   trainer_args=("$(GREETING)", "$$(GREETING)", "$(PHRASE)", "$(MISSING)", "$(HOME)", "cost $5",
                                 "$$", "$(", "$(TF_CONFIG)"))
    backend.submit(render(spec))
    assert wait_phase(backend, "refs").phase == "Succeeded"
    # worker-0's lines: the job ends at its exit, and worker-1 is then stopped, maybe before it printed
    lines = {line.line.split(" ", 1)[0]: json.loads(line.line.split(" ", 1)[1])
             for line in backend.logs("refs", NS, replica="worker-0")}
    *plain, tf_config = lines["argv"]
    assert plain == ["hi", "$(GREETING)", "hi there $(GREETING) $(HOME)", "$(MISSING)", "$(HOME)", "cost $5", "$",
                     "$("]
    assert json.loads(tf_config)["task"] == {"type": "worker", "index": 0}
    assert lines["env"] == {"GREETING": "hi", "PHRASE": "hi there $(GREETING) $(HOME)"}
