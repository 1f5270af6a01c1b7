"""``InternalTopicWriter``: the ``PartitionLog`` of an internal topic the coordinator hosts (the
runtime gives each shard one: ``__consumer_offsets`` to the group manager,
``__transaction_state`` to the transaction manager): fenced, acks=all appends with group
commit.

Per owned partition one write is in flight; appends that arrive meanwhile wait and go out
together as the next batch (group commit). A caller's records always travel in one batch
(alone or merged with other callers' whole record lists), never split, so a commit is
all-or-nothing.

Each batch carries the partition's producer id and epoch (from InitProducerId with the
partition's transactional id, see ``ownership``) and the next sequence number, and is sent with
acks=-1 to the partition leader. A leader change or a network error refreshes the metadata and
resends the same bytes until ``offsets.commit.timeout.ms`` runs out (one attempt gets a third of
it, at least a second, so that a leader that stopped answering does not hold the write up); the
storage node answers a resent batch it already holds with its original offsets, so a retry never
writes twice.

* INVALID_PRODUCER_EPOCH: another coordinator took the partition over (it bumped the epoch).
  Every waiting append fails with ``NotCoordinatorError`` and ``on_fenced`` tells the
  ownership to unload and release the partition.
* Any other failure (the timeout included: the write may or may not be in the log) fails the
  batch's callers with a retriable error, and the next write first bumps the producer epoch
  (``reinit``): its sequence numbers start again at 0 under a new epoch, so a later batch can
  never be mistaken for the lost one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from strom.cluster import METADATA_ERRORS, ClusterClient, storage_call, where
from strom.cluster.retry import Backoff
from strom.errors import NotCoordinatorError, RequestTimedOutError, StromError, for_code
from strom.protocol.v1 import common_pb2, storage_pb2
from strom.records import BatchBuilder
from strom.types import TopicPartition
from strom_server.runtime.logs import get_logger

__all__ = ["InternalTopicWriter"]

log = get_logger(__name__)

_E = common_pb2.ErrorCode
_SEQUENCE_WRAP = 1 << 31
#: Callers are merged into one batch up to about this size (one caller alone may exceed it).
_MERGE_BYTES = 1 << 20
_BACKOFF_S = 0.05
_BACKOFF_MAX_S = 0.5
#: The shortest time one attempt of a write gets (a third of the write's timeout otherwise).
_ATTEMPT_MIN_S = 1.0

Record = tuple[bytes, bytes | None]
Reinit = Callable[[int], Awaitable[tuple[int, int]]]


@dataclass
class _Append:
    records: list[Record]
    done: asyncio.Future[None]

    @property
    def size(self) -> int:
        return sum(len(k) + len(v or b"") + 16 for k, v in self.records)


@dataclass
class _Writer:
    """One owned partition's producer state and queue."""

    producer_id: int
    producer_epoch: int
    next_sequence: int = 0
    pending: list[_Append] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    needs_reinit: bool = False
    closed: bool = False


