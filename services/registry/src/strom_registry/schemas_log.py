"""The ``_schemas`` topic: created compacted, read from the start into ``RegistryState`` by a
background reader, appended to by the writer.

Every instance runs the reader, so every instance serves reads; a restarted instance rebuilds
its state by reading the topic again. ``wait_for(offset)`` returns once the reader has
applied every record below ``offset``: the writer answers a request only after its own record
came back through the log, so its state and the log never disagree.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from strom import NewTopic, TopicPartition
from strom.aio import Admin, Consumer, Producer
from strom.cluster.retry import Backoff
from strom.errors import StromError, TopicAlreadyExistsError
from strom_registry import errors
from strom_registry.records import Record
from strom_registry.state import RegistryState
from strom_server.runtime.logs import get_logger

__all__ = ["SchemasLog"]

log = get_logger(__name__)


class SchemasLog:
    """One instance's view of the ``_schemas`` topic (see the module docstring)."""

    def __init__(
        self,
        bootstrap_servers: str,
        state: RegistryState,
        *,
        topic: str = "_schemas",
        replication_factor: int = 3,
        timeout_s: float = 30.0,
        client_id: str = "strom-registry",
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        """``client_options``: the clients' security options (``security_protocol``, ...)."""
        self.bootstrap_servers = bootstrap_servers
        self.state = state
        self.topic = topic
        self.replication_factor = replication_factor
        self.timeout_s = timeout_s
        self._tp = TopicPartition(topic, 0)
        timeout_ms = int(timeout_s * 1000)
        self._options = dict(client_options or {})
        self._consumer = Consumer(
            bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest",
            enable_auto_commit=False, fetch_max_wait_ms=200, request_timeout_ms=timeout_ms,
            client_id=client_id, **self._options,
        )  # fmt: skip
        self._producer: Producer | None = None
        self._client_id = client_id
        #: The offset after the last applied record.
        self.position = 0
        self._advanced = asyncio.Condition()
        self._reader: asyncio.Task[None] | None = None

    async def ensure_topic(self) -> None:
        """Create the topic (one partition, compacted) unless it exists."""
        async with Admin(self.bootstrap_servers, request_timeout_ms=int(self.timeout_s * 1000),
                         **self._options) as admin:  # fmt: skip
            if self.topic in await admin.list_topics(include_internal=True):
                return
            brokers = len((await admin.describe_cluster()).brokers)
            replication = max(1, min(self.replication_factor, brokers))
            topic = NewTopic(
                self.topic, 1, replication, topic_configs={"cleanup.policy": "compact"}
            )
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([topic])
                log.info("created the schemas topic", topic=self.topic, replication=replication)

    async def start(self) -> None:
        """Start reading the topic (``ensure_topic`` first) and wait until caught up."""
        self._consumer.assign([self._tp])
        await self._consumer.start()
        self._reader = asyncio.create_task(self._read(), name="registry-schemas-reader")
        await self.sync()

    async def _read(self) -> None:
        backoff = Backoff(0.1, 2.0)
        while True:
            try:
                batches = await self._consumer.getmany(timeout_ms=500)
                backoff.reset()
            except asyncio.CancelledError:
                raise
            except StromError as exc:
                log.warning("reading the schemas topic failed; retrying", error=str(exc))
                await backoff.sleep()
                continue
            records = batches.get(self._tp, [])
            for record in records:
                self.state.apply(record.key, record.value)
            if records:
                async with self._advanced:
                    self.position = records[-1].offset + 1
                    self._advanced.notify_all()

    async def wait_for(self, offset: int) -> None:
        """Return once every record below ``offset`` is applied (50002 after the timeout)."""
        try:
            async with asyncio.timeout(self.timeout_s), self._advanced:
                await self._advanced.wait_for(lambda: self.position >= offset)
        except TimeoutError:
            raise errors.store_timeout(
                f"the schemas topic was not read up to offset {offset} in time"
            ) from None

    async def sync(self) -> None:
        """Return once the state holds everything the topic held when called."""
        try:
            end = (await self._consumer.end_offsets([self._tp]))[self._tp]
        except StromError as exc:
            raise errors.store_error(f"cannot read the end of the schemas topic: {exc}") from None
        await self.wait_for(end)

    async def append(self, batch: Sequence[Record]) -> int:
        """Append ``batch`` (acks=all) and wait until applied; returns the next offset."""
        if self._producer is None:
            self._producer = Producer(
                bootstrap_servers=self.bootstrap_servers, acks="all", linger_ms=0,
                request_timeout_ms=int(self.timeout_s * 1000), client_id=self._client_id,
                **self._options,
            )  # fmt: skip
            await self._producer.start()
        try:
            futures = [
                await self._producer.send(self.topic, value, key=key, partition=0)
                for key, value in batch
            ]
            last = max([(await f).offset for f in futures])
        except StromError as exc:
            raise errors.store_error(f"cannot write to the schemas topic: {exc}") from None
        await self.wait_for(last + 1)
        return last + 1

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._producer is not None:
            await self._producer.close()
        await self._consumer.close()
