"""Issue 22: servers the launcher starts on this machine listen on 127.0.0.1 unless the
user asks for another address. `launcher tensorboard NAME` runs real TensorBoard: `ss
-ltn` shows its port bound to 127.0.0.1 only, and from a network namespace the test makes
(a veth pair: "the LAN") the port is refused; with --host 0.0.0.0 the same probe connects,
so the probe can tell. (The replicas' TensorFlow servers: test_local_isolation.py.)"""
from __future__ import annotations

import json
import os
import signal
from contextlib import contextmanager
from pathlib import Path

import pytest

from launcher.backends.local import LocalBackend
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec
from tests.support import netns
from tests.support.launcher_process import launcher_process
from tests.support.local_jobs import REPLICA
from tests.support.ports import free_port
from tests.support.tools import ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable())),
              pytest.mark.skipif(__import__("importlib").util.find_spec("tensorboard") is None,
                                 reason="TensorBoard is not installed")]
BOARD_START_S = 180.0  # TensorBoard's start on a busy 2-core machine


@contextmanager
def tensorboard(tmp_path: Path, *flags: str):
    """`launcher tensorboard board` on a finished local job; yields its port once it serves."""
    runs, state, job_dir = tmp_path / "runs", tmp_path / "state", tmp_path / "job"
    state.mkdir(exist_ok=True)
    job_dir.mkdir(exist_ok=True)
    backend = LocalBackend(runs_dir=str(runs), note=lambda line: None)
    if not backend.runs.job("board", "default").exists():
        backend.submit(render(JobSpec(name="board", replicas={"Worker": ReplicaSpec(1)}, job_dir=str(job_dir),
                                      env={"STATE_DIR": str(state)}, command=("python", str(REPLICA)),
                                      trainer_args=(json.dumps({"*": ["exit0"]}),))))
    port = free_port()
    env = {**os.environ, "TFJOB_RUNS_DIR": str(runs), "PYTHONPATH": str(ROOT), "KUBECONFIG": str(tmp_path / "none")}
    try:
        with launcher_process(env, "tensorboard", "board", "--backend", "local", "--port", str(port), *flags) as board:
            board.wait_for_line("TensorBoard for board", BOARD_START_S)
            yield port
            board.proc.send_signal(signal.SIGINT)  # as a user stops it; the helper's teardown is the bound
            board.wait(30)
    finally:
        backend.stop("board", "default")


def test_tensorboard_listens_on_loopback_only_unless_asked(tmp_path):
    with netns.peer_namespace("board") as lan:
        with tensorboard(tmp_path) as port:
            bound = {address for address, p in netns.listening() if p == port}
            from_lan = lan.connect(lan.host_ip, port)
        with tensorboard(tmp_path, "--host", "0.0.0.0") as port_all:
            bound_all = {address for address, p in netns.listening() if p == port_all}
            from_lan_all = lan.connect(lan.host_ip, port_all)
    assert bound == {"127.0.0.1"} and from_lan == "ConnectionRefusedError", (bound, from_lan)
    assert bound_all & {"0.0.0.0", "*"} and from_lan_all == "open", (bound_all, from_lan_all)
