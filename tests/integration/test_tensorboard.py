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
from tests.support.launcher_process import launcher_process
from tests.support.local_jobs import REPLICA
from tests.support.polling import wait_for
from tests.support.ports import free_port
from tests.support.tools import ROOT

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
    try:
        with launcher_process(env, "tensorboard", "board", "--backend", "local", "--port", str(port)) as board:
            board.wait_for_line(f"TensorBoard for board ({job_dir}): http://127.0.0.1:{port}", DEADLINE)

            def runs_seen() -> list:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=10) as answer:
                    return json.loads(answer.read())

            # TensorBoard loads event files in the background: poll, bounded
            wait_for(lambda: "train" in runs_seen(), "TensorBoard to list the train run", DEADLINE)
            board.proc.send_signal(signal.SIGINT)
            assert board.wait(30) == 130, board.output
    finally:
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


def test_waiting_for_tensorboard_to_serve_is_bounded(tmp_path, monkeypatch, capsys):
    """A TensorBoard that does not say where it serves in time is stopped with one line;
    here the real one, given 0.05 s (it takes seconds to start)."""
    from launcher.cli import jobs, main

    monkeypatch.setenv("TFJOB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setattr(jobs, "TENSORBOARD_START_S", 0.05)
    backend = LocalBackend()
    state = tmp_path / "state"
    state.mkdir()
    spec = JobSpec(name="slow", replicas={"Worker": ReplicaSpec(1)}, job_dir=str(tmp_path / "job"),
                   env={"STATE_DIR": str(state)}, command=("python", str(REPLICA)),
                   trainer_args=(json.dumps({"*": ["exit0"]}),))
    backend.submit(render(spec))
    before = set(tensorboards())
    try:
        assert main(["tensorboard", "slow", "--backend", "local", "--port", str(free_port())]) == 1
    finally:
        backend.stop("slow", "default")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "TensorBoard did not say where it serves" in err[0] and "within 0 s" in err[0], err
    assert set(tensorboards()) <= before  # it was stopped


def tensorboards() -> list[int]:
    """PIDs of running `python -m tensorboard.main` processes."""
    found = subprocess.run(["pgrep", "-f", "tensorboard.main"], capture_output=True, text=True, check=False)
    return [int(pid) for pid in found.stdout.split()]
