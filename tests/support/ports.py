"""The one free-port helper of the tests."""
from __future__ import annotations

import socket

LOCAL = "127.0.0.1"


def free_port(host: str = LOCAL) -> int:
    """A TCP port nothing listens on now: the kernel picks it, the socket is closed again.
    (Another process may take it before the caller binds it; on a test machine that is rare,
    and the servers here bind at once.) Also an address where a connection is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def listening(address: str, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections at HOST:PORT now."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False
