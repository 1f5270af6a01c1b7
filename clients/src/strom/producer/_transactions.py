"""The transactional producer's state machine and its calls to the transaction coordinator.

Kafka's ``TransactionManager`` in small (KIP-98, KIP-447, KIP-691, and KIP-890's epoch bump at
the end of every transaction). Every coordinator RPC goes through the gateway, which routes it
to the transactional id's coordinator (``init_transactions`` first waits for one with
``FindCoordinator(key_type=TRANSACTION)``); ``NOT_COORDINATOR`` and the other retriable
answers are retried here with backoff until ``max_block_ms``.

States (``TxnState``)::

    UNINITIALIZED --init_transactions--> READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> COMMITTING --EndTxn ok--> READY
    IN_TRANSACTION --prepare_transaction--> PREPARING --flushed--> STAGED (handed over: final)
    IN_TRANSACTION | ABORTABLE_ERROR --abort_transaction--> ABORTING --EndTxn ok--> READY
    IN_TRANSACTION | COMMITTING --abortable error--> ABORTABLE_ERROR
    any --fatal error--> FATAL_ERROR (the producer is unusable: close it)

Errors are classified as KIP-691 does: ``FATAL_ERRORS`` (fenced by a newer producer with the
same transactional id, an epoch or id the coordinator no longer knows as ours) end the
producer; any other non-retriable error inside a transaction is abortable: the application
calls ``abort_transaction()`` and may run the transaction again. A commit that times out or
meets retriable errors is never turned into an abort: ``commit_transaction()`` raises
``StromTimeoutError`` and calling it again resumes the commit.

Event-loop only, except ``block`` (read by ``send`` in any thread).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from strom.cluster import ClusterClient, translate_errors
from strom.cluster.retry import Backoff
from strom.errors import (
    ConcurrentTransactionsError,
    ConfigurationError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    StromError,
    StromTimeoutError,
    TransactionAbortableError,
    TransactionalIdNotFoundError,
    UnsupportedVersionError,
    for_code,
)
from strom.producer._accumulator import PartitionKey
from strom.producer._idempotence import ProducerIdState
from strom.protocol.v1 import common_pb2, controller_pb2, coordinator_pb2, transaction_pb2
from strom.types import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

__all__ = [
    "FATAL_ERRORS",
    "TransactionAbortedError",
    "TransactionManager",
    "TxnState",
    "is_fatal",
    "transaction_offsets",
]

log = logging.getLogger("strom.producer")

#: First wait after CONCURRENT_TRANSACTIONS (doubling up to retry_backoff_ms).
_CONCURRENT_BACKOFF_S = 0.002

#: Errors after which the producer cannot go on (KIP-691's fatal class): close it. A newer
#: producer with the same transactional id fenced this one, or the coordinator does not know
#: our producer id / timeout any more.
FATAL_ERRORS: tuple[type[StromError], ...] = (
    ProducerFencedError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    TransactionalIdNotFoundError,
    UnsupportedVersionError,
)


class TransactionAbortedError(StromError):
    """A record was not sent because its transaction was aborted (``abort_transaction()``)."""


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    PREPARING = "preparing"
    STAGED = "staged"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


_S = TxnState
#: The states each state may move to (anything may become FATAL_ERROR).
_TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    _S.UNINITIALIZED: frozenset({_S.INITIALIZING}),
    _S.INITIALIZING: frozenset({_S.READY, _S.UNINITIALIZED}),
    _S.READY: frozenset({_S.IN_TRANSACTION}),
    _S.IN_TRANSACTION: frozenset({_S.COMMITTING, _S.ABORTING, _S.ABORTABLE_ERROR, _S.PREPARING}),
    _S.PREPARING: frozenset({_S.STAGED, _S.ABORTABLE_ERROR}),
    _S.STAGED: frozenset(),
    _S.COMMITTING: frozenset({_S.READY, _S.ABORTABLE_ERROR}),
    _S.ABORTING: frozenset({_S.READY}),
    _S.ABORTABLE_ERROR: frozenset({_S.ABORTING}),
    _S.FATAL_ERROR: frozenset(),
}
#: States in which the sender may send the transaction's batches.
_SENDING = frozenset({_S.IN_TRANSACTION, _S.COMMITTING, _S.PREPARING})


def transaction_offsets(
    offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
) -> dict[tuple[str, int], tuple[int, str, int]]:
    """``send_offsets_to_transaction``'s offsets as ``{(topic, partition): (offset, metadata,
    leader epoch)}``; ConfigurationError naming the partition for an offset that is not an
    int >= 0."""
    prepared: dict[tuple[str, int], tuple[int, str, int]] = {}
    for tp, om in offsets.items():
        offset, metadata = (om, "") if isinstance(om, int) else (om.offset, om.metadata)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ConfigurationError(
                f"offset for {tp.topic}-{tp.partition} must be an integer >= 0, got {offset!r}"
            )
        prepared[(tp.topic, tp.partition)] = (offset, metadata or "", -1)
    return prepared


def is_fatal(error: BaseException) -> bool:
    """Whether ``error`` ends the producer (KIP-691), rather than just its transaction."""
    return isinstance(error, FATAL_ERRORS)


class TransactionManager:
    """One transactional id's state, its producer id and epoch, and its coordinator calls."""

    def __init__(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        *,
        cluster: ClusterClient,
        pid: ProducerIdState,
        retry_backoff_ms: int,
        request_timeout_ms: int,
        max_block_ms: int,
    ) -> None:
        self.transactional_id = transactional_id
        self.timeout_ms = transaction_timeout_ms
        self._cluster = cluster
        self.pid = pid
        self._backoff = max(retry_backoff_ms / 1000, 0.01)
        self._request_timeout = request_timeout_ms / 1000
        self.max_block_ms = max_block_ms
        self.state = TxnState.UNINITIALIZED
        #: The transaction coordinator owning the id (FindCoordinator), -1 before init.
        self.coordinator_id = -1
        #: The abortable or fatal error of the current state, if any.
        self.error: BaseException | None = None
        #: What ``send`` raises now (None: sending is allowed).
        self.block: BaseException | None = _not_initialized()
        #: Partitions added to the ongoing transaction (AddPartitionsToTxn answered NONE).
        self.partitions: set[PartitionKey] = set()
        self._to_add: set[PartitionKey] = set()
        self._adding_now: frozenset[PartitionKey] = frozenset()
        self._adding: asyncio.Task[None] | None = None
        #: An AddPartitionsToTxn or AddOffsetsToTxn was sent in this transaction: EndTxn needed.
        self.touched = False
        #: Set by the sender: wake it up, and fail its queued batches with an error.
        self.wakeup: Callable[[], None] = lambda: None
        self.fail_queued: Callable[[BaseException], None] = lambda _e: None

    # -- state ---------------------------------------------------------------------------------

    def _move(self, new: TxnState) -> None:
        if new is not TxnState.FATAL_ERROR and new not in _TRANSITIONS[self.state]:
            raise InvalidTxnStateError(
                f"transactional id {self.transactional_id!r}: cannot go from "
                f"{self.state.value} to {new.value}"
            )
        self.state = new
        if new is TxnState.IN_TRANSACTION:
            self.block = None
        elif new is TxnState.READY:
            self.block = InvalidTxnStateError(
                "send() outside a transaction on a transactional producer: call "
                "begin_transaction() first"
            )
        elif new is TxnState.UNINITIALIZED:
            self.block = _not_initialized()
        elif new is TxnState.ABORTABLE_ERROR:
            self.block = _abortable(self.error)
        elif new is TxnState.FATAL_ERROR:
            self.block = self.error
        elif new is TxnState.STAGED:
            self.block = _staged(self.transactional_id, "send()")
        else:
            self.block = InvalidTxnStateError(
                f"send() while the transaction is {new.value}: wait for it, then "
                "begin_transaction()"
            )

    @property
    def sending(self) -> bool:
        """Whether the sender may send the transaction's batches now."""
        return self.state in _SENDING

    def fail(self, error: BaseException) -> None:
        """An error inside the transaction: fatal or abortable (KIP-691). Queued batches fail
        with it, and nothing more is sent until the transaction is aborted."""
        state = self.state
        if state is TxnState.FATAL_ERROR:
            return
        if is_fatal(error):
            log.error("transactional producer %r fenced or fatal: %s", self.transactional_id, error)
            self.error = error
            self._move(TxnState.FATAL_ERROR)
        elif state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING, TxnState.PREPARING):
            log.warning("transaction of %r must be aborted: %s", self.transactional_id, error)
            self.error = error
            self._move(TxnState.ABORTABLE_ERROR)
        else:
            return  # aborting or already failed: the first error is the one reported
        self.fail_queued(self.block or error)

    def batch_failed(self, error: BaseException) -> None:
        """A batch of the transaction failed for good (not while aborting: expected then)."""
        if self.state is not TxnState.ABORTING:
            self.fail(error)

    def raise_if_fatal(self) -> None:
        if self.state is TxnState.FATAL_ERROR:
            assert self.error is not None
            raise self.error

    def _require(self, what: str, *states: TxnState) -> None:
        self.raise_if_fatal()
        if self.state in states:
            return
        if self.state is TxnState.STAGED:
            raise _staged(self.transactional_id, what)
        if self.state is TxnState.ABORTABLE_ERROR:
            raise _abortable(self.error, what)
        if self.state is TxnState.UNINITIALIZED:
            raise InvalidTxnStateError(f"{what}: call init_transactions() first")
        raise InvalidTxnStateError(
            f"{what} is not allowed while the transactional producer is {self.state.value}"
        )

    # -- the API steps (the producer calls them on its loop) ---------------------------------

    async def init(self) -> None:
        """InitProducerId: a fresh producer id, or the id's next epoch (fencing older
        producers and aborting what they left open)."""
        self._require("init_transactions()", TxnState.UNINITIALIZED)
        self._move(TxnState.INITIALIZING)
        try:
            # Which coordinator owns the id (waiting while none does); the gateway routes
            # every later call there itself.
            found = await self._rpc(
                "FindCoordinator",
                coordinator_pb2.FindCoordinatorRequest(
                    group_id=self.transactional_id, key_type=coordinator_pb2.TRANSACTION
                ),
                "init_transactions() (FindCoordinator)",
            )
        except StromError:
            self._move(TxnState.UNINITIALIZED)
            raise
        self.coordinator_id = found.coordinator.node_id
        request = controller_pb2.InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.timeout_ms,
            producer_id=-1,
            producer_epoch=-1,
        )
        try:
            response = await self._rpc("InitProducerId", request, "init_transactions()")
        except StromError as exc:
            if is_fatal(exc):
                self.error = exc
                self._move(TxnState.FATAL_ERROR)
            else:
                self._move(TxnState.UNINITIALIZED)  # init_transactions() may be called again
            raise
        self.pid.set_id(response.producer_id, response.producer_epoch)
        log.info(
            "transactional id %r: producer id %d epoch %d (coordinator %d)",
            self.transactional_id,
            response.producer_id,
            response.producer_epoch,
            self.coordinator_id,
        )
        self._move(TxnState.READY)

    def begin(self) -> None:
        self._require("begin_transaction()", TxnState.READY)
        self.partitions.clear()
        self._to_add.clear()
        self._adding_now = frozenset()
        self.touched = False
        self._move(TxnState.IN_TRANSACTION)

    def gate(self, ready: list[PartitionKey]) -> list[PartitionKey]:
        """Of the partitions the sender would send now, those added to the transaction; the
        others are added (one AddPartitionsToTxn for all of them) and sent afterwards."""
        if not self.sending:
            return []
        added = self.partitions
        allowed = [pk for pk in ready if pk in added]
        if len(allowed) != len(ready):
            self.add_early(ready)
        return allowed

    def add_early(self, queued: Iterable[PartitionKey]) -> None:
        """Start adding the partitions that have records queued, before their batches are
        ready (linger): the AddPartitionsToTxn round trip overlaps the linger, as Kafka's
        producer does it at send time."""
        if not self.sending:
            return
        added, adding, to_add = self.partitions, self._adding_now, self._to_add
        new = [pk for pk in queued if pk not in added and pk not in adding and pk not in to_add]
        if not new:
            return
        to_add.update(new)
        if self._adding is None or self._adding.done():
            self._adding = asyncio.ensure_future(self._add_partitions())

    async def _add_partitions(self) -> None:
        while self._to_add and self.sending:
            batch, self._to_add = sorted(self._to_add), set()
            self._adding_now = frozenset(batch)
            self.touched = True
            request = transaction_pb2.AddPartitionsToTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.pid.producer_id,
                producer_epoch=self.pid.producer_epoch,
                partitions=[common_pb2.TopicPartition(topic=t, partition=p) for t, p in batch],
            )
            try:
                await self._rpc(
                    "AddPartitionsToTxn", request, "AddPartitionsToTxn", check=_add_result_error
                )
            except StromError as exc:
                self._adding_now = frozenset()
                self.fail(exc)
                return
            self.partitions.update(batch)
            self._adding_now = frozenset()
            self.wakeup()

    def stop_adding(self) -> None:
        """Give up on an AddPartitionsToTxn in flight (the transaction is being aborted)."""
        self._to_add.clear()
        self._adding_now = frozenset()
        if self._adding is not None and not self._adding.done():
            self._adding.cancel()

    async def wait_adding(self) -> None:
        """Until no AddPartitionsToTxn is in flight."""
        task = self._adding
        if task is not None and not task.done():
            await asyncio.gather(task, return_exceptions=True)

    async def add_offsets(
        self, offsets: Mapping[tuple[str, int], tuple[int, str, int]], group: ConsumerGroupMetadata
    ) -> None:
        """``send_offsets_to_transaction``: AddOffsetsToTxn for the group, then
        TxnOffsetCommit of ``offsets`` ({(topic, partition): (offset, metadata, leader
        epoch)}), visible to the group only when the transaction commits."""
        self._require("send_offsets_to_transaction()", TxnState.IN_TRANSACTION)
        try:
            self.touched = True
            await self._rpc(
                "AddOffsetsToTxn",
                transaction_pb2.AddOffsetsToTxnRequest(
                    transactional_id=self.transactional_id,
                    producer_id=self.pid.producer_id,
                    producer_epoch=self.pid.producer_epoch,
                    group_id=group.group_id,
                ),
                f"AddOffsetsToTxn(group {group.group_id!r})",
            )
            request = coordinator_pb2.TxnOffsetCommitRequest(
                transactional_id=self.transactional_id,
                group_id=group.group_id,
                producer_id=self.pid.producer_id,
                producer_epoch=self.pid.producer_epoch,
                generation_id=group.generation_id,
                member_id=group.member_id,
                group_instance_id=group.group_instance_id or "",
                partitions=[
                    coordinator_pb2.OffsetCommitPartition(
                        topic=topic,
                        partition=partition,
                        committed_offset=offset,
                        committed_leader_epoch=epoch,
                        metadata=metadata,
                    )
                    for (topic, partition), (offset, metadata, epoch) in offsets.items()
                ],
            )
            await self._rpc(
                "TxnOffsetCommit",
                request,
                f"TxnOffsetCommit(group {group.group_id!r})",
                check=_partition_result_error,
            )
        except StromError as exc:
            self.fail(exc)
            raise

    def begin_commit(self) -> bool:
        """Enter COMMITTING; False when a commit is already in progress (a retry)."""
        self._require("commit_transaction()", TxnState.IN_TRANSACTION, TxnState.COMMITTING)
        if self.state is TxnState.COMMITTING:
            return False
        self._move(TxnState.COMMITTING)
        return True

    def begin_prepare(self) -> None:
        """Enter PREPARING (again after a timed-out flush): no new records; those queued
        are sent."""
        self._require("prepare_transaction()", TxnState.IN_TRANSACTION, TxnState.PREPARING)
        if self.state is TxnState.IN_TRANSACTION:
            self._move(TxnState.PREPARING)

    def staged(self) -> tuple[int, int]:
        """Hand the open transaction over (PREPARING -> STAGED): its (producer id, epoch).
        Nothing is sent to the coordinator: the transaction stays open there until whoever
        holds the identity commits or aborts it, or its timeout aborts it."""
        self._require("prepare_transaction()", TxnState.PREPARING)
        self._move(TxnState.STAGED)
        return self.pid.producer_id, self.pid.producer_epoch

    def begin_abort(self) -> bool:
        """Enter ABORTING; False when there is no transaction to abort."""
        self.raise_if_fatal()
        if self.state is TxnState.STAGED:
            raise _staged(self.transactional_id, "abort_transaction()")
        if self.state in (TxnState.READY, TxnState.ABORTING):
            return self.state is TxnState.ABORTING
        if self.state is TxnState.COMMITTING:
            raise InvalidTxnStateError(
                "abort_transaction() while a commit is in progress: the commit may already be "
                "decided; call commit_transaction() again to complete it"
            )
        self._require("abort_transaction()", TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR)
        self._move(TxnState.ABORTING)
        return True

    async def end(self, *, commit: bool) -> None:
        """EndTxn, retried on retriable errors and timeouts (until ``max_block_ms``); on
        success the next transaction uses the answer's producer id and epoch (sequences
        restart at 0). A commit is never turned into an abort."""
        what = "commit_transaction()" if commit else "abort_transaction()"
        if self.touched:
            request = transaction_pb2.EndTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.pid.producer_id,
                producer_epoch=self.pid.producer_epoch,
                committed=commit,
            )
            try:
                response = await self._rpc("EndTxn", request, what)
            except StromTimeoutError:
                raise  # still COMMITTING / ABORTING: calling it again resumes
            except StromError as exc:
                if commit and not is_fatal(exc) and not isinstance(exc, InvalidTxnStateError):
                    self.fail(exc)  # e.g. TRANSACTION_ABORTABLE: the coordinator aborted it
                else:
                    self.error = exc
                    self._move(TxnState.FATAL_ERROR)
                    self.fail_queued(exc)
                raise
            if (response.producer_id, response.producer_epoch) != (
                self.pid.producer_id,
                self.pid.producer_epoch,
            ):
                self.pid.set_id(response.producer_id, response.producer_epoch)
        self.partitions.clear()
        self._to_add.clear()
        self._adding_now = frozenset()
        self.touched = False
        self.error = None
        self._move(TxnState.READY)

    # -- coordinator calls ---------------------------------------------------------------------

    async def _rpc(
        self,
        method: str,
        request: Any,
        what: str,
        *,
        check: Callable[[Any], StromError | None] | None = None,
    ) -> Any:
        """One coordinator RPC through the gateway, asked again after retriable errors
        (transport, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS,
        ...) with backoff, until ``max_block_ms``; raises the first non-retriable error."""
        deadline = time.monotonic() + self.max_block_ms / 1000
        backoff = Backoff(max(self._backoff, 0.001), max(self._backoff, 1.0))
        # The previous transaction's markers are being written: done in a few ms, so a short
        # backoff (Kafka uses 20 ms) instead of retry_backoff_ms per commit.
        concurrent = Backoff(
            max(min(_CONCURRENT_BACKOFF_S, self._backoff), 0.001), max(self._backoff, 0.001)
        )
        last: StromError | None = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StromTimeoutError(
                    f"{what} for transactional id {self.transactional_id!r} did not complete "
                    f"within max_block_ms ({self.max_block_ms} ms)"
                    + (f"; last error: {last}" if last is not None else "")
                )
            try:
                with translate_errors(self._cluster.gateway_address):
                    response = await getattr(self._cluster.gateway, method)(
                        request, timeout=min(self._request_timeout, left)
                    )
                error = _top_error(response) or (check(response) if check is not None else None)
            except StromError as exc:
                error = exc
            if error is None:
                return response
            if not error.retriable:
                raise error
            last = error
            log.debug("%s: %s; retrying", what, error)
            wait = (
                concurrent if isinstance(error, ConcurrentTransactionsError) else backoff
            ).next()
            await asyncio.sleep(min(wait, max(deadline - time.monotonic(), 0)))


