"""The OS processes of the e2e control plane, and bounded waits on them."""
from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tests.support.polling import WaitTimeout, wait_for

START_TIMEOUT_S = 90.0  # per readiness wait; the apiserver's first start is the slowest
STOP_TIMEOUT_S = 15.0


class ControlPlaneError(RuntimeError):
    """The control plane could not start; the message names the part and its log."""


@dataclass(frozen=True)
class Tuning:
    """Extra flags (after the usual ones: they win) and environment variables per process
    name, e.g. {"etcd": ("--snapshot-count=1000",)}, {"kube-apiserver": {"GOGC": "50"}}."""

    args: dict[str, tuple[str, ...]] = field(default_factory=dict)
    env: dict[str, dict[str, str]] = field(default_factory=dict)

    def __str__(self) -> str:
        parts = [f"{name} {' '.join(args)}" for name, args in self.args.items()]
        parts += [f"{' '.join(f'{k}={v}' for k, v in env.items())} {name}" for name, env in self.env.items()]
        return ", ".join(parts) or "defaults"


@dataclass
class Processes:
    """The control plane's OS processes, each logging to <workdir>/logs/<name>.log."""

    bin: Path
    logs: Path
    env: dict[str, str]
    running: dict[str, subprocess.Popen] = field(default_factory=dict)
    tuning: Tuning = field(default_factory=Tuning)

    def start(self, name: str, binary: str, *args: str, env: dict[str, str] | None = None,
              prefix: tuple[str, ...] = ()) -> None:
        """`prefix`: a command that execs the binary in the end (e.g. unshare ... sh -c)."""
        self.logs.mkdir(parents=True, exist_ok=True)
        args = (*args, *self.tuning.args.get(name, ()))
        env = {**self.env, **(env or {}), **self.tuning.env.get(name, {})}
        with open(self.logs / f"{name}.log", "ab") as log:
            self.running[name] = subprocess.Popen(
                [*prefix, str(self.bin / binary), *args], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, start_new_session=True)

    def log_tail(self, name: str, lines: int = 25) -> str:
        path = self.logs / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def check_alive(self) -> None:
        for name, proc in self.running.items():
            if proc.poll() is not None:
                raise ControlPlaneError(f"{name} exited with code {proc.returncode}; "
                                        f"its log ({self.logs / name}.log) ends:\n{self.log_tail(name)}")

    def stop_all(self) -> None:
        """Newest first (etcd last, so the apiserver can shut down cleanly): SIGTERM, and
        SIGKILL when a process is still there after STOP_TIMEOUT_S."""
        for proc in reversed(list(self.running.values())):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                if proc.poll() is not None:
                    break
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=STOP_TIMEOUT_S)
                    break
        self.running.clear()


def wait_until(what: str, ready: Callable[[], object], procs: Processes, log: str,
               timeout: float = START_TIMEOUT_S) -> None:
    """Poll `ready` until true; fail after `timeout` or as soon as a process exits."""
    try:
        wait_for(ready, f"{what} to be ready", timeout, check=procs.check_alive)
    except WaitTimeout as exc:
        raise ControlPlaneError(f"{exc}; the {log} log ({procs.logs / log}.log) ends:\n"
                                f"{procs.log_tail(log)}") from None


def http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def has_condition(obj: dict, condition: str) -> bool:
    return any(c.get("type") == condition and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def insecure_tls() -> ssl.SSLContext:
    """For /healthz of the scheduler and controller-manager (their own self-signed certs)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


