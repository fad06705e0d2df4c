"""`python -m launcher ... --backend local` end to end with real processes: the replicas
run the stand-in program through a Cloud ML config's containerCommand (no TensorFlow)."""
from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from launcher.backends.local import LocalBackend
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
    assert "Running" in run_launcher(local_env, "status", "bg", "--backend", "local", timeout=DEADLINE).stdout

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
    assert deleted.stdout.splitlines() == [
        "tfjob bg deleted",
        f"Kept its outputs (checkpoints) in {run.output}; a new job named bg resumes from them. Remove them with "
        "`python -m launcher delete bg --purge`."]  # only what is there: no events, no export yet
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


@pytest.mark.parametrize("flag", [["--since", "10m"], ["--timestamps"]])
def test_kubectl_log_options_the_local_backend_cannot_honour_are_one_line(local_env, tmp_path, flag):
    done = run_launcher(local_env, "logs", "ghost", "--backend", "local", *flag, timeout=DEADLINE)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"error: {flag[0]}: the local backend keeps its logs without timestamps; drop the flag\n"


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
