"""`launcher tensorboard NAME`: real TensorBoard (a subprocess) on the job dir of a local
job, serving its event files; stopped with SIGINT like Ctrl-C, nothing left running."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from launcher.backends.local import LocalBackend
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec
from tests.support.launcher_process import LAUNCHER
from tests.support.polling import wait_for
from tests.support.ports import free_port
from tests.support.tools import ROOT

REPLICA = ROOT / "tests" / "support" / "standin_replica.py"
DEADLINE = 180.0


def write_events(logdir: Path) -> None:
    """A TensorBoard event file with one scalar, written by TensorFlow in a subprocess."""
    code = ("import sys, tensorflow as tf\n"
            "w = tf.summary.create_file_writer(sys.argv[1])\n"
            "with w.as_default():\n    tf.summary.scalar('loss', 0.5, step=1)\nw.flush()\n")
    subprocess.run([sys.executable, "-c", code, str(logdir)], check=True, capture_output=True, timeout=DEADLINE)


@pytest.mark.slow
def test_tensorboard_serves_the_job_dir_of_a_job(tmp_path):
    runs = tmp_path / "runs"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TFJOB_RUNS_DIR": str(runs),
           "PYTHONPATH": str(ROOT), "KUBECONFIG": str(tmp_path / "none"), "NO_PROXY": "127.0.0.1"}
    state = tmp_path / "state"
    state.mkdir()
    backend = LocalBackend(runs_dir=str(runs))
    job_dir = tmp_path / "job"
    spec = JobSpec(name="board", replicas={"Worker": ReplicaSpec(1)}, job_dir=str(job_dir),
                   env={"STATE_DIR": str(state)}, command=("python", str(REPLICA)),
                   trainer_args=(json.dumps({"*": ["exit0"]}),))
    backend.submit(render(spec))
    write_events(job_dir / "train")
    port = free_port()
    proc = subprocess.Popen([*LAUNCHER, "tensorboard", "board", "--backend", "local",
                             "--port", str(port)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()  # blocks until the launcher prints the URL (or exits)
        assert first.startswith(f"TensorBoard for board ({job_dir}): http://127.0.0.1:{port}"), \
            first + proc.stderr.read() if proc.poll() is not None else first
        def runs_seen() -> list:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=10) as answer:
                return json.loads(answer.read())

        # TensorBoard loads event files in the background: poll, bounded
        wait_for(lambda: "train" in runs_seen(), "TensorBoard to list the train run", timeout=DEADLINE)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        backend.stop("board", "default")
    with pytest.raises(OSError):  # TensorBoard went with the launcher
        urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=5)


def test_a_job_without_job_dir_is_one_line(tmp_path, monkeypatch):
    from launcher.cli import main

    monkeypatch.setenv("TFJOB_RUNS_DIR", str(tmp_path / "runs"))
    backend = LocalBackend()
    state = tmp_path / "state"
    state.mkdir()
    spec = JobSpec(name="nodir", replicas={"Worker": ReplicaSpec(1)}, env={"STATE_DIR": str(state)},
                   command=("python", str(REPLICA)), trainer_args=(json.dumps({"*": ["exit0"]}),))
    backend.submit(render(spec))
    try:
        assert main(["tensorboard", "nodir", "--backend", "local"]) == 2
    finally:
        backend.stop("nodir", "default")
