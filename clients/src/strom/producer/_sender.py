"""The sender: the producer's I/O loop on the event loop.

It drains ready batches from the accumulator, groups them by partition leader and sends them
over one ProduceStream per storage node (pipelined: the node appends requests in arrival
order and answers in the same order), at most ``max_in_flight`` requests per node and one
batch per partition per request. Responses complete batches; errors are handled here:

* retriable (``error.retriable``): the batch goes back to the front of its partition's queue
  after ``retry_backoff_ms``, while ``retries`` and ``delivery_timeout_ms`` allow. The
  partition sends nothing else until all its in-flight batches have answered, so retried
  batches go out again in their original order. NOT_LEADER_OR_FOLLOWER, unknown leader and
  network errors also mark the topic's metadata stale, so the retry goes to the new leader.
* not retriable: the batch's records fail at once.
* idempotence: see ``strom.producer._idempotence``.
* transactions (``txn`` set): a partition's batches go out only once the transaction
  coordinator added the partition to the ongoing transaction (``TransactionManager.gate``);
  Produce requests carry the transactional id; a batch failing for good makes the transaction
  abortable (or the producer fatal when fenced) instead of resetting the producer id; while
  aborting, failed batches are not retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections import deque

from strom.cluster import ClusterClient, translate_errors
from strom.cluster.retry import Backoff
from strom.errors import (
    DuplicateSequenceNumberError,
    LeaderNotAvailableError,
    NetworkExceptionError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceNumberError,
    RequestTimedOutError,
    StromError,
    StromTimeoutError,
    UnknownProducerIdError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    for_code,
)
from strom.producer._accumulator import Accumulator, PartitionKey
from strom.producer._batch import ProducerBatch
from strom.producer._idempotence import ProducerIdState, restamp
from strom.producer._transactions import TransactionManager, TxnState
from strom.producer.config import ProducerConfig
from strom.protocol.v1 import controller_pb2, storage_pb2
from strom.types import TopicPartition

__all__ = ["Sender"]

log = logging.getLogger("strom.producer")

# Errors after which the cached leader is probably wrong.
_METADATA_ERRORS = (
    NotLeaderOrFollowerError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
    NetworkExceptionError,
)
# Never-sent batches of one partition coalesced into one request entry, at most.
_MAX_BATCHES_PER_ENTRY = 64
# How often queued batches are checked against delivery_timeout_ms.
_EXPIRY_CHECK_S = 0.1


class _Request:
    """One in-flight ProduceRequest: per partition entry, the batches it carries in order."""

    __slots__ = ("correlation_id", "deadline", "groups")

    def __init__(
        self, correlation_id: int, groups: list[list[ProducerBatch]], deadline: float
    ) -> None:
        self.correlation_id = correlation_id
        self.groups = groups
        self.deadline = deadline


class NodeStream:
    """One ProduceStream to a storage node, with its in-flight requests in order."""

    def __init__(self, sender: Sender, node: int) -> None:
        self.sender = sender
        self.node = node
        self.address = sender.cluster.node_address(node)
        self.pending: deque[_Request] = deque()
        self.broken = False
        self._queue: asyncio.Queue[storage_pb2.ProduceRequest] = asyncio.Queue()
        stub = sender.cluster.storage(node)
        # Written from a task of ours rather than through a request iterator: grpc.aio cannot
        # close an async generator suspended in its own await when the call dies, and logs it.
        self._call = stub.ProduceStream()
        self._writer = asyncio.ensure_future(self._write())
        self._reader = asyncio.ensure_future(self._read())

    async def _write(self) -> None:
        # A failed call is the reader's to report.
        with contextlib.suppress(StromError, asyncio.InvalidStateError), translate_errors():
            while True:
                await self._call.write(await self._queue.get())

    def send(self, request: storage_pb2.ProduceRequest, entry: _Request) -> None:
        self.pending.append(entry)
        self._queue.put_nowait(request)

    async def _read(self) -> None:
        error: StromError | None = None
        try:
            with translate_errors(self.address):
                async for response in self._call:
                    pending = self.pending
                    if not pending or response.correlation_id != pending[0].correlation_id:
                        error = NetworkExceptionError(
                            f"{self.address}: produce response {response.correlation_id} "
                            "does not match the oldest request in flight"
                        )
                        self._call.cancel()
                        return
                    entry = pending.popleft()
                    self.sender.on_response(self, entry, response)
            error = NetworkExceptionError(f"{self.address}: produce stream ended")
        except UnknownServerError as exc:
            # Partition errors travel inside responses; a stream that dies without a strom
            # error code (INTERNAL/UNKNOWN on a reset connection) is a transport failure,
            # worth a retry like UNAVAILABLE.
            error = NetworkExceptionError(str(exc))
        except StromError as exc:
            error = exc
        except asyncio.CancelledError:
            error = NetworkExceptionError(f"{self.address}: produce stream cancelled")
        finally:
            self.broken = True
            self._writer.cancel()
            failed, self.pending = self.pending, deque()
            self.sender.on_stream_broken(self, failed, error)

    def abort(self, error: StromError) -> None:
        """Give up on the stream (request timeout, close): in-flight requests fail with
        ``error``."""
        if self.broken:
            return
        self.broken = True
        failed, self.pending = self.pending, deque()
        self._call.cancel()
        self._writer.cancel()
        self.sender.on_stream_broken(self, failed, error)


class Sender:
    """Drains the accumulator to the partition leaders; completes or retries batches."""

    def __init__(
        self, config: ProducerConfig, cluster: ClusterClient, accumulator: Accumulator
    ) -> None:
        self.config = config
        self.cluster = cluster
        self.acc = accumulator
        self.idempotent = bool(config.enable_idempotence)
        self.pid = ProducerIdState()
        self.fatal: BaseException | None = None
        self.txn: TransactionManager | None = None
        self._transactional_id = config.transactional_id or ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._wake_pending = False
        self._task: asyncio.Task[None] | None = None
        self._streams: dict[int, NodeStream] = {}
        self._inflight: dict[PartitionKey, int] = {}
        self._inflight_node: dict[PartitionKey, int] = {}
        self._blocked: set[PartitionKey] = set()
        self._correlation = itertools.count(1)
        self._metadata_task: asyncio.Task[None] | None = None
        self._metadata_after = 0.0
        self._pid_task: asyncio.Task[None] | None = None
        self._retry_backoff = config.retry_backoff_ms / 1000
        self._delivery_timeout = config.delivery_timeout_ms / 1000
        self._request_timeout = config.request_timeout_ms / 1000
        self._stopping = False
        self._expiry_check_at = 0.0
        self._busy = False
        self._idle = asyncio.Event()
        self._busy_poll = max(config.linger_ms / 1000, 0.001)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = _thread_id()
        self._wake = asyncio.Event()
        self.acc.wakeup = self.wakeup
        self.acc.loop = self._loop
        self._task = asyncio.ensure_future(self._run())
        if self.idempotent and self.txn is None:
            self._ensure_pid()  # fetched while the first batch lingers

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def wakeup(self) -> None:
        """Thread-safe: make the loop look at the accumulator again."""
        if self._wake_pending or self._loop is None:
            return
        if _thread_id() == self._loop_thread:
            self._wake_pending = True
            assert self._wake is not None
            self._wake.set()
        elif not self._busy:
            # While requests are in flight the loop drains again at each response and polls
            # at least every linger_ms, so a thread's wake-up (a self-pipe write, and a GIL
            # hand-over per batch) is only needed when the loop is idle.
            self._wake_pending = True
            self._loop.call_soon_threadsafe(self._set_wake)

    def _set_wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _in_flight(self) -> bool:
        return any(stream.pending for stream in self._streams.values())

    async def quiesce(self) -> None:
        """Wait until no request is in flight (with acks=0: until the node answered, so the
        records surely left this process)."""
        while self._in_flight():
            self._idle.clear()
            await self._idle.wait()

    async def stop(self) -> None:
        """Stop the loop; whatever is still queued or in flight fails."""
        self._stopping = True
        error = StromError("the producer was closed before the record was acknowledged")
        for stream in list(self._streams.values()):
            stream.abort(error)
        for task in (self._task, self._metadata_task, self._pid_task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self.fail_all(error)

    def fail_all(self, error: BaseException) -> None:
        for batch in self.acc.take_all():
            self._complete(batch, -1, -1, error)

    def attach(self, txn: TransactionManager) -> None:
        """Make this a transactional producer's sender."""
        self.txn = txn
        txn.wakeup = self.wakeup
        txn.fail_queued = self._txn_failed

    def _txn_failed(self, error: BaseException) -> None:
        assert self.txn is not None
        if self.txn.state is TxnState.FATAL_ERROR:
            self.fatal = error
        self.fail_all(error)

    # -- the loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        assert self._wake is not None and self._loop is not None
        loop = self._loop
        wake = self._wake
        while True:
            self._wake_pending = False
            wake.clear()
            now = time.monotonic()
            try:
                next_at = self._tick(now)
            except Exception:
                log.exception("producer sender loop failed; retrying")
                next_at = now + max(self._retry_backoff, 0.01)
            if next_at is None:
                await wake.wait()
            else:
                handle = loop.call_at(loop.time() + max(0.0, next_at - now), wake.set)
                await wake.wait()
                handle.cancel()

    def _tick(self, now: float) -> float | None:
        """Expire, check request deadlines, drain; returns when to look again by itself."""
        if now >= self._expiry_check_at:
            self._expiry_check_at = now + _EXPIRY_CHECK_S
            for batch in self.acc.take_expired(now, self._delivery_timeout):
                self._fail(batch, _expired(batch, now))
        next_at: float | None = None
        for stream in list(self._streams.values()):
            if stream.pending:
                deadline = stream.pending[0].deadline
                if deadline <= now:
                    stream.abort(
                        RequestTimedOutError(
                            f"{stream.address}: no produce response within "
                            f"{self.config.request_timeout_ms} ms"
                        )
                    )
                else:
                    next_at = _min(next_at, deadline)
        ready_at = self._drain(now)
        next_at = _min(next_at, ready_at)
        self._busy = any(stream.pending for stream in self._streams.values())
        if self._busy:
            next_at = _min(next_at, now + self._busy_poll)
        if self.acc.incomplete:
            # Wake up for delivery timeouts even when nothing else happens.
            next_at = _min(next_at, self._expiry_check_at)
        return next_at

    def _drain(self, now: float) -> float | None:
        ready, next_at = self.acc.ready(now)
        if self.txn is not None:
            self.txn.add_early(self.acc.queued_partitions())
        if not ready:
            return next_at
        if self.idempotent and not self.pid.has_id:
            if self.txn is None:
                self._ensure_pid()
            return next_at
        if self.txn is not None:
            ready = self.txn.gate(ready)
        by_node: dict[int, list[PartitionKey]] = {}
        cluster = self.cluster
        for pk in ready:
            if pk in self._blocked:
                continue
            leader = cluster.cached(TopicPartition(pk[0], pk[1]))
            if leader is None or leader.leader < 0 or not cluster.fresh(pk[0]):
                self._refresh_metadata(now)
                continue
            node = leader.leader
            if self._inflight.get(pk) and (
                self._inflight_node.get(pk) != node or self._unproven(pk)
            ):
                continue  # answers from the old leader (or to the first batch) first
            by_node.setdefault(node, []).append(pk)
        for node, pks in by_node.items():
            self._send_to(node, pks, now)
        return next_at

    def _stream(self, node: int) -> NodeStream | None:
        stream = self._streams.get(node)
        if stream is None or stream.broken:
            try:
                stream = self._streams[node] = NodeStream(self, node)
            except StromError:
                self._refresh_metadata(time.monotonic())
                return None
        return stream

    def _send_to(self, node: int, pks: list[PartitionKey], now: float) -> None:
        stream = self._stream(node)
        if stream is None:
            return
        max_in_flight = self.config.max_in_flight_requests_per_connection
        max_size = self.config.max_request_size
        acks = int(self.config.acks)  # -1, 0 or 1 once checked
        while pks and len(stream.pending) < max_in_flight:
            groups: list[list[ProducerBatch]] = []
            parts: list[storage_pb2.ProducePartitionData] = []
            size = 0
            for pk in list(pks):
                if size and size + self.acc.head_size(pk) > max_size:
                    continue
                batch = self.acc.pop(pk, now)
                if batch is None:
                    pks.remove(pk)
                    continue
                group = [batch]
                retry = batch.attempts > 0
                datas = [self._prepare(batch)]
                size += len(datas[0])
                # A backlog of never-sent batches of the partition travels in one entry (the
                # node appends them as one record set): fewer, larger requests when the
                # sender lags. Retries go alone, so a duplicate never hides a new batch.
                while not retry and len(group) < _MAX_BATCHES_PER_ENTRY:
                    more = self.acc.pop(pk, now, fresh_only=True, max_size=max_size - size)
                    if more is None:
                        break
                    group.append(more)
                    datas.append(self._prepare(more))
                    size += len(datas[-1])
                groups.append(group)
                parts.append(
                    storage_pb2.ProducePartitionData(
                        topic=batch.topic,
                        partition=batch.partition,
                        records=datas[0] if len(datas) == 1 else b"".join(datas),
                    )
                )
                self._inflight[pk] = self._inflight.get(pk, 0) + len(group)
                self._inflight_node[pk] = node
                if self._unproven(pk):
                    pks.remove(pk)  # no second request before the first one's answer
            if not groups:
                break
            correlation_id = next(self._correlation)
            request = storage_pb2.ProduceRequest(
                acks=acks,
                timeout_ms=self.config.request_timeout_ms,
                partitions=parts,
                correlation_id=correlation_id,
                client_id=self.config.client_id,
                transactional_id=self._transactional_id,
            )
            entry = _Request(correlation_id, groups, now + self._request_timeout)
            stream.send(request, entry)
            if acks == 0:
                entry.groups = []
                for group in groups:
                    for batch in group:
                        self._complete(batch, -1, -1, None)
                        self._landed((batch.topic, batch.partition))

    def _unproven(self, pk: PartitionKey) -> bool:
        """Idempotence: no batch of ``pk`` was acknowledged under the current producer id yet
        (any epoch: a leader that knows the producer takes a new epoch only from sequence 0).

        Such a partition has one request in flight at a time. A node takes any sequence as the
        first from a producer it does not know, so were a later request to land while an earlier
        one is refused (a node that starts hosting a new partition between the two), the earlier
        batches would be out of order for good and retried until delivery_timeout_ms."""
        return self.idempotent and pk not in self.pid.known_to

    def _prepare(self, batch: ProducerBatch) -> bytes:
        """The bytes to send: built once; sequenced on the first send with idempotence."""
        data = batch.build()
        if self.idempotent and batch.base_sequence < 0:
            pid = self.pid
            batch.producer_id = pid.producer_id
            batch.producer_epoch = pid.producer_epoch
            batch.base_sequence = pid.assign((batch.topic, batch.partition), batch.count)
            data = batch.data = restamp(
                data, batch.producer_id, batch.producer_epoch, batch.base_sequence
            )
        batch.attempts += 1
        return data

    # -- responses -----------------------------------------------------------------------------

    def on_response(
        self, stream: NodeStream, entry: _Request, response: storage_pb2.ProduceResponse
    ) -> None:
        if not entry.groups:  # acks=0: completed when sent
            if not stream.pending:
                self._idle.set()
            return
        results = {(r.topic, r.partition): r for r in response.partitions}
        for group in entry.groups:
            pk = (group[0].topic, group[0].partition)
            result = results.get(pk)
            if result is None or result.error_code:
                if result is None:
                    error: StromError = NetworkExceptionError(
                        f"{stream.address}: no result for {pk[0]}-{pk[1]}"
                    )
                else:
                    message = result.error_message or ""
                    error = for_code(result.error_code, f"{pk[0]}-{pk[1]}: {message}")
                for batch in group:
                    self._retry_or_fail(batch, error)
                    self._landed(pk)
                continue
            offset = result.base_offset
            for batch in group:
                if self.idempotent and batch.producer_id == self.pid.producer_id:
                    self.pid.acknowledge(pk, batch.base_sequence, batch.count)
                self._complete(batch, offset, result.log_append_time_ms, None)
                offset += batch.count
                self._landed(pk)
        if not stream.pending:
            self._idle.set()
        self.wakeup()

    def on_stream_broken(
        self, stream: NodeStream, failed: deque[_Request], error: StromError | None
    ) -> None:
        if self._streams.get(stream.node) is stream:
            del self._streams[stream.node]
        error = error or NetworkExceptionError(f"{stream.address}: produce stream failed")
        if failed:
            log.info("produce stream to %s failed: %s", stream.address, error)
        for entry in failed:
            for group in entry.groups:
                for batch in group:
                    self._retry_or_fail(batch, error)
                    self._landed((batch.topic, batch.partition))
        self._idle.set()
        self.wakeup()

    def _landed(self, pk: PartitionKey) -> None:
        count = self._inflight.get(pk, 0) - 1
        if count > 0:
            self._inflight[pk] = count
        else:
            self._inflight.pop(pk, None)
            self._inflight_node.pop(pk, None)
            self._blocked.discard(pk)

    def _retry_or_fail(self, batch: ProducerBatch, error: StromError) -> None:
        pk = (batch.topic, batch.partition)
        if isinstance(error, _METADATA_ERRORS):
            self.cluster.mark_stale(batch.topic)
        if self.txn is not None and not self.txn.sending:
            self._fail(batch, error)  # aborting (or failed): no retries
            return
        if self.idempotent:
            if batch.producer_id != self.pid.producer_id:
                self._fail(batch, error, sequenced=False)
                return
            if isinstance(error, DuplicateSequenceNumberError):
                self.pid.acknowledge(pk, batch.base_sequence, batch.count)
                self._complete(batch, -1, -1, None)
                return
            if isinstance(error, OutOfOrderSequenceNumberError | UnknownProducerIdError):
                # A gap behind an earlier batch that is itself being retried heals on retry;
                # a gap at the oldest unacknowledged batch means the node lost our state.
                if isinstance(error, UnknownProducerIdError) or self.pid.is_next(
                    pk, batch.base_sequence
                ):
                    self._fail(batch, error)
                    return
                self._retry(batch, pk)
                return
        now = time.monotonic()
        if (
            error.retriable
            and not self._stopping
            and batch.attempts <= self.config.retries
            and not batch.expired(now, self._delivery_timeout)
        ):
            self._retry(batch, pk)
        elif error.retriable and batch.expired(now, self._delivery_timeout):
            # Out of time rather than out of luck: report the expiry (as Kafka's
            # TimeoutException), naming the last error.
            expired = _expired(batch, now)
            expired.args = (f"{expired.args[0]}; last error: {error}",)
            self._fail(batch, expired)
        else:
            self._fail(batch, error)

    def _retry(self, batch: ProducerBatch, pk: PartitionKey) -> None:
        batch.retry_at = time.monotonic() + self._retry_backoff
        self.acc.reenqueue(batch)
        if self._inflight.get(pk, 0) > 1:
            self._blocked.add(pk)

    # -- completion ----------------------------------------------------------------------------

    def _complete(
        self,
        batch: ProducerBatch,
        base_offset: int,
        log_append_time: int,
        error: BaseException | None,
    ) -> None:
        self.acc.release(batch)
        batch.complete(base_offset, log_append_time, error)

    def _fail(self, batch: ProducerBatch, error: BaseException, *, sequenced: bool = True) -> None:
        self._complete(batch, -1, -1, error)
        if self.txn is not None:
            self.txn.batch_failed(error)  # abortable or fatal; the epoch moves on at EndTxn
            return
        if (
            sequenced
            and not self._stopping
            and self.idempotent
            and batch.base_sequence >= 0
            and batch.producer_id == self.pid.producer_id
        ):
            self._sequence_broken((batch.topic, batch.partition), error)

    def _sequence_broken(self, pk: PartitionKey, error: BaseException) -> None:
        """A sequenced batch failed for good: its partition's sequence has a gap. Sequenced
        batches of the partition waiting for retry fail too, and a new producer id is fetched
        before anything else is sequenced (in-flight batches under the old id fail when they
        come back with an error)."""
        log.warning("resetting the idempotent producer id after %s", error)
        for other in self.acc.take_sequenced(pk):
            why = "an earlier batch of the partition failed"
            self._complete(other, -1, -1, _chained(error, why))
        self.pid.reset()
        self._ensure_pid()

    # -- metadata and producer id --------------------------------------------------------------

    def _refresh_metadata(self, now: float) -> None:
        if self._metadata_task is not None and not self._metadata_task.done():
            return
        if now < self._metadata_after:
            return
        self._metadata_after = now + self._retry_backoff
        self._metadata_task = asyncio.ensure_future(self._metadata())

    async def _metadata(self) -> None:
        try:
            await self.cluster.refresh()
        except StromError as exc:
            log.info("metadata refresh failed: %s", exc)
        finally:
            self.wakeup()
            if self._loop is not None:
                # Look again when the backoff allows another refresh.
                self._loop.call_later(self._retry_backoff, self.wakeup)

    def _ensure_pid(self) -> None:
        if self._pid_task is None or self._pid_task.done():
            self._pid_task = asyncio.ensure_future(self._init_pid())

    async def _init_pid(self) -> None:
        """InitProducerId through the gateway, retried with backoff while retriable."""
        backoff = Backoff(max(self._retry_backoff, 0.01), 1.0)  # a longer backoff stays as set
        while not self.pid.has_id and not self._stopping:
            try:
                with translate_errors(self.cluster.gateway_address):
                    response: controller_pb2.InitProducerIdResponse = (
                        await self.cluster.gateway.InitProducerId(
                            controller_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1),
                            timeout=self._request_timeout,
                        )
                    )
                if response.error_code:
                    raise for_code(response.error_code, response.error_message)
                self.pid.set_id(response.producer_id, response.producer_epoch)
                log.debug("producer id %d epoch %d", response.producer_id, response.producer_epoch)
            except StromError as exc:
                if not exc.retriable:
                    self._fatal_error(exc)
                    return
            if not self.pid.has_id:
                await backoff.sleep()
        self.wakeup()

    def _fatal_error(self, error: BaseException) -> None:
        log.error("idempotent producer cannot get a producer id: %s", error)
        self.fatal = error
        self.fail_all(error)


def _thread_id() -> int:
    return threading.get_ident()


def _min(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a < b else b


def _expired(batch: ProducerBatch, now: float) -> StromTimeoutError:
    return StromTimeoutError(
        f"{batch.topic}-{batch.partition}: {batch.count} record(s) expired, "
        f"{(now - batch.created) * 1000:.0f} ms since the batch was created "
        "(delivery_timeout_ms)"
    )


def _chained(error: BaseException, why: str) -> BaseException:
    copy = type(error)(f"{why}: {error}") if isinstance(error, StromError) else error
    copy.__cause__ = error if copy is not error else None
    return copy
