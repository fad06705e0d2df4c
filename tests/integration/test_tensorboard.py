"""`launcher tensorboard NAME`: real TensorBoard (a subprocess) on the job dir of a local
job, a local folder or gs:// (the GCS emulator through TensorFlow's own gs:// filesystem),
serving its event files; stopped with SIGINT like Ctrl-C, nothing left running. (A k8s
job's job dir, read from its TFJob: tests/e2e/test_tensorboard_k8s.py.)"""
from __future__ import annotations

import signal
import subprocess

import pytest

from tests.support.launcher_process import launcher_process
from tests.support.local_jobs import standin_job
from tests.support.ports import free_port
from tests.support.tensorboard import serves_the_train_run, write_events
from tests.support.tools import ROOT


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])  # SIGTERM left TensorBoard running, orphaned
def test_tensorboard_serves_the_job_dir_of_a_job(tmp_path, state, stop):
    runs = tmp_path / "runs"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TFJOB_RUNS_DIR": str(runs),
           "PYTHONPATH": str(ROOT), "KUBECONFIG": str(tmp_path / "none"), "NO_PROXY": "127.0.0.1"}
    job_dir = tmp_path / "job"
    with standin_job("board", state, str(job_dir), str(runs)):
        write_events(job_dir / "train")
        serves_the_train_run(env, "board", str(job_dir), "--backend", "local", stop=stop)


@pytest.mark.slow
def test_tensorboard_serves_a_job_dir_on_gcs(gcs, tmp_path, state):
    """--job-dir gs://...: TensorBoard reads the events through TensorFlow's own gs://
    filesystem (the emulator behind the TLS proxy), as on GKE with a bucket."""
    runs = tmp_path / "runs"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TFJOB_RUNS_DIR": str(runs), "PYTHONPATH": str(ROOT),
           "KUBECONFIG": str(tmp_path / "none"), **gcs.env}
    job_dir = gcs.make_bucket("tensorboard-test") + "/jobs/board"
    write_events(f"{job_dir}/train", gcs.env)
    assert any(name.startswith("jobs/board/train/events.out.tfevents.") for name in gcs.list(job_dir))
    with standin_job("board-gcs", state, job_dir, str(runs)):
        serves_the_train_run(env, "board-gcs", job_dir, "--backend", "local")


@pytest.mark.slow
@pytest.mark.parametrize("made", [False, True])
def test_a_job_dir_without_events_is_said_beside_the_url(tmp_path, state, made):
    """A job dir that is not there (a k8s job's pod-local --job-dir, a typo, a job not started)
    or holds no events yet: TensorBoard serves an empty board; the launcher said nothing, so
    the board looked like a broken TensorBoard. Now one note after the URL says which."""
    runs = tmp_path / "runs"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TFJOB_RUNS_DIR": str(runs),
           "PYTHONPATH": str(ROOT), "KUBECONFIG": str(tmp_path / "none"), "NO_PROXY": "127.0.0.1"}
    job_dir = tmp_path / "job"
    if made:
        (job_dir / "checkpoints").mkdir(parents=True)
    with standin_job("empty", state, str(job_dir), str(runs)), \
            launcher_process(env, "tensorboard", "empty", "--backend", "local", "--port", str(free_port())) as board:
        board.wait_for_line(f"TensorBoard for empty ({job_dir}): http://", 180)
        board.wait_for_line("note: ", 30)  # printed right after the URL
        notes = [line for line in board.lines if line.startswith("note: ")]
        board.proc.send_signal(signal.SIGINT)
        assert board.wait(30) == 130, board.output
    expected = (f"note: no TensorBoard events in {job_dir} yet; the board shows them as the job writes them"
                if made else f"note: {job_dir} does not exist on this machine; the board shows the job's events "
                "once it writes them there")
    assert notes == [expected], board.output


def test_a_job_without_job_dir_is_one_line(tmp_path, state, monkeypatch):
    from launcher.cli import main

    monkeypatch.setenv("TFJOB_RUNS_DIR", str(tmp_path / "runs"))
    with standin_job("nodir", state, None):
        assert main(["tensorboard", "nodir", "--backend", "local"]) == 2


def test_a_port_in_use_is_one_line_before_tensorboard_starts(tmp_path, state, monkeypatch, capsys):
    """It started TensorBoard, which failed seconds later with exit 1 and its own log line
    (twice over, with a glog prefix) and no fix named."""
    import socket

    from launcher.cli import main

    monkeypatch.setenv("TFJOB_RUNS_DIR", str(tmp_path / "runs"))
    with standin_job("taken", state, str(tmp_path / "job")), socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        code = main(["tensorboard", "taken", "--backend", "local", "--port", str(port)])
    captured = capsys.readouterr()
    assert (code, captured.out) == (2, ""), captured
    assert captured.err == (f"error: --port: 127.0.0.1:{port} is in use; stop what listens there or pick another "
                            "--port\n")


def test_a_gs_job_dir_without_tensorflow_is_one_line(tmp_path, state, monkeypatch, capsys):
    """TensorBoard installed without TensorFlow (not the [local] extra) has no gs://
    filesystem: its loader thread died on the job dir and it served an empty board, the
    launcher printing its URL as if all was well."""
    import importlib.util

    from launcher.cli import main

    monkeypatch.setenv("TFJOB_RUNS_DIR", str(tmp_path / "runs"))
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "tensorflow" else find_spec(name, *rest))
    def started(*args, **kwargs):
        raise AssertionError(f"started {args[0]}")  # TensorBoard, which would serve its empty board until stopped

    with standin_job("gsjob", state, "gs://my-bucket/jobs/gsjob"), monkeypatch.context() as patch:
        patch.setattr(subprocess, "Popen", started)
        code = main(["tensorboard", "gsjob", "--backend", "local", "--port", str(free_port())])
    captured = capsys.readouterr()
    assert (code, captured.out) == (2, ""), captured
    assert captured.err == ("error: tensorboard: reading gs://my-bucket/jobs/gsjob needs TensorFlow's gs:// "
                            "filesystem, which TensorBoard alone lacks; pip install 'tfjob-launcher[local]'\n")


def test_waiting_for_tensorboard_to_serve_is_bounded(tmp_path, state, monkeypatch, capsys):
    """A TensorBoard that does not say where it serves in time is stopped with one line;
    here the real one, given 0.05 s (it takes seconds to start)."""
    from launcher.cli import jobs, main

    monkeypatch.setenv("TFJOB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setattr(jobs, "TENSORBOARD_START_S", 0.05)
    before = set(tensorboards())
    with standin_job("slow", state, str(tmp_path / "job")):
        assert main(["tensorboard", "slow", "--backend", "local", "--port", str(free_port())]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "TensorBoard did not say where it serves" in err[0] and "within 0 s" in err[0], err
    assert set(tensorboards()) <= before  # it was stopped


def tensorboards() -> list[int]:
    """PIDs of running `python -m tensorboard.main` processes."""
    found = subprocess.run(["pgrep", "-f", "tensorboard.main"], capture_output=True, text=True, check=False)
    return [int(pid) for pid in found.stdout.split()]