def _top_error(response: Any) -> StromError | None:
    code = getattr(response, "error_code", 0)
    if not code:
        return None
    return for_code(code, response.error_message or common_pb2.ErrorCode.Name(code))


def _add_result_error(response: transaction_pb2.AddPartitionsToTxnResponse) -> StromError | None:
    return _first_error(response.results)


def _partition_result_error(response: Any) -> StromError | None:
    return _first_error(response.partitions)


def _first_error(results: Iterable[Any]) -> StromError | None:
    """The first per-partition error, a non-retriable one before any retriable one."""
    found: StromError | None = None
    for r in results:
        if r.error_code:
            message = r.error_message or common_pb2.ErrorCode.Name(r.error_code)
            error = for_code(r.error_code, f"{r.topic}-{r.partition}: {message}")
            if not error.retriable:
                return error
            found = found or error
    return found


def _not_initialized() -> InvalidTxnStateError:
    return InvalidTxnStateError(
        "send() on a transactional producer before init_transactions() and begin_transaction()"
    )


def _staged(transactional_id: str, what: str) -> InvalidTxnStateError:
    return InvalidTxnStateError(
        f"{what}: the transaction of {transactional_id!r} was handed over by "
        "prepare_transaction(); this producer cannot send, begin, commit or abort any more "
        "(commit or abort the staged transaction through Admin, then close the producer)"
    )


def _abortable(error: BaseException | None, what: str = "send()") -> TransactionAbortableError:
    abortable = TransactionAbortableError(
        f"{what}: the transaction failed and must be aborted (abort_transaction()): {error}"
    )
    abortable.__cause__ = error
    return abortable
