"""Helpers of the fault tests (tests/integration/test_faults_*.py).

- `LocalJob`: a foreground `python -m launcher submit --backend local` of real trainer
  replicas (1 chief, 1 ps, 2 workers unless told otherwise): replica logs, pids, restarts,
  SIGKILL of one replica, the launcher's exit code and output. The launcher process is
  always reaped; the `local_env` fixture stops whatever job is left.
- Trainer log parsing: where each run of the chief started, the steps it reached, the
  step it resumed from.
- `checkpoint_steps`: the global step stored inside each checkpoint (read by TensorFlow in
  a subprocess; the test process stays free of TensorFlow).
- `TcpRelay`: a TCP front for the FAKE API server that can go down and come back on the
  same address, as a restarted kube-apiserver looks to its clients.
"""
from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

from tests.support.local_jobs import run_dir, submit_cmd
from tests.support.polling import wait_for
from tests.support.tools import ROOT

JOB_TIMEOUT = 600.0  # one small training job on a busy 2-core machine, restarts included
_TRAIN = re.compile(r"^Train \[chief/0\] step (\d+) of \d+:", re.M)
_RESTORED = re.compile(r"^Restored (\S+) at step (\d+)$", re.M)
_LATEST = re.compile(r'^model_checkpoint_path: "(?:.*/)?ckpt-(\d+)"$', re.M)


# ---- a local job of real trainer processes ----------------------------------------------
class LocalJob:
    """`submit --backend local` in the foreground; use as a context manager."""

    def __init__(self, env: dict, name: str, *flags: str):
        self.env, self.name = env, name
        self.proc = subprocess.Popen(submit_cmd(name, *flags), cwd=ROOT, env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.run = run_dir(env, name)
        self.output: str | None = None  # once the launcher has exited

    def __enter__(self) -> "LocalJob":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # the supervisor then stops the job (its owner is gone)
        self.finish(60)

    def log(self, replica: str) -> str:
        path = self.run.log_path(replica)
        return path.read_text(errors="replace") if path.exists() else ""

    def replica(self, replica: str) -> dict:
        return next(r for r in self.run.status()["replicas"] if r["id"] == replica)

    def wait_log(self, replica: str, pattern: str, timeout: float = JOB_TIMEOUT) -> re.Match:
        """The first match of `pattern` (multiline regex) in the replica's log, once there."""
        return wait_for(lambda: self.running() and re.search(pattern, self.log(replica), re.M),
                        f"{pattern!r} in the log of {replica}", timeout)

    def running(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"the launcher exited ({self.proc.returncode}) early:\n{self.finish(10)[1][-3000:]}")
        return True

    def kill(self, replica: str) -> int:
        """SIGKILL the replica's process now; returns its pid."""
        pid = self.replica(replica)["pid"]
        assert pid, f"{replica} is not running: {self.replica(replica)}"
        os.kill(pid, signal.SIGKILL)
        return pid

    def finish(self, timeout: float = JOB_TIMEOUT) -> tuple[int, str]:
        """The launcher's exit code and output, once it has followed the job to its end."""
        if self.output is None:
            self.output, _ = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, self.output


def latest_checkpoint(job_dir: Path) -> int | None:
    """The step of the checkpoint the job dir's `checkpoint` state file names (None: none)."""
    state = job_dir / "checkpoints" / "checkpoint"
    match = _LATEST.search(state.read_text()) if state.exists() else None
    return int(match[1]) if match else None


# ---- the chief's log ------------------------------------------------------------------------
def runs(log: str, task: str = "chief/0") -> list[str]:
    """The log split into one part per start of `task` (a restart appends to the same file)."""
    starts = [m.start() for m in re.finditer(rf"^Starting {re.escape(task)} ", log, re.M)]
    return [log[a:b] for a, b in zip(starts, starts[1:] + [len(log)])]


def train_steps(part: str) -> list[int]:
    return [int(step) for step in _TRAIN.findall(part)]


def restored(part: str) -> tuple[str, int] | None:
    """(checkpoint path, step) of the `Restored ... at step N` line, if any."""
    match = _RESTORED.search(part)
    return (match[1], int(match[2])) if match else None


# ---- checkpoints --------------------------------------------------------------------------
_READ_STEPS = """
import json, sys
import tensorflow as tf
state = tf.train.get_checkpoint_state(sys.argv[1])
paths = list(state.all_model_checkpoint_paths) if state else []
print(json.dumps({p: int(tf.train.load_variable(p, "step/.ATTRIBUTES/VARIABLE_VALUE")) for p in paths}))
"""


def checkpoint_steps(job_dir: Path) -> dict[int, int]:
    """{number in the checkpoint's name: global step stored in it} for the kept checkpoints."""
    done = subprocess.run([sys.executable, "-c", _READ_STEPS, str(job_dir / "checkpoints")], cwd=ROOT,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return {int(path.rsplit("-", 1)[1]): step for path, step in json.loads(done.stdout).items()}


# ---- an API server that goes away and comes back ------------------------------------------
def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0), as a dying server's kernel does with unread data."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


class TcpRelay:
    """127.0.0.1:<port> relayed to 127.0.0.1:<target>. `down()` resets every relayed
    connection and then resets each new one at once (counted in `rejected`) until `up()`:
    to a client that is an API server restarting on the same address."""

    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.rejected = 0
        self._down = False
        self._closed = False
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, name="tcp-relay", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "TcpRelay":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._closed = True
        self.down()
        self.listener.close()
        self._thread.join(timeout=10)

    def down(self) -> None:
        with self._lock:
            self._down = True
            socks, self._open = list(self._open), set()
        for sock in socks:
            _reset(sock)

    def up(self) -> None:
        with self._lock:
            self._down = False

    def _accept(self) -> None:
        while not self._closed:
            if not select.select([self.listener], [], [], 0.1)[0]:
                continue
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                down = self._down
                if down:
                    self.rejected += 1
            if down:
                _reset(client)
                continue
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                _reset(client)
                continue
            server.settimeout(None)  # a watch stream may stay quiet for long
            with self._lock:
                self._open.update((client, server))
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass
