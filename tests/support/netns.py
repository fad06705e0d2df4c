"""A network namespace a test creates, joined to the host's by a veth pair (needs root and
iproute2's `ip netns`). The test sees the host from "another machine on the LAN": the
host end has HOST_IP, the namespace end PEER_IP. Removed on exit, also on failure."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Iterator

from tests.support.ports import free_port
from tests.support.trainer_cluster import reap

TIMEOUT = 30.0


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=TIMEOUT, check=check)


def unavailable() -> str | None:
    """Why this machine cannot create a test namespace (None if it can)."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    if os.geteuid() != 0:
        return "`ip netns add` needs root"
    return None


@dataclass
class PeerNamespace:
    name: str
    host_ip: str
    peer_ip: str

    def connect(self, host: str, port: int) -> str:
        """Try a TCP connection to host:port from inside the namespace: "open", or the error."""
        code = ("import socket,sys\n"
                "s=socket.socket(); s.settimeout(3)\n"
                "try:\n s.connect((sys.argv[1], int(sys.argv[2]))); print('open')\n"
                "except OSError as e:\n print(type(e).__name__)\n")
        done = subprocess.run(["ip", "netns", "exec", self.name, sys.executable, "-c", code, host, str(port)],
                              capture_output=True, text=True, timeout=TIMEOUT)
        return (done.stdout.strip() or done.stderr.strip())


@contextlib.contextmanager
def peer_namespace(tag: str) -> Iterator[PeerNamespace]:
    """A fresh namespace `tfjl-TAG-PID` with a /30 veth link to the host namespace."""
    name = f"tfjl-{tag}-{os.getpid()}"
    host_if, peer_if = f"vh{os.getpid() % 100000}", f"vp{os.getpid() % 100000}"
    octet = os.getpid() % 250 + 1
    host_ip, peer_ip = f"10.251.{octet}.1", f"10.251.{octet}.2"
    try:
        _ip("netns", "add", name)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", peer_if)
        _ip("link", "set", peer_if, "netns", name)
        _ip("addr", "add", f"{host_ip}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        for args in (("addr", "add", f"{peer_ip}/30", "dev", peer_if), ("link", "set", peer_if, "up"),
                     ("link", "set", "lo", "up")):
            _ip("netns", "exec", name, "ip", *args)
        yield PeerNamespace(name, host_ip, peer_ip)
    finally:
        _ip("link", "del", host_if, check=False)  # deletes both ends of the pair
        _ip("netns", "del", name, check=False)


def listening(pid: int | None = None) -> set[tuple[str, int]]:
    """(local address, port) of TCP sockets in LISTEN state in the host's network namespace,
    or in `pid`'s (`ss -ltn`): "127.0.0.1", "*", "0.0.0.0", "[::]", "[::1]", ..."""
    prefix = ["nsenter", "--target", str(pid), "--net"] if pid else []
    out = subprocess.run([*prefix, "ss", "-ltnH"], capture_output=True, text=True, timeout=TIMEOUT,
                         check=True).stdout
    found = set()
    for line in out.splitlines():
        if line.strip():
            address, _, port = line.split()[3].rpartition(":")
            found.add((address.split("%")[0], int(port)))
    return found


def listening_ports(pid: int | None = None) -> set[int]:
    """TCP ports in LISTEN state in the host's network namespace, or in `pid`'s."""
    return {port for _, port in listening(pid)}


@contextlib.contextmanager
def listener() -> Iterator[int]:
    """A TCP listener on every interface of the host namespace (a positive control)."""
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        sock.listen()
        yield sock.getsockname()[1]


@contextlib.contextmanager
def http_server(namespace: PeerNamespace, directory) -> Iterator[int]:
    """`python -m http.server` serving `directory` on the namespace's own address (the
    "LAN" side); yields its port. Stopped on exit."""
    port = free_port()  # a free port number (the namespace has its own ports anyway)
    proc = subprocess.Popen(["ip", "netns", "exec", namespace.name, sys.executable, "-m", "http.server",
                             "--bind", namespace.peer_ip, "--directory", str(directory), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT
        while namespace.connect(namespace.peer_ip, port) != "open":
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"http.server in {namespace.name} did not start")
        yield port
    finally:
        reap(proc)
