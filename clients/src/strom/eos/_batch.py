"""The plain parts of a transactional loop, shared by the sync and asyncio drivers: what a
transform may return (``OutputRecord``), the options (``LoopOptions``), the open
transaction's bookkeeping (``TxnBatch``), the counters (``LoopStats``) and KIP-691's
classification of an error (``classify``)."""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from strom.errors import ConfigurationError, StromError
from strom.producer import is_fatal
from strom.types import ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = [
    "FORCED_CONSUMER_OPTIONS",
    "Action",
    "LoopOptions",
    "LoopStats",
    "OutputRecord",
    "TxnBatch",
    "check_client_options",
    "classify",
    "output_records",
]

Headers = Iterable[tuple[str, bytes | None]]


class OutputRecord(NamedTuple):
    """One record a transform function asks to write (a plain tuple in the same order works
    too): ``partition=None`` lets the producer's partitioner choose."""

    topic: str
    value: Any = None
    key: Any = None
    headers: Headers | None = None
    partition: int | None = None


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
