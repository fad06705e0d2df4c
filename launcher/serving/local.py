"""Local model servers: `python -m trainer.serve` processes on this machine.

One folder per model in the runs directory (`_models` is not a valid namespace, so it
never collides with jobs):

    $TFJOB_RUNS_DIR/_models/NAME/
      server.json   pid and start time of the server, URL, model dir, version, created
      server.log    the server's stdout and stderr

Private to the user, as the jobs' folders (runs.py): directories 0700 (tightened when a
model is served, should an older launcher have made them 0755), files 0600.

`serve` starts the server in its own session (it outlives the launcher, as gcloud's
`versions create` leaves a version running), waits until `GET /v1/models/NAME` answers
ready, and returns its record. With `foreground=True` the server dies with the launcher
(PR_SET_PDEATHSIG) and `wait_foreground` stops it on Ctrl-C. `delete` stops it (SIGTERM,
then SIGKILL after a grace period) and removes the folder.
"""
from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..backends.base import AlreadyExists, BackendError, NotFound
from ..backends.local.plan import REPO_ROOT
from ..backends.local.procs import alive, die_with_parent, start_time, terminate_groups, uninterrupted
from ..backends.local.runs import RunsDir, now, open_private, private_dir, write_json_atomic
from ..spec import SpecError
from . import client

SERVER_MODULE = "trainer.serve"
MODELS_FOLDER = "_models"
POLL_SECONDS = 0.2
STOP_GRACE = 15.0


@dataclass(frozen=True)
class LocalModel:
    name: str
    url: str            # http://HOST:PORT (the REST base)
    model_dir: str
    pid: int
    start: int | None
    created: str
    log: Path
    host: str = "127.0.0.1"
    port: int | None = None

    @property
    def running(self) -> bool:
        return alive(self.pid, self.start)

    @property
    def predict_url(self) -> str:
        return f"{self.url}/v1/models/{self.name}:predict"

    @property
    def infer_url(self) -> str:
        """The Open Inference Protocol's (KServe v2) path of the same server."""
        return f"{self.url}/v2/models/{self.name}/infer"


def _base_url(host: str, port: int) -> str:
    """The URL to reach a server listening on host:port from this machine."""
    connect = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://[{connect}]:{port}" if ":" in connect else f"http://{connect}:{port}"


def check_port(host: str, port: int) -> int:
    """The port to serve at: `port`, or with 0 one the system picks as free now; SpecError
    (exit 2) when `host:port` cannot be listened on: taken, or not an address here."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise SpecError("--port", f"{host}:{port} is in use; stop what listens there or pick "
                                "another --port") from None
            raise SpecError("--host", f"cannot listen on {host}:{port} ({error.strerror}); use 127.0.0.1 "
                            "or 0.0.0.0") from None
        return sock.getsockname()[1]


def _server_error(log: Path) -> str | None:
    """The server's own `error: FIELD: ...` line, if it printed one."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return None
    return next((line[len("error: "):] for line in reversed(lines) if line.startswith("error: ")), None)


def tail(log: Path, lines: int = 5) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])
    except FileNotFoundError:
        return "no output"


class LocalModels:
    def __init__(self, runs_dir: str | None = None):
        self.root = RunsDir(runs_dir).root / MODELS_FOLDER

    def folder(self, name: str) -> Path:
        return self.root / name

    def get(self, name: str) -> LocalModel | None:
        try:
            record = json.loads((self.folder(name) / "server.json").read_text())
        except (FileNotFoundError, ValueError):
            return None
        return LocalModel(name=record["name"], url=record["url"], model_dir=record["model_dir"],
                          pid=record["pid"], start=record.get("start"), created=record.get("created", ""),
                          log=self.folder(name) / "server.log", host=record.get("host", "127.0.0.1"),
                          port=record.get("port"))

    def list(self) -> list[LocalModel]:
        found = (self.get(path.name) for path in sorted(self.root.glob("*")) if path.is_dir())
        return [model for model in found if model is not None]

    def serve(self, name: str, model_dir: str, host: str, port: int, timeout: float,
              foreground: bool = False) -> tuple[LocalModel, subprocess.Popen]:
        """Start the model server and return once it is ready (bounded by `timeout`)."""
        current = self.get(name)
        if current is not None and current.running:
            raise AlreadyExists(f"model {name} is already served at {current.url}; "
                                f"`python -m launcher models delete {name}` first")
        port = check_port(host, port)
        folder = self.folder(name)
        if current is not None:
            self._remove(folder)
        for directory in (self.root.parent, self.root, folder):
            private_dir(directory)
        log = folder / "server.log"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([REPO_ROOT, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
        env.setdefault("PYTHONUNBUFFERED", "1")
        argv = [sys.executable, "-m", SERVER_MODULE, "--model-dir", model_dir, "--name", name,
                "--host", host, "--port", str(port)]
        with open_private(log) as out:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       env=env, cwd=REPO_ROOT, start_new_session=True,
                                       preexec_fn=die_with_parent() if foreground else None)
        model = LocalModel(name=name, url=_base_url(host, port), model_dir=model_dir, pid=process.pid,
                           start=start_time(process.pid), created=now(), log=log, host=host, port=port)
        write_json_atomic(folder / "server.json", {
            "name": name, "url": model.url, "model_dir": model_dir, "pid": model.pid, "start": model.start,
            "created": model.created, "host": host, "port": port, "argv": argv})
        try:
            self._wait_ready(model, process, timeout)
        except BaseException:
            with uninterrupted():
                self._stop(model, process)
                self._remove(folder)
            raise
        return model, process

    def _wait_ready(self, model: LocalModel, process: subprocess.Popen, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not client.ready(client.HttpServer(model.url), model.name, timeout=2.0):
            code = process.poll()
            if code is not None:
                error = _server_error(model.log)
                if code == 2 and error and ": " in error:
                    field, detail = error.split(": ", 1)
                    raise SpecError(field, detail)
                raise BackendError(f"the model server exited with code {code} before it was ready: "
                                   f"{error or tail(model.log)}")
            if time.monotonic() > deadline:
                raise BackendError(f"the model server was not ready after {timeout:g} s "
                                   f"(raise --timeout); its log: {tail(model.log)}")
            time.sleep(POLL_SECONDS)

    def _stop(self, model: LocalModel, process: subprocess.Popen | None = None) -> None:
        terminate_groups([(model.pid, model.start)], STOP_GRACE)
        if process is not None:
            try:
                process.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)

    def _remove(self, folder: Path) -> None:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)

    def delete(self, name: str, process: subprocess.Popen | None = None) -> None:
        """Stop the server of `name` (every process of its group) and forget it."""
        model = self.get(name)
        if model is None:
            raise NotFound(f"no local model {name}; see `python -m launcher models list --backend local`")
        self._stop(model, process)
        self._remove(self.folder(name))
