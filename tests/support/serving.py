"""For the serving tests: a real MNIST export made by `launcher submit --backend local`
(once per session), launcher subprocesses in their own runs dir, and HTTP helpers.

    mnist_job       session fixture: TrainedJob(name, export, env) of a short real training job
    TrainedJob      an export and the launcher environment that serves it (any model's)
    launcher_env()  that environment, with its own runs dir
    mnist_request() `trainer.make_request` lines of real MNIST test images and their labels
    parse_table()   `launcher predict`'s MNIST table: keys, classes, probabilities
    post(...)       a raw HTTP POST (what curl sends), returning (status, parsed JSON)
    post_raw(...)   the same with any headers, returning (status, headers, bytes)
    served_model()  context manager: `launcher serve` of a job's export, stopped afterwards
"""
from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from launcher.backends.local.procs import alive
from tests.support.cli_env import CRD
from tests.support.launcher_process import run_launcher
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "mnist"
TRAIN_STEPS = 400          # single process, full MNIST: > 97 % test accuracy
TRAIN_TIMEOUT = 1200.0
COMMAND_TIMEOUT = 400.0    # a launcher command (serve waits for TensorFlow to load)


@dataclass(frozen=True)
class TrainedJob:
    name: str               # the job's name (for `serve --from-job`)
    export: Path            # JOB_DIR/export (numeric version dirs)
    env: dict[str, str]     # launcher environment: its runs dir holds the served models (and the job, if the launcher ran it)


def launcher_env(runs: Path) -> dict[str, str]:
    env = dict(os.environ, TFJOB_RUNS_DIR=str(runs), TFJOB_CRD=str(CRD), PYTHONPATH=str(ROOT),
               PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
    no_proxy = [h for h in env.get("no_proxy", "").split(",") if h]
    env["no_proxy"] = ",".join(dict.fromkeys([*no_proxy, "127.0.0.1", "localhost"]))
    return env


@pytest.fixture(scope="session")
def mnist_job(tmp_path_factory) -> TrainedJob:
    """One chief trained TRAIN_STEPS steps on real MNIST through the launcher's local backend."""
    assert list(DATA.glob("test-*.tfrecord")), f"real MNIST must be in {DATA} (scripts/setup writes it)"
    env = launcher_env(tmp_path_factory.mktemp("serving") / "runs")
    name = "mnist-serve"
    done = run_launcher(env, "submit", "--backend", "local", "--name", name, "--workers", "0", "--ps", "0", "--chief",
                        "1", "--", "--data-dir", str(DATA), "--train-steps", str(TRAIN_STEPS), "--eval-every-steps",
                        "0", "--checkpoint-every-steps", "0", timeout=TRAIN_TIMEOUT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    export = Path(env["TFJOB_RUNS_DIR"]) / "default" / name / "output" / "export"
    assert [p for p in export.iterdir() if p.name.isdigit()], f"no export in {export}"
    return TrainedJob(name, export, env)


@dataclass(frozen=True)
class Request:
    path: Path
    rows: list[dict]
    labels: list[int]


def mnist_request(path: Path, count: int) -> Request:
    """`python -m trainer.make_request` of the first `count` real MNIST test images into
    `path` (one JSON instance per line, with keys), and their true labels."""
    done = subprocess.run([sys.executable, "-m", "trainer.make_request", "--data-dir", str(DATA), "--count",
                           str(count), "--out", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    labels = [int(x) for x in re.search(r"true labels: ([\d ]+)\)", done.stdout)[1].split()]
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == len(labels) == count
    return Request(path, rows, labels)


def parse_table(stdout: str):
    """(keys, classes, probabilities as a float64 array) of `launcher predict`'s table."""
    import numpy as np

    lines = stdout.strip().splitlines()
    assert lines[0].split() == ["KEY", "CLASSES", "PROBABILITIES"], lines[0]
    cells = [line.split(None, 2) for line in lines[1:]]
    return ([int(c[0]) for c in cells], [int(c[1]) for c in cells],
            np.asarray([json.loads(c[2]) for c in cells], np.float64))


def post(url: str, body: bytes, content_type: str | None = "application/json",
         timeout: float = 60.0) -> tuple[int, dict]:
    """POST `body` as is (curl -d sends application/x-www-form-urlencoded): (status, JSON answer)."""
    status, _, answer = post_raw(url, body, {"Content-Type": content_type} if content_type else {}, timeout)
    return status, json.loads(answer)


def post_raw(url: str, body: bytes, headers: dict[str, str], timeout: float = 60.0,
             context: ssl.SSLContext | None = None) -> tuple[int, dict, bytes]:
    """POST `body` with `headers` (https:// with `context`, e.g. an API server's CA and a
    client certificate): (status, answer headers with lower-case names, answer bytes)."""
    parts = url.split("/", 3)  # http: or https:, '', host:port, path
    connection = (http.client.HTTPSConnection(parts[2], context=context, timeout=timeout) if parts[0] == "https:"
                  else http.client.HTTPConnection(parts[2], timeout=timeout))
    try:
        connection.request("POST", "/" + parts[3], body=body, headers=headers)
        response = connection.getresponse()
        answer = response.read()
        return response.status, {name.lower(): value for name, value in response.getheaders()}, answer
    finally:
        connection.close()


def get(url: str, timeout: float = 30.0) -> tuple[int, dict]:
    parts = url.split("/", 3)
    connection = http.client.HTTPConnection(parts[2], timeout=timeout)
    try:
        connection.request("GET", "/" + parts[3])
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@contextlib.contextmanager
def served_model(job: TrainedJob, name: str) -> Iterator[str]:
    """`launcher serve NAME --model-dir EXPORT` of the job's export on a free port; yields the
    REST base (http://127.0.0.1:PORT). Afterwards the server is gone, also on failure."""
    port = free_port()
    record = Path(job.env["TFJOB_RUNS_DIR"]) / "_models" / name / "server.json"
    try:
        done = run_launcher(job.env, "serve", name, "--model-dir", str(job.export), "--port", str(port), "--backend",
                            "local", timeout=COMMAND_TIMEOUT)
        assert done.returncode == 0, done.stdout + done.stderr
        yield f"http://127.0.0.1:{port}"
    finally:
        pid = json.loads(record.read_text())["pid"] if record.exists() else None
        run_launcher(job.env, "models", "delete", name, "--backend", "local", timeout=COMMAND_TIMEOUT)
        if pid is not None and alive(pid):
            os.killpg(pid, signal.SIGKILL)
