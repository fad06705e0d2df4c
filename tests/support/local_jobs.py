"""Local-backend jobs started the way users start them, through `python -m launcher`.

- `local_env` (fixture; registered in tests/conftest.py): the environment for launcher
  subprocesses: a runs dir of the test's own, quick restarts, the checkout on the path.
  Every job left in that runs dir is stopped at teardown, also after a failure.
- `REPLICA`: the stand-in replica program (tests/support/standin_replica.py), for jobs
  whose supervision is tested without TensorFlow.
- `submit_cmd`, `trainer_args`: a 1 chief + 1 ps + 2 worker submit of the real trainer on
  a small MNIST slice; `run_dir`: where the local backend keeps a job's state and logs.
- `state` (fixture), `replica_pids`, `wait_ready`: the stand-in replicas' state dir, the pids
  they wrote there, a bounded wait until they say they are ready.
- `gone`: whether a process has exited.
- `standin_job`: a local job of one stand-in worker that exits 0, submitted in-process and
  stopped afterwards, for commands that read a job (its job dir) rather than run one.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Iterator

import pytest

from launcher.backends.local import LocalBackend
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec
from tests.support.launcher_process import LAUNCHER
from tests.support.polling import wait_for
from tests.support.tools import ROOT

REPLICA = ROOT / "tests" / "support" / "standin_replica.py"
DEADLINE = 60.0  # seconds for one step of a stand-in job (start, stop, a restart)


@pytest.fixture
def local_env(tmp_path):
    runs = tmp_path / "runs"
    yield dict(os.environ, TFJOB_RUNS_DIR=str(runs), TFJOB_LOCAL_BACKOFF_SECONDS="0.2",
               TFJOB_LOCAL_STOP_GRACE_SECONDS="10", PYTHONPATH=str(ROOT))
    backend = LocalBackend(runs_dir=str(runs))
    for job in backend.list(None):
        backend.stop(job.name, job.namespace)


@pytest.fixture
def state(tmp_path) -> Path:
    """The stand-in replicas' shared state dir (their pid, ready and finish files)."""
    path = tmp_path / "state"
    path.mkdir()
    return path


def replica_pids(state: Path) -> dict[str, int]:
    """Each stand-in replica's pid, as it wrote it."""
    return {p.name[:-4]: int(p.read_text()) for p in state.glob("*.pid")}


def wait_ready(state: Path, *rids: str) -> None:
    """Until each of the stand-in replicas `rids` says it is ready."""
    wait_for(lambda: all((state / f"{rid}.ready").exists() for rid in rids), f"{rids} ready", DEADLINE)


def gone(pid: int) -> bool:
    """True if `pid` no longer runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def submit_cmd(name: str, *flags: str) -> list[str]:
    return [*LAUNCHER, "submit", "--backend", "local", "--name", name, "--workers", "2", "--ps", "1", *flags]


def trainer_args(mnist: str, steps: int) -> list[str]:
    """`-- TRAINER ARGS` of a short job: one thread, logs every 5 steps, checkpoints every 10."""
    return ["--", "--train-steps", str(steps), "--data-dir", mnist, "--threads", "1",
            "--log-every-steps", "5", "--steps-per-execution", "5", "--eval-every-steps", "0",
            "--checkpoint-every-steps", "10", "--poll-seconds", "1"]


def run_dir(env: dict, name: str):
    return LocalBackend(runs_dir=env["TFJOB_RUNS_DIR"]).runs.job(name, "default")


@contextlib.contextmanager
def standin_job(name: str, state: Path, job_dir: str | None, runs_dir: str | None = None) -> Iterator[LocalBackend]:
    """A local job `name` whose one worker is the stand-in replica, exiting 0 (`state`: its
    state dir), with `job_dir`; in `runs_dir` (None: $TFJOB_RUNS_DIR); stopped on the way out."""
    backend = LocalBackend(runs_dir=runs_dir)
    spec = JobSpec(name=name, replicas={"Worker": ReplicaSpec(1)}, job_dir=job_dir, env={"STATE_DIR": str(state)},
                   command=("python", str(REPLICA)), trainer_args=(json.dumps({"*": ["exit0"]}),))
    backend.submit(render(spec))
    try:
        yield backend
    finally:
        backend.stop(name, "default")
