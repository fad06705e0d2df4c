"""The launcher's view in bench/launcher_scale.py: a thread consuming
`KubernetesBackend.events()` exactly as `launcher submit` does, noting when each event
arrived (time.time(), the apiserver's clock on this machine); and the same for a
`kubectl get pods -w` as a control."""
from __future__ import annotations

import subprocess
import threading
import time

import _common  # noqa: F401  (puts the repository on sys.path)
from scale_audit import JOB, Key

from launcher.backends.k8s import KubernetesBackend
from launcher.events import JobCondition, ReplicaPhase
from tests.support.controlplane import ControlPlane
from tests.support.tools import kubectl


class LauncherView(threading.Thread):
    def __init__(self, backend: KubernetesBackend, name: str, namespace: str, replicas: int):
        super().__init__(name=f"view-{name}", daemon=True)  # daemon: a hung watch cannot block exit
        self.backend, self.job, self.namespace, self.replicas = backend, name, namespace, replicas
        self.seen: dict[Key, float] = {}  # first arrival of each (job, replica, phase/condition)
        self.phases: dict[str, str] = {}  # replica id -> latest phase
        self.running = 0  # replicas whose latest phase is Running
        self.events = 0
        self.all_running = threading.Event()
        self.all_running_at = 0.0
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for event in self.backend.events(self.job, self.namespace):
                self._note(event, time.time())
        except BaseException as exc:  # reported by the main thread
            self.error = exc
        finally:
            self.done.set()

    def _note(self, event: object, now: float) -> None:
        self.events += 1
        if isinstance(event, JobCondition) and event.status == "True":
            self.seen.setdefault((self.job, JOB, event.type), now)
        if not isinstance(event, ReplicaPhase):
            return
        self.seen.setdefault((self.job, event.replica, event.phase), now)
        before, self.phases[event.replica] = self.phases.get(event.replica), event.phase
        self.running += (event.phase == "Running") - (before == "Running")
        if not self.all_running.is_set() and self.running == self.replicas:
            self.all_running_at = now
            self.all_running.set()


class KubectlView:
    """A control: `kubectl get pods -w` (Go, its own process) on the same pods, each line
    stamped when it arrives. If it trails the server as much as the launcher does, the lag
    is the server's or the machine's, not the launcher's. Its default output, as the
    launcher, takes pods as the server's Table rows (with their metadata: a few KB per
    change whatever the job's size), so it follows a 5,101-replica job too; the printer's
    STATUS says the phase (Pending, Running, Completed). Context manager; always reaped."""

    PHASES = {"Pending": "Pending", "ContainerCreating": "Pending", "Running": "Running", "Completed": "Succeeded",
              "Error": "Failed"}

    def __init__(self, cp: ControlPlane, namespace: str, jobs: tuple[str, ...]):
        self.cp, self.namespace, self.jobs = cp, namespace, jobs
        self.seen: dict[Key, float] = {}
        self._proc: subprocess.Popen | None = None
        self._reader = threading.Thread(target=self._read, name="kubectl-view", daemon=True)

    def __enter__(self) -> "KubectlView":
        self._proc = subprocess.Popen(
            [kubectl(), "get", "pods", "-n", self.namespace, "-w", "--no-headers"],
            env=self.cp.env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
        self._reader.start()
        return self

    def __exit__(self, *exc) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)
        self._reader.join(timeout=10)
        self._proc.stdout.close()

    def _read(self) -> None:
        for line in self._proc.stdout:
            now = time.time()
            fields = line.split()  # NAME READY STATUS RESTARTS AGE, one line per watch event (a deletion
            if len(fields) < 3:  # too: ignored, as only the first line of each phase counts)
                continue
            job = next((j for j in self.jobs if fields[0].startswith(f"{j}-")), None)
            phase = self.PHASES.get(fields[2])
            if job is not None and phase is not None:
                self.seen.setdefault((job, fields[0][len(job) + 1:], phase), now)
