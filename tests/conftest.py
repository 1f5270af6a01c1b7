"""Shared fixtures of the Strom suite: free loopback ports and process hygiene."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def free_port() -> Iterator[Callable[[], int]]:
    """A factory of distinct free TCP ports on 127.0.0.1 (never assumes 9092 or 2379)."""
    handed_out: set[int] = set()

    def next_port() -> int:
        while True:
            port = _free_port()
            if port not in handed_out:
                handed_out.add(port)
                return port

    yield next_port


@pytest.fixture
def free_port_range() -> Callable[[int], int]:
    """The first of ``n`` consecutive free ports on 127.0.0.1 (for services numbered by port)."""

    def first_of(count: int) -> int:
        for _ in range(200):
            base = _free_port()
            if base + count > 65535:
                continue
            socks = []
            try:
                for port in range(base, base + count):
                    sock = socket.socket()
                    socks.append(sock)
                    sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            finally:
                for sock in socks:
                    sock.close()
            return base
        raise RuntimeError(f"no {count} consecutive free ports found")

    return first_of
