"""launcher.api.TrainingClient on the local backend with real processes (the stand-in
replica program of tests/support, no TensorFlow): create, logs (also followed), wait (also
the Kubeflow SDK's wait_for_job_conditions), the typed events, status, list, delete, and the
README's example run as written. The same client on the real control plane:
tests/e2e/test_api_k8s.py."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from launcher.api import TrainingClient
from launcher.backends.base import AlreadyExists
from launcher.events import JobCondition, ReplicaPhase
from launcher.spec import JobSpec, ReplicaSpec, SpecError
from tests.support.k8s_backend import Collector
from tests.support.local_jobs import REPLICA
from tests.support.polling import wait_threads_end

WAIT_S = 60.0
THREADS_END_S = 10.0  # a stopped wait lets go of its event stream within about a second

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def client(tmp_path, monkeypatch):
    monkeypatch.setenv("TFJOB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("TFJOB_LOCAL_STOP_GRACE_SECONDS", "5")
    monkeypatch.delenv("TFJOB_CRD", raising=False)
    with TrainingClient(backend="local") as client:
        yield client
        for job in client.list_jobs(None):
            client.backend.stop(job.name, job.namespace)


def standin_spec(name: str, state: Path, actions: dict, **spec) -> JobSpec:
    return JobSpec(name=name, replicas={"Chief": ReplicaSpec(1), "PS": ReplicaSpec(1), "Worker": ReplicaSpec(1)},
                   env={"STATE_DIR": str(state)}, command=("python", str(REPLICA)),
                   trainer_args=(json.dumps(actions),), **spec)


def test_create_wait_logs_and_delete(client, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    tfjob = client.create_job(standin_spec("api-job", state, {"chief-0": ["wait-ready"]}))
    assert tfjob["metadata"]["name"] == "api-job"
    assert tfjob["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]["args"][:2] == [
        "--job-dir", str(tmp_path / "runs" / "default" / "api-job" / "output")]  # the backend's default job dir
    with pytest.raises(AlreadyExists):
        client.create_job(standin_spec("api-job", state, {}))
    status = client.wait_for_job("api-job", timeout=60)
    assert status.phase == "Succeeded"
    assert [job.name for job in client.list_jobs()] == ["api-job"]
    lines = list(client.get_job_logs("api-job", replica="chief-0"))
    assert len(lines) >= 2 and all(line.replica == "chief-0" for line in lines), lines
    assert list(client.get_job_logs("api-job", replica="chief-0", tail=1)) == lines[-1:]
    everyone = list(client.get_job_logs("api-job"))
    last_two = list(client.get_job_logs("api-job", tail=2))
    for rid in ("chief-0", "ps-0", "worker-0"):  # the last lines of each replica, not of all
        assert [x for x in last_two if x.replica == rid] == [x for x in everyone if x.replica == rid][-2:], rid
    assert list(client.get_job_logs("api-job", tail=0)) == []
    with pytest.raises(ValueError, match="tail: -1 is not a line count"):
        client.get_job_logs("api-job", tail=-1)
    client.delete_job("api-job")
    assert client.list_jobs() == []


def test_wait_for_job_conditions_follows_logs_and_events_to_the_end(client, tmp_path):
    """The Kubeflow SDK's calls: wait for Running, follow every replica's log while the job
    runs, wait for Succeeded; then the typed events of the whole run."""
    state = tmp_path / "state"
    state.mkdir()
    client.create_job(standin_spec("api-follow", state, {"chief-0": ["wait-finish"], "*": ["serve"]}))
    seen = []
    running = client.wait_for_job_conditions("api-follow", expected_conditions={"Running"}, wait_timeout=WAIT_S,
                                             callback=seen.append)
    assert running.phase == "Running" and seen[-1].phase == "Running", seen
    follow = Collector(client.get_job_logs("api-follow", follow=True))
    follow.wait_for(lambda lines: {line.replica for line in lines if line.line.startswith("hello from")} ==
                    {"chief-0", "ps-0", "worker-0"}, "every replica's first line", WAIT_S)
    assert not follow.done  # the job runs: following goes on
    (state / "finish").touch()  # the chief ends the job
    done = client.wait_for_job_conditions("api-follow", wait_timeout=WAIT_S)
    assert done.phase == "Succeeded"
    lines = follow.wait_done(WAIT_S)  # following ends with the job
    assert "chief-0 done" in [line.line for line in lines if line.replica == "chief-0"], lines
    events = list(client.events("api-follow"))
    conditions = [(e.type, e.status) for e in events if isinstance(e, JobCondition)]
    assert conditions[0] == ("Created", "True") and conditions[-1] == ("Succeeded", "True"), conditions
    assert ("Running", "True") in conditions and events[-1] == next(e for e in events if isinstance(e, JobCondition)
                                                                     and e.type == "Succeeded")
    phases = {e.replica: e.phase for e in events if isinstance(e, ReplicaPhase)}
    assert phases["chief-0"] == "Succeeded" and set(phases) == {"chief-0", "ps-0", "worker-0"}, phases


def test_wait_for_job_conditions_raises_for_a_failed_job_and_a_bad_condition(client, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    client.create_job(standin_spec("api-fail", state, {"chief-0": ["exit1"], "*": ["serve"]},
                                   restart_policy="ExitCode"))  # exit code 1: permanent
    with pytest.raises(RuntimeError, match="tfjob api-fail in default Failed .* before Succeeded"):
        client.wait_for_job_conditions("api-fail", wait_timeout=WAIT_S)
    assert client.wait_for_job_conditions("api-fail", expected_conditions={"Failed"}).phase == "Failed"
    with pytest.raises(ValueError, match="expected_conditions: \\['Done'\\]"):
        client.wait_for_job_conditions("api-fail", expected_conditions={"Done"})


def test_wait_times_out_while_the_job_runs(client, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    client.create_job(standin_spec("api-slow", state, {"*": ["serve"]}))
    before = set(threading.enumerate())
    with pytest.raises(TimeoutError, match="keeps running"):
        client.wait_for_job("api-slow", timeout=1)
    with pytest.raises(TimeoutError, match="keeps running"):
        client.wait_for_job_conditions("api-slow", wait_timeout=1)
    wait_threads_end(before, THREADS_END_S)  # the waits' event streams stopped, though the job runs on
    assert client.get_job("api-slow").phase not in ("Succeeded", "Failed")


def test_bad_input_submits_nothing(client):
    with pytest.raises(SpecError):
        client.create_job(JobSpec(name="x", replicas={"Worker": ReplicaSpec(10**12)}))
    with pytest.raises(SpecError, match=r"^trainer arguments \(after --\): argument --train-steps.*'many'"):
        client.create_job(JobSpec(name="y", replicas={"Worker": ReplicaSpec(1)}, trainer_args=("--train-steps", "many")))
    with pytest.raises(SpecError, match=r"^trainer arguments \(after --\): --data-dir '/nonexistent/data' does not exist"):
        client.create_job(JobSpec(name="z", replicas={"Worker": ReplicaSpec(1)},
                                  trainer_args=("--data-dir", "/nonexistent/data")))
    with pytest.raises(SpecError, match=r"^--workers: the local backend runs each of the job's 100,000 replicas as a "
                                        r"process on this machine, and they need at least 19,531\.2 GB of memory"):
        client.create_job(JobSpec(name="w", replicas={"Worker": ReplicaSpec(100_000)}))
    assert client.list_jobs(None) == []


def test_the_readme_example_runs_as_written(tmp_path):
    """The README's Python example, with the trainer swapped for the stand-in (no TensorFlow)."""
    readme = (REPO / "README.md").read_text()
    example = re.search(r"## Python API.*?```python\n(.*?)```", readme, re.S)[1]
    state = tmp_path / "state"
    state.mkdir()
    example = example.replace(
        'trainer_args=("--train-steps", "300"))',
        f'trainer_args=({json.dumps(json.dumps({"chief-0": ["wait-ready"]}))},), '
        f'env={{"STATE_DIR": {str(state)!r}}}, command=("python", {str(REPLICA)!r}))')
    assert "command=" in example, "the README example changed: update this test"
    done = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path),
                               "TFJOB_RUNS_DIR": str(tmp_path / "runs"), "KUBECONFIG": str(tmp_path / "none")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "Succeeded"


def test_render_works_without_a_reachable_cluster(tmp_path, monkeypatch):
    """As the CLI's `render`: the packaged CRD validates when the cluster cannot be asked."""
    config = tmp_path / "config"
    config.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: c, "
                      "user: u}}]\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                      "users: [{name: u, user: {token: t}}]\n")  # nothing listens on port 1: refused at once
    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.delenv("TFJOB_CRD", raising=False)
    client = TrainingClient(backend="k8s", request_timeout=5)
    tfjob = client.render(JobSpec(name="offline", replicas={"Worker": ReplicaSpec(2)}))
    assert (tfjob["kind"], tfjob["metadata"]["name"]) == ("TFJob", "offline")
