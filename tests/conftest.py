"""Shared fixtures of the Strom suite: free loopback ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from strom_testkit import free_port as _free_port
from strom_testkit import free_port_range as _free_port_range


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
    return _free_port_range
