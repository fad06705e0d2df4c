"""`python -m launcher ... --backend local` end to end with real processes: the replicas
run the stand-in program through a Cloud ML config's containerCommand (no TensorFlow)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from launcher.backends.local import LocalBackend
from launcher.backends.local.logs import rfc3339
from tests.support.launcher_process import LAUNCHER, launcher_process, run_launcher
from tests.support.local_jobs import DEADLINE, REPLICA, gone, replica_pids, wait_ready
from tests.support.polling import wait_for
from tests.support.tools import ROOT

ALL = ("chief-0", "ps-0", "worker-0", "worker-1")


def config(tmp_path: Path, actions: dict) -> str:
    """A Cloud ML CUSTOM tier: chief + 2 workers + 1 ps running the stand-in replica."""
    path = tmp_path / "config.json"  # JSON is YAML
    path.write_text(json.dumps({"trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": 2, "parameterServerCount": 1,
        "masterConfig": {"containerCommand": ["python", str(REPLICA)], "containerArgs": [json.dumps(actions)]},
    }}))
    return str(path)


def submit_args(name: str, tmp_path: Path, state: Path, actions: dict) -> list[str]:
    return ["submit", "--backend", "local", "--name", name, "--config", config(tmp_path, actions),
            "--env", f"STATE_DIR={state}"]


def test_ctrl_c_on_a_foreground_submit_stops_every_process(local_env, state, tmp_path):
    proc = subprocess.Popen([*LAUNCHER, *submit_args("fg", tmp_path, state,
                                                                             {"chief-0": ["wait-finish"]})],
                            cwd=ROOT, env=local_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_ready(state, "ps-0", "worker-0", "worker-1")
        status = json.loads((Path(local_env["TFJOB_RUNS_DIR"]) / "default" / "fg" / "status.json").read_text())
        pids = [*replica_pids(state).values(), status["supervisor"]["pid"]]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=DEADLINE)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    assert [pid for pid in pids if not gone(pid)] == [], err  # gone before the prompt comes back, not a moment later
    assert "Stopped local job fg: every replica has exited." in err
    shown = run_launcher(local_env, "status", "fg", "--backend", "local", timeout=DEADLINE)
    assert "Failed" in shown.stdout and "Stopped" in shown.stdout


def test_detached_job_is_followed_and_deleted_from_later_launchers(local_env, state, tmp_path):
    submitted = run_launcher(local_env, *submit_args("bg", tmp_path, state, {"chief-0": ["wait-finish"]}), "--detach",
                             timeout=DEADLINE)
    assert submitted.returncode == 0, submitted.stderr
    assert "already holds checkpoints" not in submitted.stderr
    wait_ready(state, "ps-0", "worker-0", "worker-1")  # still running after the launcher exited

    logs = run_launcher(local_env, "logs", "bg", "--backend", "local", "--replica", "all", timeout=DEADLINE)
    for rid in ALL:
        assert any(line.startswith(f"[{rid}] hello from {rid} attempt 0") for line in logs.stdout.splitlines())
    unknown = run_launcher(local_env, "logs", "bg", "--backend", "local", "--replica", "worker-7", timeout=DEADLINE)
    assert (unknown.returncode, unknown.stdout) == (2, "")  # bad input: one line naming the flag and the fix
    assert unknown.stderr == f"error: --replica: job bg has no replica worker-7; use one of {', '.join(ALL)} or all\n"
    assert "Running" in run_launcher(local_env, "status", "bg", "--backend", "local", timeout=DEADLINE).stdout
    other_state = tmp_path / "other-state"
    other_state.mkdir()
    other = run_launcher(local_env, *submit_args("other", tmp_path, other_state, {"chief-0": ["wait-finish"]}),
                         "--detach", timeout=DEADLINE)  # a second job while bg runs: the cores are shared
    assert other.returncode == 0 and f"note: local job bg also runs here: the jobs share this machine's " \
        f"{os.cpu_count()} cores" in other.stderr, other.stderr
    assert run_launcher(local_env, "delete", "other", "--backend", "local", timeout=DEADLINE).returncode == 0

    (state / "finish").touch()
    watched = run_launcher(local_env, "status", "bg", "-w", "--backend", "local", timeout=DEADLINE)
    assert watched.returncode == 0, watched.stdout + watched.stderr
    listed = run_launcher(local_env, "list", "--backend", "local", timeout=DEADLINE).stdout
    assert any(line.split()[:3] == ["bg", "default", "Succeeded"] for line in listed.splitlines())
    run = LocalBackend(runs_dir=local_env["TFJOB_RUNS_DIR"]).runs.job("bg", "default")
    args = run.manifest()["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["--job-dir", str(run.output)]  # the default job dir sits next to the logs

    (run.output / "checkpoints").mkdir(parents=True, exist_ok=True)
    (run.output / "checkpoints" / "ckpt-1.index").write_text("a checkpoint")  # what a trainer leaves
    deleted = run_launcher(local_env, "delete", "bg", "--backend", "local", timeout=DEADLINE)
    assert deleted.returncode == 0, deleted.stderr
    assert all(gone(pid) for pid in replica_pids(state).values())
    assert deleted.stdout == "tfjob bg deleted\n"  # what was deleted, as kubectl's; the hint is a note on stderr
    assert deleted.stderr.splitlines()[-1] == (
        f"note: kept its outputs (checkpoints) in {run.output}; a new job named bg resumes from them. Remove them "
        "with `python -m launcher delete bg --purge`.")  # only what is there: no events, no export yet
    assert (run.output / "checkpoints" / "ckpt-1.index").read_text() == "a checkpoint"
    missing = run_launcher(local_env, "status", "bg", "--backend", "local", timeout=DEADLINE)
    assert missing.returncode == 1 and "bg" in missing.stderr
    assert "bg" not in run_launcher(local_env, "list", "--backend", "local", timeout=DEADLINE).stdout

    # a new job of that name resumes from them, and says so before it starts
    again = run_launcher(local_env, *submit_args("bg", tmp_path, state, {"chief-0": ["wait-finish"]}), "--detach",
                         timeout=DEADLINE)
    assert again.returncode == 0, again.stderr
    assert (f"note: the job dir {run.output} already holds checkpoints (the latest at step 1): the job resumes from "
            "it; to start over, use another --job-dir, or remove them first with `python -m launcher delete bg "
            "--purge`\n") in again.stderr
    refused = run_launcher(local_env, *submit_args("bg", tmp_path, state, {"chief-0": ["wait-finish"]}), "--detach",
                           timeout=DEADLINE)  # that name is taken: refused, and no note says it resumes
    assert refused.returncode != 0 and "already holds checkpoints" not in refused.stderr, refused.stderr
    assert refused.stderr.endswith("already exists (" + str(run.path) + "); use --replace or `delete bg`\n"), \
        refused.stderr
    assert run_launcher(local_env, "status", "bg", "-w", "--backend", "local", timeout=DEADLINE).returncode == 0
    assert run_launcher(local_env, "delete", "bg", "--backend", "local", timeout=DEADLINE).returncode == 0
    purged = run_launcher(local_env, "delete", "bg", "--backend", "local", "--purge", timeout=DEADLINE)
    assert (purged.returncode, purged.stdout) == (0, f"Removed the outputs kept of deleted tfjob bg ({run.output})\n"), \
        purged.stderr
    assert not run.path.exists()


STAMP = re.compile(r"\[([a-z]+-\d)\] (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z) (.*)")


def stamped(line: str) -> tuple[str, float, str]:
    """(replica, Unix time, text) of a line of `logs --timestamps`."""
    replica, when, text = STAMP.fullmatch(line).groups()
    return replica, datetime.strptime(when[:26] + "+0000", "%Y-%m-%dT%H:%M:%S.%f%z").timestamp(), text


def test_logs_timestamps_and_since_date_each_line_when_the_supervisor_saw_it(local_env, state, tmp_path):
    """kubectl's --timestamps and --since on the local backend: a line's time is when the
    supervisor's record (logs/REPLICA.times) first held it."""
    before = time.time()
    submitted = run_launcher(local_env, *submit_args("dated", tmp_path, state, {"chief-0": ["wait-finish"]}),
                             "--detach", timeout=DEADLINE)
    assert submitted.returncode == 0, submitted.stderr
    wait_ready(state, "ps-0", "worker-0", "worker-1")
    run = LocalBackend(runs_dir=local_env["TFJOB_RUNS_DIR"]).runs.job("dated", "default")
    log, times = run.log_path("chief-0"), run.times_path("chief-0")
    wait_for(lambda: b"tf_config" in log.read_bytes() and times.exists()
             and int(times.read_text().split()[-2]) == log.stat().st_size, "the chief's first lines recorded", DEADLINE)
    (state / "finish").touch()
    finish = (state / "finish").stat().st_mtime
    assert run_launcher(local_env, "status", "dated", "-w", "--backend", "local", timeout=DEADLINE).returncode == 0
    after = time.time()

    def logs(*flags: str) -> list[str]:
        done = run_launcher(local_env, "logs", "dated", "--backend", "local", *flags, timeout=DEADLINE)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    plain, dated = logs("--replica", "all"), [stamped(line) for line in logs("--replica", "all", "--timestamps")]
    assert [f"[{replica}] {text}" for replica, _, text in dated] == plain
    for rid in ALL:
        seen = [when for replica, when, _ in dated if replica == rid]
        assert seen == sorted(seen) and before <= seen[0] and seen[-1] <= after, (rid, before, seen, after)
    chief = [(when, text) for replica, when, text in dated if replica == "chief-0"]
    assert chief[0][1].startswith("hello from chief-0") and chief[-1][1] == "chief-0 done"
    assert chief[0][0] < finish <= chief[-1][0]  # each line its own time, not the log's last write

    # lines dated 2 hours back (the records of the chief's first lines moved back)
    done_at = len(log.read_bytes()) - len(b"chief-0 done\n")
    records = [record.split() for record in times.read_text().splitlines()]
    times.write_text("".join(f"{size} {float(when) - 7200 * (int(size) <= done_at)}\n" for size, when in records))
    assert logs("--since", "1h") == ["[chief-0] chief-0 done"]
    assert logs("--since", "3h") == [line for line in plain if line.startswith("[chief-0]")]
    assert logs("--since", "1h", "--timestamps", "-f") == [f"[chief-0] {rfc3339(chief[-1][0])} chief-0 done"]

    # a job whose supervisor kept no times (an earlier launcher): one line, exit 2
    status = json.loads(run.status_path.read_text())
    del status["log_times"]
    run.status_path.write_text(json.dumps(status))
    for flag in (["--since", "10m"], ["--timestamps"]):
        refused = run_launcher(local_env, "logs", "dated", "--backend", "local", *flag, timeout=DEADLINE)
        assert (refused.returncode, refused.stdout) == (2, "")
        assert refused.stderr == (f"error: {flag[0]}: job dated ran under an earlier launcher, which kept no line "
                                  "times; drop the flag\n")


