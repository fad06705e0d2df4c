"""One DNS A query over UDP to a given server (the node's CoreDNS), without the host's
resolver: the addresses of the answer, in order. Enough of RFC 1035 for that, no more."""
from __future__ import annotations

import random
import socket
import struct


def resolve(name: str, server: str, port: int = 53, timeout: float = 5.0) -> list[str]:
    ident = random.randrange(1 << 16)
    question = b"".join(bytes([len(label)]) + label.encode() for label in name.rstrip(".").split(".")) + b"\0"
    query = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question + struct.pack("!HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.sendto(query, (server, port))
        reply, _ = sock.recvfrom(4096)
    rid, flags, qdcount, ancount = struct.unpack("!HHHH", reply[:8])
    if rid != ident or flags & 0x000F:
        return []  # not ours, or an error rcode (NXDOMAIN, REFUSED...)
    offset = 12
    for _ in range(qdcount):
        offset = _skip_name(reply, offset) + 4
    found = []
    for _ in range(ancount):
        offset = _skip_name(reply, offset)
        rtype, _cls, _ttl, length = struct.unpack("!HHIH", reply[offset:offset + 10])
        offset += 10
        if rtype == 1 and length == 4:
            found.append(socket.inet_ntoa(reply[offset:offset + 4]))
        offset += length
    return found


def _skip_name(message: bytes, offset: int) -> int:
    while True:
        length = message[offset]
        if length & 0xC0 == 0xC0:
            return offset + 2
        if length == 0:
            return offset + 1
        offset += length + 1
