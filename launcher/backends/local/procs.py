"""OS process helpers of the local backend (Linux /proc; no psutil).

A process is named by (pid, start) where `start` is its start time in clock ticks from
/proc/PID/stat, so a recycled pid is never mistaken for a replica or a supervisor.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from typing import Iterator

PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded before any fork: the preexec must not allocate


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/PID/stat (state first), or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return data.rsplit(")", 1)[1].split()


def start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (None if gone)."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def alive(pid: int | None, start: int | None = None) -> bool:
    """True if `pid` runs (not a zombie) and, when `start` is given, is that same process."""
    if not pid:
        return False
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return start is None or int(fields[19]) == start


def exit_code(returncode: int) -> int:
    """A container-style exit code: killed by signal N gives 128 + N (SIGKILL -> 137)."""
    return 128 - returncode if returncode < 0 else returncode


def die_with_parent(sig: int = signal.SIGKILL):
    """A Popen preexec_fn: the child gets `sig` when its parent dies (PR_SET_PDEATHSIG)."""
    parent = os.getpid()

    def preexec() -> None:
        _LIBC.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), sig)

    return preexec


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Ctrl-C ignored while the block stops what was started (bounded: a grace, then SIGKILL):
    a second Ctrl-C there left processes running and a model or job listed."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def signal_group(pid: int, sig: int) -> None:
    """Send `sig` to the process group led by `pid` (each replica leads its own)."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def group_alive(pgid: int) -> bool:
    """True if any live process is still in process group `pgid`."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return any(_pgrp(pid) == pgid for pid in _pids())


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _pgrp(pid: int) -> int | None:
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[2])


def group_members(session: int, groups: set[int]) -> list[int]:
    """The live processes of session `session` in one of the process groups `groups`.

    A replica's own children (a shell's commands, a data loader's workers) are in its
    process group and the supervisor's session. They get no PR_SET_PDEATHSIG: a replica
    that exits, or is killed with its supervisor, leaves them running. While one of them
    lives, the kernel hands out neither its group's id nor its session's as a new pid, so a
    process in both is one of them, even after the leaders are gone."""
    members = []
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields and fields[0] not in ("Z", "X") and int(fields[3]) == session and int(fields[2]) in groups:
            members.append(pid)
    return members


def terminate_members(session: int, groups: set[int], grace: float) -> None:
    """SIGTERM the processes of `groups` in `session` (group_members), SIGKILL what is left
    of them after `grace`."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        members = group_members(session, groups)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        if wait_until(lambda: not group_members(session, groups), wait):
            return


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:
    """Poll `predicate` until true or `timeout` seconds passed; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def terminate_groups(pids: list[tuple[int, int | None]], grace: float) -> None:
    """SIGTERM each (pid, start) group leader's group, SIGKILL what is left after `grace`."""
    targets = [(pid, start) for pid, start in pids if pid and alive(pid, start)]
    for pid, _ in targets:
        signal_group(pid, signal.SIGTERM)
    if not wait_until(lambda: not any(group_alive(pid) for pid, _ in targets), grace):
        for pid, _ in targets:
            signal_group(pid, signal.SIGKILL)
        wait_until(lambda: not any(group_alive(pid) for pid, _ in targets), 5.0)
