"""The plain parts of a transactional loop, shared by the sync and asyncio drivers: what a
transform may return (``OutputRecord``), the options (``LoopOptions``), the open
transaction's bookkeeping (``TxnBatch``), the counters (``LoopStats``), KIP-691's
classification of an error (``classify``) and the loops' decisions without I/O
(``LoopCore``, the base of both)."""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from strom.errors import ConfigurationError, StromError
from strom.producer import is_fatal
from strom.types import ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = [
    "FORCED_CONSUMER_OPTIONS",
    "Action",
    "LoopCore",
    "LoopOptions",
    "LoopStats",
    "OutputRecord",
    "TxnBatch",
    "check_client_options",
    "classify",
    "output_records",
]

log = logging.getLogger("strom.eos")

Headers = Iterable[tuple[str, bytes | None]]


class OutputRecord(NamedTuple):
    """One record a transform function asks to write (a plain tuple in the same order works
    too): ``partition=None`` lets the producer's partitioner choose."""

    topic: str
    value: Any = None
    key: Any = None
    headers: Headers | None = None
    partition: int | None = None

    def send_args(self) -> tuple[str, Any, Any, list[tuple[str, bytes | None]] | None, int | None]:
        """The arguments of ``Producer.send`` for this record (topic, value, key, headers,
        partition)."""
        headers = None if self.headers is None else list(self.headers)
        return self.topic, self.value, self.key, headers, self.partition


def output_records(produced: Iterable[Any] | None, record: ConsumerRecord) -> list[OutputRecord]:
    """The transform's result for ``record`` as ``OutputRecord``s (``None`` means none); a
    wrong shape raises ``TypeError`` naming the input record."""
    if produced is None:
        return []
    if isinstance(produced, (str, bytes, OutputRecord)):
        raise TypeError(
            f"the transform must return an iterable of OutputRecord, got {type(produced).__name__}"
            f" for {record.topic}-{record.partition}@{record.offset}"
        )
    found: list[OutputRecord] = []
    for item in produced:
        if isinstance(item, OutputRecord):
            found.append(item)
        elif isinstance(item, tuple) and 1 <= len(item) <= len(OutputRecord._fields):
            found.append(OutputRecord(*item))
        else:
            raise TypeError(
                "the transform must return OutputRecord(topic, value, key, headers, partition) "
                f"items, got {item!r} for {record.topic}-{record.partition}@{record.offset}"
            )
        if not isinstance(found[-1].topic, str) or not found[-1].topic:
            raise TypeError(
                f"an OutputRecord needs a topic name, got {found[-1].topic!r} for "
                f"{record.topic}-{record.partition}@{record.offset}"
            )
    return found


@dataclass(frozen=True)
class LoopOptions:
    """When a transaction ends: after ``max_batch_records`` input records or
    ``max_batch_interval_ms`` after its first one, whichever comes first (0: after each
    poll). ``poll_timeout_ms`` bounds one wait for input while no transaction is open."""

    max_batch_records: int = 1000
    max_batch_interval_ms: int = 100
    poll_timeout_ms: int = 500

    def __post_init__(self) -> None:
        for name, minimum in (
            ("max_batch_records", 1),
            ("max_batch_interval_ms", 0),
            ("poll_timeout_ms", 0),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}")


#: Consumer options the loop sets itself: (name, the value it needs).
FORCED_CONSUMER_OPTIONS = {"enable_auto_commit": False, "isolation_level": "read_committed"}


def check_client_options(
    consumer_options: Mapping[str, Any], producer_options: Mapping[str, Any]
) -> None:
    """Refuse options that would break exactly-once, or that the loop sets from its own
    arguments, naming them."""
    for name, needed in FORCED_CONSUMER_OPTIONS.items():
        if name in consumer_options and consumer_options[name] != needed:
            raise ConfigurationError(
                f"consumer_options[{name!r}] must be {needed!r} in a transactional loop (offsets "
                f"commit with the transaction), got {consumer_options[name]!r}"
            )
    for name in ("group_id", "bootstrap_servers"):
        if name in consumer_options:
            raise ConfigurationError(
                f"consumer_options[{name!r}]: pass it as the loop's own argument"
            )
    for name in ("transactional_id", "bootstrap_servers"):
        if name in producer_options:
            raise ConfigurationError(
                f"producer_options[{name!r}]: pass it as the loop's own argument"
            )


@dataclass
class LoopStats:
    """What a loop has done so far (counts since it started)."""

    transactions_committed: int = 0
    transactions_aborted: int = 0
    records_consumed: int = 0
    records_produced: int = 0
    commit_retries: int = 0


