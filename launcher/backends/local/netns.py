"""A private network namespace for a local job's replicas (issue 22).

TensorFlow's gRPC servers have no authentication and bind every interface. So the
supervisor runs the replicas of a job in a network namespace of their own that has only
a loopback interface: they reach each other on 127.0.0.1, and nothing outside the job
(another user on the LAN, another process in the host's network namespace) reaches them.

The namespace is made without privileges through a user namespace
(unshare(CLONE_NEWUSER | CLONE_NEWNET)) in a small holder process,
`python -m launcher.backends.local.netns`, which maps the user's own uid and gid onto
themselves, brings `lo` up, prints "ready" and then waits until the supervisor closes its
stdin (or dies). Each replica joins the holder's user and network namespaces before it
executes (setns in a preexec hook), so all replicas share one loopback.

A job whose arguments or env name a remote URL (gs://, s3://, http(s)://...) or ask the
trainer to download data (--prepare-data) needs outbound network. Where slirp4netns is
installed it gets it without inbound exposure: slirp4netns (user-mode networking, run by
the supervisor against the holder) gives the namespace a tap0 with a default route whose
connections leave through ordinary sockets of the host; it forwards no port inward (no
API socket, host loopback disabled). Without slirp4netns, or when the job needs this
machine's loopback (a proxy, the GCS emulator or the DNS resolver on 127.0.0.1), the job
runs unisolated; so does every job where the kernel refuses user namespaces. The
supervisor records which in status.json ("network") and the launcher prints one line
saying so. $TFJOB_LOCAL_SLIRP4NETNS names the binary ("" never uses it).
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import select
import ipaddress
import shutil
import socket
import struct
import subprocess
import sys
import time
from urllib.parse import urlsplit

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
READY = "ready"
READY_TIMEOUT = 20.0
ISOLATED, HOST = "isolated", "host"
_LIBC = ctypes.CDLL(None, use_errno=True)
_REMOTE = re.compile(r"\b(?!file://)[a-z][a-z0-9+.-]*://", re.I)
_NETWORK_FLAGS = ("--prepare-data",)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s\"',]+", re.I)
SLIRP_ENV = "TFJOB_LOCAL_SLIRP4NETNS"
_LOOPBACK_VARS = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY",
                  "STORAGE_EMULATOR_HOST")
RESOLV_CONF = "/etc/resolv.conf"


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


def _on_loopback(value: str) -> bool:
    """True if `value` (a URL or host[:port]) names this machine's loopback."""
    try:
        host = urlsplit(value if "://" in value else f"//{value}").hostname or ""
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _resolvers() -> list[str]:
    try:
        with open(RESOLV_CONF) as f:
            return [line.split()[1] for line in f if line.startswith("nameserver") and len(line.split()) > 1]
    except OSError:
        return []


def outbound_blocker(plan: dict, environ: dict) -> str | None:
    """Why the job cannot have outbound-only networking here (None if it can)."""
    slirp = environ.get(SLIRP_ENV, "slirp4netns")
    if not slirp or shutil.which(slirp) is None:
        return "install slirp4netns to give such jobs outbound-only networking"
    for replica in plan["replicas"]:
        own = {k: v for k, v in replica["env"].items() if v is not None}  # the job's env, not all of yours
        env = {**environ, **own}
        for name in _LOOPBACK_VARS:
            if env.get(name) and _on_loopback(env[name]):
                return f"{name} points at this machine's loopback, which a private namespace cannot reach"
        for value in [*replica["argv"], *own.values()]:
            for url in _URL.findall(value):
                if _on_loopback(url):
                    return f"{url} is on this machine's loopback, which a private namespace cannot reach"
    resolvers = _resolvers()
    if resolvers and all(_on_loopback(r) for r in resolvers):
        return f"the DNS resolver ({RESOLV_CONF}) is on this machine's loopback"
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
        self.slirp: subprocess.Popen | None = None
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

    def outbound(self, environ: dict, preexec=None, log=None) -> None:
        """Outbound-only networking through slirp4netns (see above); OSError if it fails."""
        binary = shutil.which(environ.get(SLIRP_ENV, "slirp4netns") or "slirp4netns")
        if binary is None:
            raise OSError("slirp4netns is not installed")
        ready_r, ready_w = os.pipe()
        try:
            self.slirp = subprocess.Popen(
                [binary, "--configure", "--mtu=65520", "--disable-host-loopback", f"--ready-fd={ready_w}",
                 str(self.proc.pid), "tap0"],
                pass_fds=(ready_w,), stdin=subprocess.DEVNULL, stdout=log or subprocess.DEVNULL,
                stderr=subprocess.STDOUT, preexec_fn=preexec)
        finally:
            os.close(ready_w)
        try:
            ready, _, _ = select.select([ready_r], [], [], READY_TIMEOUT)
            answer = os.read(ready_r, 1) if ready else b""
        finally:
            os.close(ready_r)
        if answer != b"1":
            code = self.slirp.poll()
            raise OSError(f"slirp4netns did not come up ({'exit code ' + str(code) if code is not None else 'no answer'}"
                          f"{'; see the supervisor log' if log else ''})")

    def join(self) -> None:
        """In a forked child before exec: enter the holder's user, then network namespace."""
        for fd, kind in zip(self.fds, (CLONE_NEWUSER, CLONE_NEWNET)):
            _check(_LIBC.setns(fd, kind), "setns")

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        if self.slirp is not None:
            self.slirp.terminate()
            try:
                self.slirp.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.slirp.kill()
                self.slirp.wait()
            self.slirp = None
        _end(self.proc)


def _repo_path() -> str:
    from .plan import REPO_ROOT
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