def test_logs_tail_with_follow_shows_the_last_lines_then_follows(local_env, state, tmp_path):
    """kubectl's logs -f --tail N on the run folder's log: the last N lines written so far,
    then every new line until the job ends."""
    submitted = run_launcher(local_env, *submit_args("tail", tmp_path, state, {"chief-0": ["wait-finish"]}),
                             "--detach", timeout=DEADLINE)
    assert submitted.returncode == 0, submitted.stderr
    wait_ready(state, "ps-0", "worker-0", "worker-1")
    everything = run_launcher(local_env, "logs", "tail", "--backend", "local", timeout=DEADLINE).stdout.splitlines()
    assert everything[0].startswith("[chief-0] hello from chief-0") and everything[1].startswith("[chief-0] tf_config")
    assert run_launcher(local_env, "logs", "tail", "--backend", "local", "--tail", "1",
                        timeout=DEADLINE).stdout.splitlines() == everything[-1:]

    with launcher_process(local_env, "logs", "tail", "--backend", "local",
                          "--tail", "1", "-f") as follow:
        follow.wait_for_line("tf_config", timeout=DEADLINE)
        (state / "finish").touch()
        assert follow.wait(timeout=DEADLINE) == 0
    assert follow.lines == [everything[-1], "[chief-0] chief-0 done"]


