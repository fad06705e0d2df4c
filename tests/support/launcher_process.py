"""Run `python -m launcher` as a real subprocess against a control plane.

`run_launcher` waits for it to finish; `launcher_process` keeps it running while the test
acts on the cluster, collects its output lines (stdout and stderr merged) in a thread,
and always reaps it.
"""
from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from typing import Iterator

from tests.support.controlplane import ControlPlane  # or a NodeCluster: anything with env()
from tests.support.controlplane.procs import poll
from tests.support.tools import ROOT

LAUNCHER = (sys.executable, "-m", "launcher")
RUN_TIMEOUT_S = 120.0


def run_launcher(cp: ControlPlane, *args: str, env: dict[str, str] | None = None,
                 timeout: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([*LAUNCHER, *args], cwd=ROOT, env={**cp.env(), **(env or {})}, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=timeout, check=False)


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

        return poll(found, timeout, lambda: f"no output line with {needle!r} after {timeout:.0f}s; "
                    f"output:\n{self.output}", alive)

    def wait(self, timeout: float) -> int:
        """The exit code; fails the test if the launcher is still running after `timeout`."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"launcher still running after {timeout:.0f}s; output:\n{self.output}") from None
        self._reader.join(timeout=5)
        return code


@contextlib.contextmanager
def launcher_process(cp: ControlPlane, *args: str) -> Iterator[LauncherProcess]:
    proc = subprocess.Popen([*LAUNCHER, *args], cwd=ROOT, env=cp.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    try:
        yield LauncherProcess(proc)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        proc.stdout.close()
