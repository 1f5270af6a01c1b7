"""``strom_coordinator.answers``: a call whose client went away still runs to its end (a
TxnOffsetCommit cancelled between its log write and its memory update left a pending record no
marker would find: a fault run's pipeline stuck for minutes), except JoinGroup and SyncGroup."""

from __future__ import annotations

import asyncio

from strom.errors import BrokerResponseError
from strom_coordinator.answers import answer


def _fail(error: BrokerResponseError) -> str:
    return f"failed: {error}"


def test_a_call_whose_handler_is_cancelled_still_completes() -> None:
    async def scenario() -> None:
        written = asyncio.Event()
        applied: list[str] = []

        async def work() -> str:
            await written.wait()  # the log write
            applied.append("memory updated")
            return "ok"

        handler = asyncio.ensure_future(answer("TxnOffsetCommit", work, _fail))
        await asyncio.sleep(0)
        handler.cancel()  # the client went away
        await asyncio.gather(handler, return_exceptions=True)
        assert handler.cancelled()
        written.set()
        for _ in range(5):
            await asyncio.sleep(0)
        assert applied == ["memory updated"]

    asyncio.run(scenario())


def test_join_and_sync_still_end_with_their_client() -> None:
    async def scenario() -> None:
        ended: list[str] = []

        async def work() -> str:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                ended.append("cancelled")
                raise
            return "never"

        handler = asyncio.ensure_future(answer("JoinGroup", work, _fail))
        await asyncio.sleep(0)
        handler.cancel()
        await asyncio.gather(handler, return_exceptions=True)
        assert ended == ["cancelled"]

    asyncio.run(scenario())