@dataclass
class TxnBatch:
    """The open transaction: the input it has read (first and next offset per partition)
    and the output it has sent. Ends ``interval_s`` after ``started`` or at ``max_records``
    input records."""

    max_records: int
    interval_s: float
    started: float = field(default_factory=time.monotonic)
    first: dict[TopicPartition, int] = field(default_factory=dict)
    next: dict[TopicPartition, int] = field(default_factory=dict)
    consumed: int = 0
    produced: int = 0

    def add(self, tp: TopicPartition, records: list[ConsumerRecord]) -> None:
        """``records`` (one partition, offset order) belong to this transaction."""
        self.first.setdefault(tp, records[0].offset)
        self.next[tp] = records[-1].offset + 1
        self.consumed += len(records)

    def offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The input offsets to commit with the transaction: the next record to read."""
        return {tp: OffsetAndMetadata(offset) for tp, offset in self.next.items()}

    def room(self) -> int:
        """Input records this transaction may still take."""
        return max(self.max_records - self.consumed, 0)

    def left_s(self, now: float | None = None) -> float:
        """Seconds until the transaction is due to end (<= 0: due now)."""
        if self.room() == 0:
            return 0.0
        return self.started + self.interval_s - (time.monotonic() if now is None else now)

    def due(self, now: float | None = None) -> bool:
        return self.consumed > 0 and self.left_s(now) <= 0


class Action(enum.Enum):
    """What to do with an error of a transaction (KIP-691)."""

    #: Fenced by a newer producer with the same transactional id, or otherwise unusable:
    #: close and stop; whatever was open is aborted by the newer producer or the timeout.
    STOP = "stop"
    #: The transaction cannot commit: abort it, rewind to the committed offsets, go on.
    ABORT = "abort"
    #: A commit whose outcome is not known yet: call ``commit_transaction()`` again.
    RETRY_COMMIT = "retry commit"


def classify(error: BaseException, *, committing: bool) -> Action:
    """KIP-691's classes: fatal → STOP; a retriable error or timeout of a commit →
    RETRY_COMMIT (never turned into an abort); any other ``StromError`` → ABORT; an error
    that is not Strom's (a bug in the transform, an interrupt) → STOP."""
    if not isinstance(error, StromError) or is_fatal(error):
        return Action.STOP
    if committing and error.retriable:
        return Action.RETRY_COMMIT
    return Action.ABORT


class _Rewindable(Protocol):
    """What ``LoopCore`` needs of either consumer (both calls are synchronous)."""

    def assignment(self) -> set[TopicPartition]: ...

    def seek(self, partition: TopicPartition, offset: int) -> None: ...


class LoopCore:
    """The state and decisions both loops share, without I/O: the checked options, the open
    transaction (``_batch``), the counters, the stop flag, what to poll next, what to do
    when a commit fails and how to rewind after an abort. ``strom.eos.loop`` and
    ``strom.eos.aio`` add the clients and the calls to them."""

    consumer: _Rewindable

    def __init__(
        self,
        input_topics: Iterable[str] | str,
        transform: Callable[[ConsumerRecord], Any],
        options: LoopOptions,
        consumer_options: Mapping[str, Any] | None,
        producer_options: Mapping[str, Any] | None,
    ) -> None:
        self.options = options
        consumer_options = dict(consumer_options or {})
        producer_options = dict(producer_options or {})
        check_client_options(consumer_options, producer_options)
        self._topics = [input_topics] if isinstance(input_topics, str) else list(input_topics)
        if not self._topics:
            raise ConfigurationError("input_topics is empty: name at least one topic to read")
        #: The clients' options, with what the loop sets itself.
        self._consumer_options = {**consumer_options, **FORCED_CONSUMER_OPTIONS}
        self._producer_options = producer_options
        self._transform = transform
        self._stop = threading.Event()
        self._batch: TxnBatch | None = None
        self._closed = False
        self.stats = LoopStats()

    def stop(self) -> None:
        """Ask ``run`` to commit the open transaction and return (safe from any thread and
        from a signal handler)."""
        self._stop.set()

    def _poll_args(self) -> tuple[int, int]:
        """(timeout_ms, max_records) of the next poll: a full wait outside a transaction,
        at most until the open one is due and no more than it may still take."""
        batch, options = self._batch, self.options
        if batch is None:
            return options.poll_timeout_ms, options.max_batch_records
        return max(int(batch.left_s() * 1000), 0), max(batch.room(), 1)

    def _new_batch(self) -> TxnBatch:
        """The bookkeeping of a transaction just begun."""
        options = self.options
        self._batch = TxnBatch(options.max_batch_records, options.max_batch_interval_ms / 1000)
        return self._batch

    def _committed(self, batch: TxnBatch) -> None:
        self._batch = None
        stats = self.stats
        stats.transactions_committed += 1
        stats.records_consumed += batch.consumed
        stats.records_produced += batch.produced

    def _commit_failed(self, error: StromError) -> Action:
        """KIP-691 for a failed ``commit_transaction()``: STOP (raise it), ABORT, or
        RETRY_COMMIT (call it again; counted). While stopping, a commit whose outcome is not
        known is neither retried nor aborted but STOP: the transaction is forgotten (the
        commit may be decided; the next instance with this id ends it either way)."""
        action = classify(error, committing=True)
        if action is Action.RETRY_COMMIT:
            if self._stop.is_set():
                self._batch = None
                return Action.STOP
            self.stats.commit_retries += 1
            log.warning("commit_transaction() not complete, calling it again: %s", error)
        return action

    def _take_batch(self, reason: str) -> TxnBatch | None:
        """The open transaction, about to be aborted (None: none is open)."""
        batch, self._batch = self._batch, None
        if batch is not None:
            log.warning("aborting the transaction (%d input records): %s", batch.consumed, reason)
        return batch

    def _aborted(self, batch: TxnBatch) -> None:
        """After the abort: rewind the partitions it read that are still ours to where it
        started (their committed offsets)."""
        self.stats.transactions_aborted += 1
        assigned = self.consumer.assignment()
        for tp, offset in batch.first.items():
            if tp in assigned:
                self.consumer.seek(tp, offset)
