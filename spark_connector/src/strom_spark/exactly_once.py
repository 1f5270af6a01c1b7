"""Exactly-once writes: transactional ids of tasks, and the driver's one decision per write.

A task writes in a transaction of its own and *stages* it (``Producer.prepare_transaction``):
the records are in the log, invisible to read_committed readers, and the transaction's
identity travels to the driver in the task's commit message. The driver commits every
reported member as ONE decision of the transaction coordinator
(``Admin.commit_staged_transactions``): the coordinator records the decision and then drives
each member to its commit itself, so the output becomes visible all at once even if the driver
dies right after asking. Whatever else is open under the write's transactional ids (attempts
that failed, speculative duplicates, tasks of a lost executor) is aborted, and producers still
alive under them are fenced. ``docs/spark.md`` lists the failure cases and why each is safe.

Transactional ids (``P`` is ``transactionalIdPrefix``):

* batch write ``W`` (a uuid made on the driver when the writer is built): tasks
  ``{P}-{W}-{partition}-{taskAttemptId}``, decision ``{P}-{W}`` at sequence 0;
* streaming: tasks ``{P}-{batchId}-{run}-{partition}-{taskAttemptId}`` (``run``: 8 hex digits
  new for each start of the query), decision ``P`` at sequence ``batchId``, so a batch id
  replayed after a restart is recognised by the coordinator and its new output aborted.

The ids of one prefix are recognised by a full match of that pattern, never by the text prefix
alone, so a query with prefix ``orders`` never touches one with prefix ``orders-eu``.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import time
import uuid
from collections.abc import Callable, Iterable, Sequence

from pyspark import TaskContext

from strom import Admin, Producer
from strom.errors import StromError
from strom.types import StagedCommit, StagedTransaction
from strom_spark.options import SinkOptions

__all__ = [
    "StagedWriteError",
    "abort_micro_batch",
    "abort_write",
    "batch_commit_id",
    "commit_micro_batch",
    "commit_write",
    "new_run_token",
    "new_write_id",
    "streaming_task_id",
    "task_context",
    "write_task_id",
]

log = logging.getLogger("strom_spark")

#: Spark's local property holding the micro-batch id (MicroBatchExecution.BATCH_ID_KEY) and
#: the query id (StreamExecution.QUERY_ID_KEY, stable across restarts from a checkpoint).
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"

#: Open (nothing decided) and initialised-but-idle states of a transactional id.
_OPEN = "Ongoing"
_IDLE = "Empty"


class StagedWriteError(RuntimeError):
    """The write's decision could not be made or applied (the message says which and why)."""


def new_write_id() -> str:
    """``W`` of a batch write: 32 hex digits."""
    return uuid.uuid4().hex


def new_run_token() -> str:
    """The ``run`` part of a streaming query's task ids (unique per start of the query)."""
    return secrets.token_hex(4)


def task_context() -> tuple[int, int, str | None, str | None]:
    """This task's (partition id, task attempt id, batch id, query id) from Spark's
    ``TaskContext``. Outside a Spark task (no context): partition 0 and a random attempt id,
    which keeps ids unique; batch and query ids are then unknown."""
    context = TaskContext.get()
    if context is None:
        return 0, secrets.randbits(62), None, None
    return (
        context.partitionId(),
        context.taskAttemptId(),
        context.getLocalProperty(BATCH_ID_PROPERTY),
        context.getLocalProperty(QUERY_ID_PROPERTY),
    )


def batch_commit_id(prefix: str, write_id: str) -> str:
    return f"{prefix}-{write_id}"


def write_task_id(prefix: str, write_id: str, partition: int, attempt: int) -> str:
    return f"{batch_commit_id(prefix, write_id)}-{partition}-{attempt}"


def streaming_task_id(
    prefix: str, batch_id: str | None, run: str, partition: int, attempt: int
) -> str:
    batch = batch_id if batch_id is not None and batch_id.isdigit() else "x"
    return f"{prefix}-{batch}-{run}-{partition}-{attempt}"


def _write_pattern(prefix: str, write_id: str) -> re.Pattern[str]:
    return re.compile(rf"{re.escape(batch_commit_id(prefix, write_id))}-\d+-\d+")


def _streaming_pattern(prefix: str) -> re.Pattern[str]:
    return re.compile(rf"{re.escape(prefix)}-(\d+|x)-[0-9a-f]{{8}}-\d+-\d+")


def _members(messages: Iterable[object]) -> list[StagedTransaction]:
    found = []
    for message in messages:
        staged = getattr(message, "staged", None)
        if isinstance(staged, StagedTransaction):
            found.append(staged)
    return found


