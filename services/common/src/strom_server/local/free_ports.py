"""Free loopback ports for clusters that tests and benchmarks start, below the ephemeral range.

A port found free can still be taken before the service that was given it binds it. Outgoing
connections take their local port from the kernel's ephemeral range (ip_local_port_range,
32768-60999 by default), so a port chosen there can be taken by any connection of any process
(a storage node connecting to etcd, say); ports below it are only ever taken by listeners.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["free_port", "free_port_range", "port_in_use"]

LOWEST = 10000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_DEFAULT_EPHEMERAL_START = 32768


def port_in_use(host: str, port: int) -> bool:
    """Whether binding ``port`` on ``host`` fails right now (SO_REUSEADDR, as servers bind)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def _ephemeral_start() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_EPHEMERAL_START


def free_port_range(count: int, host: str = "127.0.0.1") -> int:
    """The first of ``count`` consecutive ports free on ``host`` right now, below the ephemeral
    range when there is room there (anywhere above ``LOWEST`` otherwise)."""
    high = _ephemeral_start() - count
    if high - LOWEST < 1000:
        high = 65535 - count
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(LOWEST, high)
        if not any(port_in_use(host, base + i) for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports found on {host}")


def free_port(host: str = "127.0.0.1") -> int:
    """One port free on ``host`` right now (see ``free_port_range``)."""
    return free_port_range(1, host)
