"""`launcher tensorboard NAME` against a job dir: event files written by real TensorFlow,
then the launcher's real TensorBoard asked over HTTP for what it serves. Used by the local
(tests/integration/test_tensorboard.py) and the k8s (tests/e2e/test_tensorboard_k8s.py) tests."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Union

import pytest

from tests.support.launcher_process import Target, launcher_process
from tests.support.polling import wait_for
from tests.support.ports import free_port

DEADLINE = 180.0
_WRITE = ("import sys, tensorflow as tf\n"
          "w = tf.summary.create_file_writer(sys.argv[1])\n"
          "with w.as_default():\n    tf.summary.scalar('loss', 0.5, step=1)\nw.flush()\n")


def write_events(logdir: Union[Path, str], env: dict | None = None) -> None:
    """A TensorBoard event file with one scalar (loss 0.5 at step 1), written by TensorFlow in
    a subprocess (`env` added to ours: the GCS emulator's for a gs:// logdir)."""
    done = subprocess.run([sys.executable, "-c", _WRITE, str(logdir)], capture_output=True, text=True,
                          timeout=DEADLINE, env={**os.environ, **(env or {})}, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def serves_the_train_run(target: Target, name: str, job_dir: str, *flags: str, stop: int = signal.SIGINT) -> None:
    """`launcher tensorboard NAME FLAGS` prints its URL for `job_dir`, serves the train run of
    write_events with its scalar, and stops with the launcher on `stop`: SIGINT (Ctrl-C) or
    SIGTERM (kill), exit 128 + the signal."""
    port = free_port()
    with launcher_process(target, "tensorboard", name, *flags, "--port", str(port)) as board:
        board.wait_for_line(f"TensorBoard for {name} ({job_dir}): http://127.0.0.1:{port}", DEADLINE)

        def get(path: str):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
                return json.loads(answer.read())

        def loss():
            try:
                return get("/data/plugin/scalars/scalars?run=train&tag=loss")
            except urllib.error.HTTPError as error:
                if error.code == 404:  # the run is listed before its tags are loaded (a CI run met it so)
                    return None
                raise

        # TensorBoard loads event files in the background: poll, bounded
        wait_for(lambda: "train" in get("/data/runs"), lambda: f"TensorBoard to list the train run: {board.output}",
                 DEADLINE)
        scalars = wait_for(loss, lambda: f"TensorBoard to serve the loss scalar: {board.output}", DEADLINE)
        assert [(step, value) for _, step, value in scalars] == [(1, 0.5)], scalars
        board.proc.send_signal(stop)
        assert board.wait(30) == 128 + stop, board.output
    with pytest.raises(OSError):  # TensorBoard went with the launcher
        urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=5)
