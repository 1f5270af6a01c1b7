"""The values of the node's requests and answers, one per partition: what the servicer
translates to and from protobuf, and ``as_broker_error``, how an exception becomes a
partition's error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.errors import BrokerResponseError, UnknownServerError

if TYPE_CHECKING:
    from strom_storage.log.producer_state import ActiveProducer

__all__ = [
    "FetchPartitionRequest",
    "FetchPartitionResult",
    "ListOffsetsResult",
    "PartitionOutcome",
    "ProducePartitionResult",
    "ProducersResult",
    "as_broker_error",
]


def as_broker_error(exc: BaseException) -> BrokerResponseError:
    """``exc`` as a partition's error: itself when it is one, else UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, BrokerResponseError):
        return exc
    return UnknownServerError(f"{type(exc).__name__}: {exc}")


@dataclass(frozen=True, slots=True)
class PartitionOutcome:
    """Outcome of an operation on one partition: an error, or None for success."""

    topic: str
    partition: int
    error: BrokerResponseError | None = None


@dataclass(frozen=True, slots=True)
class ProducePartitionResult:
    topic: str
    partition: int
    error: BrokerResponseError | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class FetchPartitionRequest:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    #: A follower's log start offset (replica fetches; -1 when not reported).
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class FetchPartitionResult:
    topic: str
    partition: int
    error: BrokerResponseError | None = None
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview = b""
    last_stable_offset: int = -1
    #: read_committed only: (producer id, first offset) of the aborted transactions overlapping
    #: the returned batches
    aborted_transactions: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    topic: str
    partition: int
    error: BrokerResponseError | None = None
    offset: int = -1
    timestamp_ms: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ProducersResult:
    """DescribeProducers for one partition: its leader's active producers, or the error."""

    topic: str
    partition: int
    error: BrokerResponseError | None = None
    producers: tuple[ActiveProducer, ...] = ()
