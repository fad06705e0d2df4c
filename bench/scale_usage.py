"""What each job of bench/launcher_scale.py costs the control plane: a thread samples every
process of the control plane (etcd, kube-apiserver, scheduler, controller-manager,
training-operator, KWOK) once a second from /proc: resident memory (RSS; anonymous apart,
as etcd's RSS also counts the pages of its database file it has mapped, which the kernel
can drop), CPU seconds, etcd's database file on disk and the machine's MemAvailable.
`start_job()` opens a job's window, `line()` says its peaks and CPU seconds: what fits on a
machine, measured, not guessed."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from _common import cpu_seconds

from tests.support.controlplane import ControlPlane

PERIOD_S = 1.0
GB = 1e9


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon, RssFile of a process in KiB ({} once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return {}
    return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in text.splitlines())
            if k in ("VmRSS", "RssAnon", "RssFile")}


def meminfo_kb(key: str) -> int:
    """One line of /proc/meminfo (MemAvailable, MemTotal), KiB."""
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(f"{key}:"))


@dataclass
class Window:
    cpu_before: dict[str, float]
    rss: dict[str, int] = field(default_factory=dict)  # peak VmRSS, KiB
    anon: dict[str, int] = field(default_factory=dict)  # peak RssAnon, KiB
    db_bytes: int = 0  # etcd's database file, largest
    available: int = 0  # MemAvailable, smallest, KiB


class ControlPlaneUsage(threading.Thread):
    def __init__(self, cp: ControlPlane):
        super().__init__(name="controlplane-usage", daemon=True)
        self.pids = {name: proc.pid for name, proc in cp.procs.running.items()}
        self.db = cp.workdir / "etcd" / "member" / "snap" / "db"
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self.window = self._new_window()

    def _new_window(self) -> Window:
        return Window({name: cpu_seconds(pid) for name, pid in self.pids.items()}, available=meminfo_kb("MemAvailable"))

    def start_job(self) -> None:
        with self._lock:
            self.window = self._new_window()

    def run(self) -> None:
        while not self._stop_event.wait(PERIOD_S):
            self.sample()

    def sample(self) -> None:
        found = {name: memory_kb(pid) for name, pid in self.pids.items()}
        try:
            db = self.db.stat().st_size
        except FileNotFoundError:
            db = 0
        available = meminfo_kb("MemAvailable")
        with self._lock:
            w = self.window
            for name, kb in found.items():
                w.rss[name] = max(w.rss.get(name, 0), kb.get("VmRSS", 0))
                w.anon[name] = max(w.anon.get(name, 0), kb.get("RssAnon", 0))
            w.db_bytes, w.available = max(w.db_bytes, db), min(w.available, available)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)

    def line(self) -> str:
        """This job's window: peak RSS (anonymous) and CPU seconds per process, etcd's
        database file, the machine's smallest MemAvailable."""
        self.sample()
        with self._lock:
            w = self.window
            parts = [f"{name} {w.rss.get(name, 0) * 1024 / GB:.2f} GB ({w.anon.get(name, 0) * 1024 / GB:.2f} anon), "
                     f"{cpu_seconds(pid) - w.cpu_before.get(name, 0.0):.1f} CPU s"
                     for name, pid in sorted(self.pids.items(), key=lambda item: -self.window.rss.get(item[0], 0))]
            total = sum(w.rss.values()) * 1024 / GB
            return (f"control plane peak RSS and CPU: {'; '.join(parts)}; sum of peaks {total:.2f} GB; "
                    f"etcd database file {w.db_bytes / GB:.3f} GB; machine MemAvailable at least "
                    f"{w.available * 1024 / GB:.1f} GB of {meminfo_kb('MemTotal') * 1024 / GB:.1f}")
