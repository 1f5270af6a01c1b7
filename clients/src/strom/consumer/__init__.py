"""The consumer: ``Consumer`` (synchronous, ``strom.Consumer``) and its asyncio twin
(``strom.consumer.aio.Consumer``, ``strom.aio.Consumer``), with their parts.

Public modules: ``config`` (``ConsumerConfig``: every option, declared once), ``aio`` and
``consumer`` (the two clients). Internals, used only inside this package: ``_fetcher``
(prefetching per node, offset resets, record decoding), ``_subscription`` (assignment,
positions, buffered data), ``_coordinator`` (group membership: join, sync, heartbeats,
rebalance listener), ``_coordinator_link`` (finding and calling the group's coordinator),
``_offset_commits`` (OffsetCommit/OffsetFetch with retries), ``_join_protocol`` (the consumer
protocol in JoinGroup/SyncGroup) and ``_group_options`` (the resolved group settings).
"""

from strom.consumer.config import ConsumerConfig, ConsumerOptions
from strom.consumer.consumer import Consumer
from strom.types import ConsumerGroupMetadata

__all__ = ["Consumer", "ConsumerConfig", "ConsumerGroupMetadata", "ConsumerOptions"]
