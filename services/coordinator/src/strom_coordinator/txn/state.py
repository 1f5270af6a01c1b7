"""The transaction state machine of one transactional id: pure functions from a state (and a
request) to the next state or an error, with no I/O.

Epochs follow KIP-890: one epoch per transaction. A transaction runs at the current epoch e;
ending it (``prepare_end``) moves the current epoch to e+1 at once (or to a fresh producer id at
epoch 0 when e+1 would reach ``MAX_EPOCH``) and remembers (producer id, e) as the *ended*
transaction, so that a retried EndTxn gets the same answer and markers carry e.

Clients that predate KIP-890 part 2 (Kafka's EndTxn < v5, ``keep_epoch``) keep their epoch: for
them EndTxn ends the transaction at e without a bump (the ended transaction is (producer id, e)
and the current epoch stays e), so the next transaction runs at e again, as Kafka's transaction
protocol v1 does. A timeout abort or InitProducerId still bumps, which fences such a client.

States (Kafka's names): Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit,
CompleteAbort (Dead is only reported for ids that are gone)::

    Empty | Complete*  --AddPartitions/AddOffsets-->  Ongoing
    Ongoing            --EndTxn / timeout / InitProducerId-->  Prepare*  (epoch bumped)
    Prepare*           --every marker acknowledged-->  Complete*
    Empty | Complete*  --InitProducerId-->  Empty  (epoch bumped, memory cleared)

A caller that needs a fresh producer id (epoch overflow) gets ``FreshProducerIdNeeded`` and
calls again with one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from strom.errors import (
    BrokerResponseError,
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    TransactionAbortableError,
)

__all__ = [
    "MAX_EPOCH",
    "RESERVED_PREFIX",
    "EndAnswer",
    "FreshProducerIdNeeded",
    "TxnMetadata",
    "TxnState",
    "abort_open",
    "add_partitions",
    "check_timeout",
    "check_transactional_id",
    "complete",
    "end_txn",
    "expired",
    "init_producer",
    "init_producer_blocker",
    "new_transactional_id",
    "resumes",
    "timed_out",
    "verify_partition",
]

#: The epoch a producer id never reaches: the id moves to a fresh producer id at epoch 0 first.
MAX_EPOCH = 32767
#: Transactional ids of the coordinators' own fencing (handled by the controller).
RESERVED_PREFIX = "__strom_"

TopicPartition = tuple[str, int]


class TxnState(Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def completed(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def committing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)


@dataclass(frozen=True)
class TxnMetadata:
    """Everything the coordinator keeps of one transactional id (one record's value)."""

    transactional_id: str
    #: The producer id and epoch the producer uses now (for Ongoing: the transaction's).
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    groups: frozenset[str] = frozenset()
    #: When the open (or ending) transaction began; -1 when none.
    start_ms: int = -1
    last_update_ms: int = 0
    #: The ended transaction (Prepare*/Complete*): its producer id and epoch; -1 otherwise.
    txn_producer_id: int = -1
    txn_epoch: int = -1
    #: The ended transaction was aborted by the coordinator after its timeout.
    aborted_by_timeout: bool = False

    def replace(self, **changes: object) -> TxnMetadata:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class EndAnswer:
    """EndTxn's outcome: the state to persist first (None: nothing to write) and the
    (producer id, epoch) to answer."""

    metadata: TxnMetadata | None
    producer_id: int
    producer_epoch: int


class FreshProducerIdNeeded(Exception):
    """The epoch would overflow: call again with a fresh producer id."""


# --- validation ---------------------------------------------------------------------------


def check_transactional_id(transactional_id: str) -> None:
    """INVALID_REQUEST for an empty or reserved (``__strom_``) id."""
    if not transactional_id:
        raise InvalidRequestError("the transactional id is empty")
    if transactional_id.startswith(RESERVED_PREFIX):
        raise InvalidRequestError(
            f"transactional ids starting with {RESERVED_PREFIX!r} are reserved for Strom's "
            "coordinators"
        )


def check_timeout(timeout_ms: int, max_timeout_ms: int) -> None:
    """INVALID_TRANSACTION_TIMEOUT unless 0 < timeout_ms <= transaction.max.timeout.ms."""
    if timeout_ms <= 0 or timeout_ms > max_timeout_ms:
        raise InvalidTransactionTimeoutError(
            f"transaction timeout {timeout_ms} ms is not in (0, {max_timeout_ms}] "
            "(transaction.max.timeout.ms)"
        )


# --- who is asking -------------------------------------------------------------------------

_CURRENT, _ENDED, _TIMED_OUT = "current", "ended", "timed_out"


def _classify(meta: TxnMetadata, producer_id: int, epoch: int) -> str:
    """Whose request this is: the current producer, the producer of the ended transaction (a
    retry), or of the one the coordinator aborted on timeout; raises otherwise."""
    if producer_id == meta.producer_id and epoch == meta.producer_epoch:
        return _CURRENT
    ended = (producer_id, epoch) == (meta.txn_producer_id, meta.txn_epoch)
    if ended and (meta.state.preparing or meta.state.completed):
        return _TIMED_OUT if meta.aborted_by_timeout else _ENDED
    if producer_id == meta.producer_id and epoch > meta.producer_epoch:
        raise InvalidProducerEpochError(
            f"producer epoch {epoch} is above the current {meta.producer_epoch} of "
            f"{meta.transactional_id!r}"
        )
    if producer_id in (meta.producer_id, meta.txn_producer_id):
        raise ProducerFencedError(
            f"producer {producer_id} epoch {epoch} of {meta.transactional_id!r} is fenced by "
            f"epoch {meta.producer_epoch}"
        )
    raise InvalidProducerIdMappingError(
        f"producer id {producer_id} is not the producer id of {meta.transactional_id!r}"
    )


def _abortable(meta: TxnMetadata) -> TransactionAbortableError:
    return TransactionAbortableError(
        f"the transaction of {meta.transactional_id!r} at epoch {meta.txn_epoch} was aborted by "
        f"the coordinator: it exceeded its timeout of {meta.timeout_ms} ms; abort it and begin "
        "a new one"
    )


def _next(producer_id: int, epoch: int, fresh_producer_id: int | None) -> tuple[int, int]:
    if epoch + 1 < MAX_EPOCH:
        return producer_id, epoch + 1
    if fresh_producer_id is None:
        raise FreshProducerIdNeeded
    return fresh_producer_id, 0


# --- transitions ---------------------------------------------------------------------------


def new_transactional_id(
    transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int
) -> TxnMetadata:
    """The first state of an id: a fresh producer id at epoch 0, Empty."""
    return TxnMetadata(transactional_id, producer_id, 0, timeout_ms, TxnState.EMPTY,
                       last_update_ms=now_ms)  # fmt: skip


def init_producer_blocker(
    meta: TxnMetadata, producer_id: int = -1, producer_epoch: int = -1
) -> TxnState | None:
    """What InitProducerId must wait for before it can bump the epoch: ONGOING (abort the
    open transaction first), PREPARE_* (its markers), or None. A given producer id and epoch
    (resuming) must be the producer's own."""
    if producer_id >= 0 and not _unset(producer_id, producer_epoch, meta):
        _classify(meta, producer_id, producer_epoch)
    if meta.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        return meta.state
    return None


def _unset(producer_id: int, producer_epoch: int, meta: TxnMetadata | None) -> bool:
    """(0, 0) is protobuf's default: a request that did not set the fields (-1 means none)
    unless it really is the id's producer."""
    if (producer_id, producer_epoch) != (0, 0):
        return False
    if meta is None:
        return True
    return (meta.producer_id, meta.producer_epoch) != (0, 0) and (
        meta.txn_producer_id,
        meta.txn_epoch,
    ) != (0, 0)


def resumes(producer_id: int, producer_epoch: int, meta: TxnMetadata | None) -> bool:
    """Whether InitProducerId names the caller's producer id and epoch (KIP-360's resume)."""
    return producer_id >= 0 and not _unset(producer_id, producer_epoch, meta)


def init_producer(
    meta: TxnMetadata, timeout_ms: int, now_ms: int, fresh_producer_id: int | None = None
) -> TxnMetadata:
    """InitProducerId on an id with no open transaction: bump the epoch (fencing the previous
    incarnation), forget the ended transaction, Empty."""
    if meta.state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        raise ConcurrentTransactionsError(f"{meta.transactional_id!r} is {meta.state.value}; retry")
    producer_id, epoch = _next(meta.producer_id, meta.producer_epoch, fresh_producer_id)
    return TxnMetadata(meta.transactional_id, producer_id, epoch, timeout_ms, TxnState.EMPTY,
                       last_update_ms=now_ms)  # fmt: skip


def add_partitions(
    meta: TxnMetadata,
    producer_id: int,
    epoch: int,
    partitions: Iterable[TopicPartition],
    groups: Iterable[str],
    *,
    now_ms: int,
) -> TxnMetadata | None:
    """AddPartitionsToTxn / AddOffsetsToTxn: the state with the partitions (and groups) added,
    beginning a transaction when none is open; None when nothing changes."""
    who = _classify(meta, producer_id, epoch)
    if who == _TIMED_OUT:
        raise _abortable(meta)
    if who == _ENDED:
        raise ProducerFencedError(
            f"the transaction of {meta.transactional_id!r} at epoch {epoch} has ended; the "
            f"current epoch is {meta.producer_epoch}"
        )
    if meta.state.preparing:
        raise ConcurrentTransactionsError(
            f"the previous transaction of {meta.transactional_id!r} is still being completed "
            f"({meta.state.value}); retry"
        )
    new_partitions, new_groups = frozenset(partitions), frozenset(groups)
    if meta.state is TxnState.ONGOING:
        if new_partitions <= meta.partitions and new_groups <= meta.groups:
            return None
        return meta.replace(
            partitions=meta.partitions | new_partitions,
            groups=meta.groups | new_groups,
            last_update_ms=now_ms,
        )
    return meta.replace(
        state=TxnState.ONGOING,
        partitions=new_partitions,
        groups=new_groups,
        start_ms=now_ms,
        last_update_ms=now_ms,
        txn_producer_id=-1,
        txn_epoch=-1,
        aborted_by_timeout=False,
    )


def verify_partition(
    meta: TxnMetadata | None, producer_id: int, epoch: int, partition: TopicPartition
) -> BrokerResponseError | None:
    """AddPartitionsToTxn(verify_only): None iff the transaction of exactly (producer id,
    epoch) is Ongoing and holds ``partition``; never changes anything."""
    if meta is None:
        return InvalidTxnStateError(f"no transaction state for producer {producer_id}")
    try:
        who = _classify(meta, producer_id, epoch)
    except (ProducerFencedError, InvalidProducerEpochError) as exc:
        return ProducerFencedError(str(exc))
    except InvalidProducerIdMappingError as exc:
        return InvalidTxnStateError(str(exc))
    if who == _TIMED_OUT:
        return _abortable(meta)
    if who == _ENDED:
        return ProducerFencedError(
            f"the transaction of {meta.transactional_id!r} at epoch {epoch} has ended"
        )
    if meta.state is not TxnState.ONGOING:
        return InvalidTxnStateError(
            f"{meta.transactional_id!r} has no ongoing transaction ({meta.state.value})"
        )
    if partition not in meta.partitions:
        topic, number = partition
        return InvalidTxnStateError(
            f"{topic}-{number} was not added to the transaction of {meta.transactional_id!r}"
        )
    return None


def _prepare(
    meta: TxnMetadata,
    committed: bool,
    now_ms: int,
    fresh_producer_id: int | None,
    *,
    by_timeout: bool,
    keep_epoch: bool = False,
) -> TxnMetadata:
    if keep_epoch:
        producer_id, epoch = meta.producer_id, meta.producer_epoch
    else:
        producer_id, epoch = _next(meta.producer_id, meta.producer_epoch, fresh_producer_id)
    return meta.replace(
        state=TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT,
        producer_id=producer_id,
        producer_epoch=epoch,
        txn_producer_id=meta.producer_id,
        txn_epoch=meta.producer_epoch,
        last_update_ms=now_ms,
        aborted_by_timeout=by_timeout,
    )


def end_txn(
    meta: TxnMetadata,
    producer_id: int,
    epoch: int,
    committed: bool,
    *,
    now_ms: int,
    fresh_producer_id: int | None = None,
    keep_epoch: bool = False,
) -> EndAnswer:
    """EndTxn: Ongoing → Prepare* (persist, then answer the next epoch); a retry of the ended
    transaction gets the same answer; nothing open → success without a write.

    ``keep_epoch`` (a client before KIP-890 part 2): end the transaction without bumping the
    epoch; the answer is the same (producer id, epoch). A transaction the coordinator aborted on
    timeout fences such a client (its epoch was bumped), as Kafka does."""
    who = _classify(meta, producer_id, epoch)
    current = (meta.producer_id, meta.producer_epoch)
    if who == _TIMED_OUT:
        if keep_epoch:
            raise ProducerFencedError(
                f"the transaction of {meta.transactional_id!r} at epoch {epoch} was aborted by "
                f"the coordinator after its timeout of {meta.timeout_ms} ms; the epoch is now "
                f"{meta.producer_epoch}"
            )
        if committed:
            raise _abortable(meta)
        return EndAnswer(None, *current)
    # A retry of the ended transaction; at the current epoch too once one ended without a bump.
    ended_here = meta.state.completed and (meta.txn_producer_id, meta.txn_epoch) == current
    if who == _ENDED or ended_here:
        if meta.state.committing != committed:
            ended = "committed" if meta.state.committing else "aborted"
            raise InvalidTxnStateError(
                f"the transaction of {meta.transactional_id!r} at epoch {epoch} was {ended}"
            )
        return EndAnswer(None, *current)
    if meta.state.preparing:
        raise ConcurrentTransactionsError(
            f"the previous transaction of {meta.transactional_id!r} is still being completed "
            f"({meta.state.value}); retry"
        )
    if meta.state is not TxnState.ONGOING:
        return EndAnswer(None, *current)
    prepared = _prepare(
        meta, committed, now_ms, fresh_producer_id, by_timeout=False, keep_epoch=keep_epoch
    )
    return EndAnswer(prepared, prepared.producer_id, prepared.producer_epoch)


def abort_open(
    meta: TxnMetadata, now_ms: int, fresh_producer_id: int | None = None, *, by_timeout: bool
) -> TxnMetadata:
    """Ongoing → PrepareAbort by the coordinator itself (the transaction timed out, or
    InitProducerId fences it); the epoch is bumped."""
    if meta.state is not TxnState.ONGOING:
        raise InvalidTxnStateError(f"{meta.transactional_id!r} is {meta.state.value}")
    return _prepare(meta, False, now_ms, fresh_producer_id, by_timeout=by_timeout)


def complete(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
    """Prepare* → Complete*: every marker was acknowledged."""
    if not meta.state.preparing:
        raise InvalidTxnStateError(f"{meta.transactional_id!r} is {meta.state.value}")
    state = TxnState.COMPLETE_COMMIT if meta.state.committing else TxnState.COMPLETE_ABORT
    return meta.replace(
        state=state, partitions=frozenset(), groups=frozenset(), start_ms=-1,
        last_update_ms=now_ms,
    )  # fmt: skip


def timed_out(meta: TxnMetadata, now_ms: int) -> bool:
    """An Ongoing transaction older than its timeout."""
    return meta.state is TxnState.ONGOING and now_ms - meta.start_ms > meta.timeout_ms


def expired(meta: TxnMetadata, now_ms: int, expiration_ms: int) -> bool:
    """An id with nothing open, not updated for ``transactional.id.expiration.ms``."""
    idle = meta.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
    return idle and now_ms - meta.last_update_ms > expiration_ms
