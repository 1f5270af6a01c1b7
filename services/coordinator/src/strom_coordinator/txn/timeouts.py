"""The transaction coordinator's clocks: every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` the Ongoing transactions past
their timeout are aborted, every ``transaction.remove.expired.transaction.cleanup.interval.ms``
the ids idle for ``transactional.id.expiration.ms`` are removed (``TransactionManager``'s
``abort_timed_out`` and ``expire``).

Timeouts count from the transaction's start time, which is persisted: a coordinator that takes
a partition over keeps every Ongoing transaction's clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from strom_server.runtime.logs import get_logger

__all__ = ["every"]

log = get_logger(__name__)


async def every(interval_s: float, work: Callable[[], Awaitable[object]], name: str) -> None:
    """Run ``work`` every ``interval_s`` until cancelled (a failure is logged, not fatal)."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await work()
        except Exception:
            log.exception("periodic transaction work failed", work=name)
