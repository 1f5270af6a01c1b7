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
