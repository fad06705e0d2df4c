"""A private network namespace for a local job's replicas (issue 22).

TensorFlow's gRPC servers have no authentication and bind every interface. So the
supervisor runs the replicas of a job in a network namespace of their own that has only
a loopback interface: they reach each other on 127.0.0.1, and nothing outside the job
(another user on the LAN, another process in the host's network namespace) reaches them.

The namespace is made without privileges through a user namespace
(unshare(CLONE_NEWUSER | CLONE_NEWNET)) in a small holder process,
`python -m launcher.backends.local_netns`, which maps the user's own uid and gid onto
themselves, brings `lo` up, prints "ready" and then waits until the supervisor closes its
stdin (or dies). Each replica joins the holder's user and network namespaces before it
executes (setns in a preexec hook), so all replicas share one loopback.

A job whose arguments or env name a remote URL (gs://, s3://, http(s)://...) or ask the
trainer to download data (--prepare-data) needs the network and runs unisolated; so does
every job where the kernel refuses user namespaces. The supervisor records which in
status.json ("network") and the launcher prints one line saying so.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import select
import socket
import struct
import subprocess
import sys
import time

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
READY = "ready"
READY_TIMEOUT = 20.0
ISOLATED, HOST = "isolated", "host"
_LIBC = ctypes.CDLL(None, use_errno=True)
_REMOTE = re.compile(r"\b(?!file://)[a-z][a-z0-9+.-]*://", re.I)
_NETWORK_FLAGS = ("--prepare-data",)


# ---- which jobs can be isolated ----------------------------------------------------

def network_need(plan: dict) -> str | None:
    """Why the replicas of `plan` need the network (None if they need loopback only)."""
    for replica in plan["replicas"]:
        for value in [*replica["argv"], *(v for v in replica["env"].values() if v is not None)]:
            if _REMOTE.search(value):
                return f"{replica['id']} uses {value!r}, which needs the network"
            if value in _NETWORK_FLAGS:
                return f"{replica['id']} runs with {value}, which may download data"
    return None


def host_line(reason: str) -> str:
    """The one line the launcher prints when a job's replicas are not isolated."""
    return (f"warning: the replicas' TensorFlow ports (no authentication) are reachable from "
            f"other machines while this job runs: {reason}")


# ---- the holder process ------------------------------------------------------------

def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def loopback_up() -> None:
    """`ip link set lo up` in the current network namespace, by ioctl (no iproute2)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifreq = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def make_namespace() -> None:
    """Move this (single-threaded) process into a new user + network namespace."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_LIBC.unshare(CLONE_NEWUSER | CLONE_NEWNET), "unshare(CLONE_NEWUSER|CLONE_NEWNET)")
    _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write("/proc/self/setgroups", "deny\n")
    _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    loopback_up()


_WHY = {
    errno.ENOSPC: "user namespaces are disabled here (sysctl user.max_user_namespaces is 0)",
    errno.EPERM: "unprivileged user namespaces are not allowed here (e.g. sysctl "
                 "kernel.unprivileged_userns_clone=0, or an AppArmor or seccomp policy)",
    errno.EINVAL: "this kernel cannot make the namespaces",
}


def hold() -> int:
    try:
        make_namespace()
    except OSError as err:
        print(_WHY.get(err.errno, f"{err.strerror or err}"), flush=True)
        return 1
    print(READY, flush=True)
    sys.stdin.read()  # until the supervisor closes our stdin or dies (EOF either way)
    return 0


# ---- the supervisor's side ---------------------------------------------------------

class Namespace:
    """A running holder and open handles on its namespaces, for replicas to join."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.fds = [os.open(f"/proc/{proc.pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
                    for kind in ("user", "net")]

    @classmethod
    def start(cls, preexec=None) -> "Namespace":
        """Start a holder; raises OSError with the kernel's reason if it cannot."""
        proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYTHONPATH": _repo_path()}, preexec_fn=preexec)
        line = _read_line(proc, READY_TIMEOUT)
        if line != READY:
            _end(proc)
            raise OSError(line or f"the namespace holder exited with code {proc.returncode}")
        return cls(proc)

    def join(self) -> None:
        """In a forked child before exec: enter the holder's user, then network namespace."""
        for fd, kind in zip(self.fds, (CLONE_NEWUSER, CLONE_NEWNET)):
            _check(_LIBC.setns(fd, kind), "setns")

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        _end(self.proc)


def _repo_path() -> str:
    from .local_plan import REPO_ROOT
    return os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p)


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if ready:
            return proc.stdout.readline().strip()
    return f"the namespace holder did not answer within {timeout:g} s"


def _end(proc: subprocess.Popen) -> None:
    if proc.stdin:
        proc.stdin.close()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout:
        proc.stdout.close()


if __name__ == "__main__":
    sys.exit(hold())