def test_a_users_own_package_runs_with_module_name_and_package_path(local_env, tmp_path):
    """gcloud's --module-name/--package-path on the local backend: every replica runs
    `python -m my_trainer.task` from the package's parent, importing its own sibling module."""
    package = tmp_path / "project" / "my_trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "util.py").write_text(
        "import json, os\n\n\ndef role():\n"
        "    task = json.loads(os.environ.get('TF_CONFIG', '{}')).get('task', {'type': 'worker', 'index': 0})\n"
        "    return f\"{task['type']}-{task['index']}\"\n")
    (package / "task.py").write_text(
        "import os, sys\nfrom my_trainer.util import role\n"
        "job_dir = sys.argv[sys.argv.index('--job-dir') + 1]\nos.makedirs(job_dir, exist_ok=True)\n"
        "print(f'my_trainer as {role()} in {os.getcwd()} with {sys.argv[3:]}', flush=True)\n"
        "open(os.path.join(job_dir, role()), 'w').write('done')\n")
    out = tmp_path / "out"
    done = run_launcher(local_env, "submit", "--backend", "local", "--name", "own", "--chief", "1", "--workers", "1",
                        "--ps", "0", "--module-name", "my_trainer.task", "--package-path", str(package), "--job-dir",
                        str(out), "--", "--steps", "3", timeout=DEADLINE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"[chief-0] my_trainer as chief-0 in {package.parent} with ['--steps', '3']" in done.stdout.splitlines()
    assert (out / "chief-0").read_text() == "done"
