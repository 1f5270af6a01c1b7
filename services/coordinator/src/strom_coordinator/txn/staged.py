"""The decision state of staged commits: pure functions, no I/O.

A *staged* transaction is one its producer left open and handed over
(``Producer.prepare_transaction``): (transactional id, producer id, epoch). A *commit id*
names a series of decisions, each committing a set of staged transactions (its *members*) at
a growing *sequence* (a Spark query and its batch ids). One record per commit id, in the
``__transaction_state`` partition of the commit id (``records.staged_commit_key``), holds the
last decision::

    (none) | Committed  --CommitStagedTransactions, new sequence-->  Committing
    Committing  --every member committed or known lost-->  Committed (failed_members)

A request is *new* (sequence above the stored one), a *retry* (the stored sequence with the
same members: answered like the first call), or *replayed* (anything else at or below the
stored sequence: nothing is committed, the caller aborts its members).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from dataclasses import dataclass

from strom.errors import (
    BrokerResponseError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTxnStateError,
    ProducerFencedError,
    StromError,
    TransactionAbortableError,
    TransactionalIdNotFoundError,
)
from strom.types import StagedTransaction
from strom_coordinator.txn.state import RESERVED_PREFIX, TxnMetadata, TxnState

__all__ = [
    "Decision",
    "MemberOutcome",
    "RequestKind",
    "StagedState",
    "check_request",
    "classify",
    "decide",
    "finish",
    "member_outcome",
    "member_problem",
    "member_text",
]

#: Members per decision (one Spark write's tasks; a bound on the record's size).
MAX_MEMBERS = 10_000
#: Bytes of caller metadata per decision.
MAX_METADATA_BYTES = 64 * 1024


class StagedState(enum.Enum):
    COMMITTING = "Committing"
    COMMITTED = "Committed"


class RequestKind(enum.Enum):
    NEW = "new"
    RETRY = "retry"
    REPLAYED = "replayed"


class MemberOutcome(enum.Enum):
    COMMITTED = "committed"
    FAILED = "failed"
    RETRY = "retry"


@dataclass(frozen=True)
class Decision:
    """The last decision of a commit id (one record's value)."""

    commit_id: str
    sequence: int
    state: StagedState
    members: tuple[StagedTransaction, ...]
    metadata: bytes = b""
    failed_members: tuple[StagedTransaction, ...] = ()
    last_update_ms: int = 0


def member_text(member: StagedTransaction) -> str:
    return (
        f"staged transaction {member.transactional_id!r} (producer id {member.producer_id} "
        f"epoch {member.producer_epoch})"
    )


def check_request(
    commit_id: str, sequence: int, members: Sequence[StagedTransaction], metadata: bytes
) -> None:
    """INVALID_REQUEST for an empty or reserved commit id, a negative sequence, a member
    without a transactional id or named twice, too many members or too much metadata."""
    if not commit_id:
        raise InvalidRequestError("the commit id is empty")
    if commit_id.startswith(RESERVED_PREFIX):
        raise InvalidRequestError(f"commit ids starting with {RESERVED_PREFIX!r} are reserved")
    if sequence < 0:
        raise InvalidRequestError(f"sequence {sequence} of {commit_id!r} is negative")
    if len(members) > MAX_MEMBERS:
        raise InvalidRequestError(
            f"{len(members)} members for {commit_id!r}: at most {MAX_MEMBERS} per decision"
        )
    if len(metadata) > MAX_METADATA_BYTES:
        raise InvalidRequestError(
            f"metadata of {commit_id!r} is {len(metadata)} bytes: at most {MAX_METADATA_BYTES}"
        )
    seen: set[str] = set()
    for member in members:
        tid = member.transactional_id
        if not tid or tid.startswith(RESERVED_PREFIX):
            raise InvalidRequestError(f"invalid member transactional id {tid!r} of {commit_id!r}")
        if member.producer_id < 0 or member.producer_epoch < 0:
            raise InvalidRequestError(f"{member_text(member)}: no producer id and epoch")
        if tid in seen:
            raise InvalidRequestError(f"transactional id {tid!r} is named twice in {commit_id!r}")
        seen.add(tid)


def classify(
    stored: Decision | None, sequence: int, members: Sequence[StagedTransaction]
) -> RequestKind:
    """Whether a request decides anew, repeats the stored decision, or replays an old one."""
    if stored is None or sequence > stored.sequence:
        return RequestKind.NEW
    if sequence == stored.sequence and frozenset(members) == frozenset(stored.members):
        return RequestKind.RETRY
    return RequestKind.REPLAYED


def member_problem(
    member: StagedTransaction, meta: TxnMetadata | None
) -> InvalidTxnStateError | None:
    """None when ``member`` can be committed: its id is Ongoing at exactly its producer id
    and epoch, or has no transaction open at exactly them (a staged transaction that wrote
    nothing: committing it is a no-op). Otherwise INVALID_TXN_STATE naming the member."""
    if meta is None:
        return InvalidTxnStateError(
            f"{member_text(member)} is unknown to its coordinator (expired or never initialised)"
        )
    same = (meta.producer_id, meta.producer_epoch) == (member.producer_id, member.producer_epoch)
    idle = meta.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
    if same and (meta.state is TxnState.ONGOING or idle):
        return None
    return InvalidTxnStateError(
        f"{member_text(member)} is not open: its coordinator has it {meta.state.value} at "
        f"producer id {meta.producer_id} epoch {meta.producer_epoch}"
        + (" (aborted on its timeout)" if meta.aborted_by_timeout else "")
    )


def decide(
    commit_id: str,
    sequence: int,
    members: Sequence[StagedTransaction],
    metadata: bytes,
    now_ms: int,
) -> Decision:
    """The decision record written before any member is committed."""
    return Decision(
        commit_id=commit_id,
        sequence=sequence,
        state=StagedState.COMMITTING,
        members=tuple(members),
        metadata=bytes(metadata),
        last_update_ms=now_ms,
    )


#: EndTxn(commit) answers saying the member can never be committed.
_LOST: tuple[type[BrokerResponseError], ...] = (
    TransactionAbortableError,  # aborted on its timeout
    InvalidTxnStateError,  # ended as aborted
    ProducerFencedError,  # fenced (InitProducerId aborted it)
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    TransactionalIdNotFoundError,  # expired
)


def member_outcome(error: StromError | None) -> MemberOutcome:
    """What an EndTxn(commit) answer means for a member: committed (a retry of a committed
    one is success too, KIP-890), lost for good, or to be asked again (retriable)."""
    if error is None:
        return MemberOutcome.COMMITTED
    if isinstance(error, _LOST):
        return MemberOutcome.FAILED
    if error.retriable:
        return MemberOutcome.RETRY
    return MemberOutcome.FAILED


def finish(decision: Decision, failed: Sequence[StagedTransaction], now_ms: int) -> Decision:
    """Committing -> Committed once every member is committed or lost (``failed``)."""
    if decision.state is not StagedState.COMMITTING:
        raise InvalidTxnStateError(f"commit {decision.commit_id!r} is {decision.state.value}")
    return dataclasses.replace(
        decision,
        state=StagedState.COMMITTED,
        failed_members=tuple(failed),
        last_update_ms=now_ms,
    )