def _query_id(messages: Iterable[object]) -> str | None:
    ids = {getattr(m, "query_id", None) for m in messages} - {None}
    return next(iter(ids)) if len(ids) == 1 else None  # type: ignore[return-value]


def _admin(options: SinkOptions) -> Admin:
    return Admin(
        options.bootstrap_servers,
        client_id="strom-spark-driver",
        **options.security,  # type: ignore[arg-type]
    )


def _ids(commit: StagedCommit | None) -> set[str]:
    """The transactional ids of ``commit``'s members (none without a decision)."""
    return {m.transactional_id for m in commit.members} if commit is not None else set()


def _abort_undecided(
    admin: Admin, commit_id: str, messages: Sequence[object]
) -> StagedCommit | None:
    """Abort the reported staged transactions that are not members of ``commit_id``'s last
    decision (never take back a decision); returns that decision (None: none yet)."""
    decided = admin.describe_staged_commit(commit_id)
    keep = _ids(decided)
    admin.abort_staged_transactions(
        [m for m in _members(messages) if m.transactional_id not in keep]
    )
    return decided


def _names(members: Iterable[StagedTransaction]) -> str:
    return ", ".join(sorted(m.transactional_id for m in members))


def _check_applied(commit: StagedCommit, what: str) -> None:
    if commit.failed_members:
        raise StagedWriteError(
            f"{what}: decided, but {len(commit.failed_members)} staged transaction(s) could not "
            f"be committed any more ({_names(commit.failed_members)}): they expired before the "
            "decision reached them, so their rows are lost (make transactionTimeoutMs longer "
            "than the longest write)"
        )


def _wait_committed(admin: Admin, commit: StagedCommit, seconds: float = 30.0) -> StagedCommit:
    """The decision once the coordinator has committed every member (it drives them itself,
    also after a failover); the last seen record when that takes longer than ``seconds``."""
    deadline = time.monotonic() + seconds
    while commit.state != "Committed" and time.monotonic() < deadline:
        time.sleep(0.05)
        commit = admin.describe_staged_commit(commit.commit_id) or commit
    return commit


def _fence(options: SinkOptions, transactional_id: str) -> None:
    """Bump the epoch of an id with no open transaction, so that a producer still alive under
    it (a task the driver gave up on) fails at its next call instead of opening one later."""
    with Producer(
        options.bootstrap_servers,
        transactional_id=transactional_id,
        transaction_timeout_ms=options.transaction_timeout_ms,
        client_id="strom-spark-driver",
        **options.security,  # type: ignore[arg-type]
    ) as producer:
        producer.init_transactions()


def _sweep(
    admin: Admin,
    options: SinkOptions,
    listed_prefix: str,
    *,
    ours: Callable[[str], object],
    fence: Callable[[str], bool],
    keep: set[str],
) -> int:
    """Abort every open transaction of ``ours`` ids not in ``keep`` and fence the idle ones
    ``fence`` selects; returns how many ids were ended or fenced. Failures are logged (the
    transactions' own timeout still ends them)."""
    done = 0
    try:
        listed = admin.list_transactions(
            states=[_OPEN, _IDLE], transactional_id_prefix=listed_prefix
        )
    except StromError as exc:
        log.warning("strom exactly-once: listing %s* failed, orphans left: %s", listed_prefix, exc)
        return 0
    for txn in listed:
        tid = txn.transactional_id
        if tid in keep or not ours(tid):
            continue
        try:
            if txn.state == _OPEN:
                admin.abort_transaction(tid)
            elif fence(tid):
                _fence(options, tid)
            else:
                continue
            done += 1
        except StromError as exc:
            log.warning("strom exactly-once: could not end orphan %s: %s", tid, exc)
    return done


def _sweep_write(admin: Admin, options: SinkOptions, write_id: str, keep: set[str]) -> None:
    """End every transaction of batch write ``write_id`` outside ``keep``: abort the open
    ones, fence the idle ones."""
    prefix = options.transactional_id_prefix
    commit_id = batch_commit_id(prefix, write_id)
    pattern = _write_pattern(prefix, write_id)
    _sweep(admin, options, f"{commit_id}-", ours=pattern.fullmatch, fence=lambda _: True, keep=keep)


# -- batch writes ------------------------------------------------------------------------------


