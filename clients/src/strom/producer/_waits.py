"""What ``send`` may have to wait for, shared by the asyncio and the synchronous producer.

The hot path (``strom.producer.aio.Producer._try_send``) never waits: it raises
``NeedMetadata`` or ``NeedRoom`` and its caller waits in its own way (a coroutine on the
event loop, or a blocked user thread) before trying again, until ``max_block_ms``.
"""

from __future__ import annotations

from strom.errors import StromTimeoutError

__all__ = ["NeedMetadata", "NeedRoom", "blocked_too_long"]


class NeedMetadata(Exception):
    """The topic's partition count is not cached yet."""


class NeedRoom(Exception):
    """buffer_memory has no room for ``size`` bytes right now."""

    def __init__(self, size: int) -> None:
        self.size = size


def blocked_too_long(need: Exception, topic: str, max_block_ms: int) -> StromTimeoutError:
    """The error for a ``send`` that waited ``max_block_ms`` for ``need`` in vain."""
    if isinstance(need, NeedRoom):
        return StromTimeoutError(
            f"buffer_memory full: no room for {need.size} bytes within max_block_ms "
            f"({max_block_ms} ms)"
        )
    return StromTimeoutError(
        f"metadata for topic '{topic}' not available within max_block_ms ({max_block_ms} ms)"
    )
