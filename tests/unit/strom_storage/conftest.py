"""Fixtures for the storage unit tests: a manual clock and a log factory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from strom_server.runtime.clock import ManualClock
from strom_storage.log import Log, LogConfig


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def open_log(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[..., Log]]:
    """``open_log(**config)`` opens (or reopens) the log in ``tmp_path / "t-0"``."""
    opened: list[Log] = []

    def factory(config: LogConfig | None = None, **overrides: object) -> Log:
        cfg = config if config is not None else LogConfig(**overrides)  # type: ignore[arg-type]
        log = Log.open(tmp_path / "t-0", cfg, clock=clock)
        opened.append(log)
        return log

    yield factory
    for log in opened:
        if not log.closed:
            log.close()