class InternalTopicWriter:
    """Implements ``strom_coordinator.partitions.log.PartitionLog`` (see the module docstring).

    ``reinit(partition)`` returns a new (producer id, epoch) for the partition; ``on_fenced``
    hears of a partition another coordinator took over. Not thread-safe: one event loop.
    """

    def __init__(
        self,
        cluster: ClusterClient,
        *,
        timeout_s: float,
        reinit: Reinit,
        on_fenced: Callable[[int], None] = lambda partition: None,
        topic: str,
    ) -> None:
        self._cluster = cluster
        self._timeout_s = timeout_s
        self._reinit = reinit
        self._on_fenced = on_fenced
        self.topic = topic
        self._writers: dict[int, _Writer] = {}

    # --- ownership -----------------------------------------------------------------------

    def open(self, partition: int, producer_id: int, producer_epoch: int) -> None:
        """Start writing ``partition`` as (producer id, epoch), sequence 0."""
        self.close(partition)
        self._writers[partition] = _Writer(producer_id, producer_epoch)

    def close(self, partition: int) -> None:
        """Stop writing ``partition``: waiting appends fail with NotCoordinatorError (one in
        flight finishes, but its callers are answered NOT_COORDINATOR too)."""
        writer = self._writers.pop(partition, None)
        if writer is None:
            return
        writer.closed = True
        self._fail(writer.pending, self._not_owner(partition))
        writer.pending.clear()

    def is_open(self, partition: int) -> bool:
        return partition in self._writers

    def producer(self, partition: int) -> tuple[int, int] | None:
        """(producer id, epoch) the partition is written with, None when not open."""
        writer = self._writers.get(partition)
        return None if writer is None else (writer.producer_id, writer.producer_epoch)

    # --- PartitionLog --------------------------------------------------------------------

    async def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        writer = self._writers.get(partition)
        if writer is None:
            raise self._not_owner(partition)
        if not records:
            return
        entry = _Append(list(records), asyncio.get_running_loop().create_future())
        writer.pending.append(entry)
        if writer.task is None:
            writer.task = asyncio.create_task(
                self._drain(partition, writer), name=f"coordinator-writer-{self.topic}-{partition}"
            )
        await entry.done

    async def close_all(self) -> None:
        for partition in list(self._writers):
            self.close(partition)

    # --- writing -------------------------------------------------------------------------

    def _not_owner(self, partition: int) -> NotCoordinatorError:
        return NotCoordinatorError(
            f"this coordinator does not own {self.topic}-{partition} (any more)"
        )

    @staticmethod
    def _fail(entries: Sequence[_Append], error: BaseException) -> None:
        for entry in entries:
            if not entry.done.done():
                entry.done.set_exception(error)

    @staticmethod
    def _take(writer: _Writer) -> list[_Append]:
        """The next batch's callers: whole record lists, merged up to ``_MERGE_BYTES``."""
        taken: list[_Append] = []
        size = 0
        while writer.pending:
            entry = writer.pending[0]
            if entry.done.done():  # its caller was cancelled before the write began
                writer.pending.pop(0)
                continue
            if taken and size + entry.size > _MERGE_BYTES:
                break
            taken.append(writer.pending.pop(0))
            size += entry.size
        return taken

    async def _drain(self, partition: int, writer: _Writer) -> None:
        try:
            while writer.pending and not writer.closed:
                entries = self._take(writer)
                if not entries:
                    break
                try:
                    if writer.needs_reinit:
                        writer.producer_id, writer.producer_epoch = await self._reinit(partition)
                        writer.next_sequence = 0
                        writer.needs_reinit = False
                    await self._write(partition, writer, [r for e in entries for r in e.records])
                except NotCoordinatorError as exc:
                    self._fail(entries, exc)
                    if self._writers.get(partition) is writer:
                        log.warning(
                            "fenced: another coordinator owns the partition now",
                            topic=self.topic,
                            partition=partition,
                            producer_epoch=writer.producer_epoch,
                        )
                        self.close(partition)
                        self._on_fenced(partition)
                    return
                except Exception as exc:
                    writer.needs_reinit = True
                    if not isinstance(exc, StromError):
                        log.exception("write to an internal topic failed", topic=self.topic,
                                      partition=partition)  # fmt: skip
                    self._fail(entries, exc)
                else:
                    for entry in entries:
                        if not entry.done.done():
                            entry.done.set_result(None)
        finally:
            writer.task = None

    async def _write(self, partition: int, writer: _Writer, records: list[Record]) -> None:
        """One batch, acks=all, resent on leader moves and network errors until the timeout."""
        tp = TopicPartition(self.topic, partition)
        builder = BatchBuilder(
            producer_id=writer.producer_id,
            producer_epoch=writer.producer_epoch,
            base_sequence=writer.next_sequence,
        )
        now_ms = int(time.time() * 1000)
        for key, value in records:
            builder.append(now_ms, key, value)
        data = builder.build()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout_s
        backoff = Backoff(_BACKOFF_S, _BACKOFF_MAX_S)
        last: StromError | None = None
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise RequestTimedOutError(
                    where(
                        tp,
                        f"write not acknowledged within {self._timeout_s * 1000:.0f} ms "
                        f"(last error: {last})",
                    )
                )
            # One attempt may not use the whole budget: a leader that stopped answering (paused,
            # partitioned) must not keep the write from reaching its successor.
            attempt = min(remaining, max(_ATTEMPT_MIN_S, self._timeout_s / 3))
            request = storage_pb2.ProduceRequest(
                acks=-1,
                timeout_ms=max(1, int(attempt * 1000)),
                partitions=[
                    storage_pb2.ProducePartitionData(
                        topic=self.topic, partition=partition, records=data
                    )
                ],
                client_id="strom-coordinator",
            )
            try:
                async with asyncio.timeout(attempt):
                    leader = await self._cluster.leader(tp)
                    response = await storage_call(
                        self._cluster, leader.leader, "Produce", request, attempt
                    )
            except StromError as exc:
                if not exc.retriable:
                    raise
                last = exc
                self._cluster.mark_stale(self.topic)
            except TimeoutError:
                last = RequestTimedOutError(where(tp, "no answer from the leader"))
                self._cluster.mark_stale(self.topic)
                continue  # asked again (a new leader, maybe); the deadline check above ends it
            else:
                (result,) = response.partitions
                code = result.error_code
                if code == _E.NONE:
                    writer.next_sequence = (writer.next_sequence + len(records)) % _SEQUENCE_WRAP
                    return
                if code == _E.INVALID_PRODUCER_EPOCH:
                    raise NotCoordinatorError(
                        where(tp, f"fenced by a newer owner ({result.error_message})")
                    )
                error = for_code(code, where(tp, result.error_message))
                if code not in METADATA_ERRORS and not error.retriable:
                    raise error
                last = error
                self._cluster.mark_stale(self.topic)
            await asyncio.sleep(min(backoff.next(), max(0.0, deadline - loop.time())))
