"""BackgroundLoop: the shared event-loop thread of the sync facades."""

from __future__ import annotations

import asyncio
import threading

import pytest

from strom.cluster import BackgroundLoop
from strom.errors import StromError, StromTimeoutError


def test_shared_is_one_daemon_thread() -> None:
    first = BackgroundLoop.shared()
    assert BackgroundLoop.shared() is first
    assert first.thread.daemon and first.thread.is_alive()
    assert first.loop.is_running()


def test_run_returns_result_on_the_loop_thread() -> None:
    bg = BackgroundLoop.shared()

    async def where() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    assert bg.run(where()) == bg.thread.name


def test_run_raises_the_coroutines_exception() -> None:
    async def fail() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        BackgroundLoop.shared().run(fail())


def test_timeout_raises_strom_timeout_and_cancels() -> None:
    bg = BackgroundLoop.shared()
    cancelled = threading.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(StromTimeoutError):
        bg.run(slow(), timeout=0.05)
    assert cancelled.wait(5)


def test_coroutine_timeout_error_keeps_its_message() -> None:
    async def own() -> None:
        raise StromTimeoutError("mine")

    with pytest.raises(StromTimeoutError, match="mine"):
        BackgroundLoop.shared().run(own())


def test_submit_gives_a_thread_safe_future() -> None:
    async def value() -> int:
        return 42

    assert BackgroundLoop.shared().submit(value()).result(5) == 42


def test_run_from_the_loop_thread_raises_instead_of_deadlocking() -> None:
    bg = BackgroundLoop.shared()

    async def nested() -> str:
        async def inner() -> int:
            return 1

        try:
            bg.run(inner())
        except StromError as exc:
            return str(exc)
        return "no error"

    assert "event-loop thread" in bg.run(nested(), timeout=5)


def test_private_loop_stops() -> None:
    bg = BackgroundLoop(name="strom-test-loop")

    async def one() -> int:
        return 1

    assert bg.run(one()) == 1
    bg.stop()
    assert not bg.thread.is_alive()
