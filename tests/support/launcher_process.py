"""Run `python -m launcher` as a real subprocess, from the checkout, with no stdin.

`run_launcher` waits for it to finish (bounded); `launcher_process` keeps it running while
the test acts on the cluster or the job, collects its output lines (stdout and stderr
merged) in a thread, and always reaps it. Both take where to run first: a control plane or
node cluster (its `env()`: kubeconfig and PATH) or an environment dict (e.g. `local_env`).
`LAUNCHER` is the command itself, for the few tests that need their own pipes.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from typing import Iterator, Mapping, Union

from tests.support.controlplane import ControlPlane  # or a NodeCluster: anything with env()
from tests.support.polling import wait_for
from tests.support.tools import ROOT

LAUNCHER = (sys.executable, "-m", "launcher")
RUN_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0


Target = Union[ControlPlane, Mapping[str, str]]


def _environment(target: Target) -> dict[str, str]:
    return dict(target) if isinstance(target, Mapping) else target.env()


def run_launcher(target: Target, *args: str, env: dict[str, str] | None = None,
                 timeout: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    """`python -m launcher ARGS` to its end; `env` adds to the target's environment."""
    return subprocess.run([*LAUNCHER, *args], cwd=ROOT, env={**_environment(target), **(env or {})},
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout, check=False)


class LauncherProcess:
    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_line(self, needle: str, timeout: float) -> str:
        """The first output line containing `needle` (fails if the process ends without it)."""
        def found() -> str | None:
            return next((line for line in self.lines if needle in line), None)

        def alive() -> None:
            if self.proc.poll() is not None and not found():
                self._reader.join(timeout=5)
                if not found():
                    raise AssertionError(f"launcher exited ({self.proc.returncode}) without printing "
                                         f"{needle!r}; output:\n{self.output}")

        return wait_for(found, lambda: f"no output line with {needle!r} after {timeout:.0f}s; "
                    f"output:\n{self.output}", timeout, check=alive)

    def wait(self, timeout: float) -> int:
        """The exit code; fails the test if the launcher is still running after `timeout`."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"launcher still running after {timeout:.0f}s; output:\n{self.output}") from None
        self._reader.join(timeout=5)
        return code


@contextlib.contextmanager
def launcher_process(target: Target, *args: str) -> Iterator[LauncherProcess]:
    """The launcher in a session of its own; at the end it and whatever it started (TensorBoard,
    a model server) are stopped: SIGTERM to the process group, SIGKILL after STOP_TIMEOUT_S."""
    proc = subprocess.Popen([*LAUNCHER, *args], cwd=ROOT, env=_environment(target), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        yield LauncherProcess(proc)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_TIMEOUT_S)
        with contextlib.suppress(ProcessLookupError):  # the launcher if it did not stop, and any child left
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_TIMEOUT_S)
        proc.stdout.close()