def commit_write(options: SinkOptions, write_id: str, messages: Sequence[object]) -> None:
    """The job's commit: every task's staged transaction as one decision, then the rest of
    the write's ids aborted or fenced."""
    prefix = options.transactional_id_prefix
    commit_id = batch_commit_id(prefix, write_id)
    members = _members(messages)
    with _admin(options) as admin:
        keep = {m.transactional_id for m in members}
        if members:
            metadata = json.dumps({"write_id": write_id, "tasks": len(members)}).encode()
            result = admin.commit_staged_transactions(commit_id, 0, members, metadata)
            if result.already_committed and set(result.commit.members) != set(members):
                admin.abort_staged_transactions(members)
                raise StagedWriteError(
                    f"write {commit_id} was decided already with other members; nothing of "
                    "this commit was made visible"
                )
            commit = _wait_committed(admin, result.commit)
            keep |= _ids(commit)
            _check_applied(commit, f"write {commit_id}")
        _sweep_write(admin, options, write_id, keep)


def abort_write(options: SinkOptions, write_id: str, messages: Sequence[object]) -> None:
    """The job's abort: the reported staged transactions and every other open one of the
    write are aborted, idle ids fenced. A write decided already (the commit's answer was lost)
    keeps its decision: only what is not part of it is aborted."""
    commit_id = batch_commit_id(options.transactional_id_prefix, write_id)
    with _admin(options) as admin:
        decided = _abort_undecided(admin, commit_id, messages)
        if decided:
            log.warning("strom exactly-once: write %s aborted after its decision", commit_id)
        _sweep_write(admin, options, write_id, _ids(decided))


# -- streaming writes --------------------------------------------------------------------------


def _metadata(commit: StagedCommit) -> dict[str, object]:
    try:
        parsed = json.loads(commit.metadata or b"{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def commit_micro_batch(options: SinkOptions, batch_id: int, messages: Sequence[object]) -> bool:
    """Commit micro-batch ``batch_id``'s staged transactions as decision ``batch_id`` of the
    query's prefix; returns False when the batch had been committed already (a replay after a
    restart: this run's output of it is aborted instead). Then the query's orphans (open
    transactions of earlier runs and attempts) are aborted."""
    prefix = options.transactional_id_prefix
    members = _members(messages)
    query_id = _query_id(messages)
    committed = True
    with _admin(options) as admin:
        if members:
            metadata = json.dumps({"query_id": query_id, "batch_id": batch_id}).encode()
            result = admin.commit_staged_transactions(prefix, batch_id, members, metadata)
            decided: StagedCommit | None = result.commit
            if result.already_committed and set(result.commit.members) != set(members):
                committed = False
                admin.abort_staged_transactions(members)
                _check_same_query(prefix, result.commit, query_id, batch_id)
                log.info(
                    "strom exactly-once: batch %d of %s was committed already (last decided "
                    "%d): this run's output of it is aborted",
                    batch_id,
                    prefix,
                    result.commit.sequence,
                )
        else:
            decided = admin.describe_staged_commit(prefix)
        if decided is not None:
            decided = _wait_committed(admin, decided)
            if committed and members:
                _check_applied(decided, f"batch {batch_id} of {prefix}")
        _sweep_query(admin, options, batch_id, decided)
    return committed


def _check_same_query(
    prefix: str, commit: StagedCommit, query_id: str | None, batch_id: int
) -> None:
    stored = _metadata(commit).get("query_id")
    if query_id and stored and stored != query_id:
        raise StagedWriteError(
            f"transactionalIdPrefix {prefix!r} belongs to another query ({stored}, last batch "
            f"{commit.sequence}); this query ({query_id}) is at batch {batch_id} and its output "
            "would be skipped as written already: give each query (each checkpoint) its own "
            "transactionalIdPrefix"
        )


def _sweep_query(
    admin: Admin, options: SinkOptions, batch_id: int | None, decided: StagedCommit | None
) -> None:
    """Abort the query's open transactions outside the last decision, and fence the idle ids
    of ``batch_id``; nothing while the last decision is still being applied."""
    prefix = options.transactional_id_prefix
    if decided is not None and decided.state != "Committed":
        log.warning("strom exactly-once: %s still applying its last decision: no sweep", prefix)
        return
    keep = _ids(decided)
    pattern = _streaming_pattern(prefix)
    current = str(batch_id)

    def this_batch(tid: str) -> bool:
        match = pattern.fullmatch(tid)
        return batch_id is not None and match is not None and match.group(1) == current

    _sweep(admin, options, f"{prefix}-", ours=pattern.fullmatch, fence=this_batch, keep=keep)


def abort_micro_batch(options: SinkOptions, batch_id: int, messages: Sequence[object]) -> None:
    """A failed micro-batch: its reported staged transactions and the query's other open
    ones are aborted (never those of the last decision)."""
    with _admin(options) as admin:
        decided = _abort_undecided(admin, options.transactional_id_prefix, messages)
        _sweep_query(admin, options, batch_id, decided)
