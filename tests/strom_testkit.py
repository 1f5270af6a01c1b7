"""Helpers shared by the test suite (importable from every test folder: pytest puts tests/ on
the path for the root conftest; the name is unique because test folders are not packages)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from strom_server.local import free_ports

__all__ = ["free_port", "free_port_range", "wait_until"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, below the ephemeral range (never assumes 9092 or
    2379; see strom_server.local.free_ports)."""
    return free_ports.free_port()


def free_port_range(count: int) -> int:
    """The first of ``count`` consecutive free ports on 127.0.0.1 (services numbered by port)."""
    return free_ports.free_port_range(count)


def wait_until(
    condition: Callable[[], Any], timeout_s: float = 15.0, what: str = "", interval_s: float = 0.05
) -> Any:
    """Poll ``condition`` until it returns something truthy; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what or condition}")
        time.sleep(interval_s)
