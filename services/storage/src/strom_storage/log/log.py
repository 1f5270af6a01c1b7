"""The partition log: offsets, validation, producer state, retention and durability policy.

``Log`` is what the rest of the storage node (the servicer, replication) calls. It builds on
``LocalLog`` (files and the log end offset) and adds:

* the *log start offset*: records below it are gone for readers (retention, delete-records);
* the *high watermark*: set by replication (or by the single-replica service after each
  append); consumers read below it, followers up to the log end;
* leader appends: validation on headers and CRC, idempotent-producer checks, offsets and leader
  epoch patched into the request's own bytes, which then become the segment's bytes;
* follower appends that keep the leader's offsets;
* transactions: transactional batches (verified by the caller with the transaction
  coordinator when they start a transaction), the COMMIT/ABORT markers
  (``append_txn_marker``), and the producer state behind the last stable offset (LSO: nothing
  of an open transaction below it) that ``TXN_COMMITTED`` reads stop at;
* roll, retention (``apply_retention``), flush policy (``flush.messages``, ``flush.ms``),
  checkpoints (recovery point, log start offset, high watermark), the producer-state snapshot
  and the clean-shutdown marker written by ``close``.

Reads (Fetch, ListOffsets) go through ``log.reader``, a ``LogReader`` bounded by the offsets the
log publishes (``reader.py``).

Thread-safety: thread-safe. Appends, truncation, roll, retention, flush and close serialise on
one ``threading.RLock``; they may run in a worker thread (``asyncio.to_thread``) so that the
event loop never waits on a write or an fsync. The periodic fsyncs of ``maintenance`` (after a
roll, per ``flush.ms``) run outside the lock, so appends are not held up by them. The reader
takes no lock: a read snapshots the published log end, log start and high watermark, then
``pread``s the segment files, so any number of reads run in parallel with each other and with
an append.
Append listeners are called in the appending thread, after the write, with the lock held; an
asyncio caller should hop back with ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from strom.errors import OffsetOutOfRangeError, StorageError
from strom.records.header import BatchHeader, read_header, walk_batches
from strom_storage.log.checkpoints import LogCheckpoints, write_atomically
from strom_storage.log.config import LogConfig
from strom_storage.log.files import CLEAN_SHUTDOWN_FILE
from strom_storage.log.leader_epochs import LeaderEpochCache
from strom_storage.log.loader import LoadedLog, append_aborted, load_log, rebuild_producer_state
from strom_storage.log.local_log import LocalLog
from strom_storage.log.producer_state import (
    ActiveProducer,
    BatchMetadata,
    CompletedTxn,
    EndTxnMarker,
    ProducerStateManager,
)
from strom_storage.log.reader import LogBounds, LogReader
from strom_storage.log.retention import deletable_segments
from strom_storage.log.scattered import ScatteredBatches
from strom_storage.log.segment import LogSegment
from strom_storage.log.txn_markers import MarkerOf, build_marker_batch, markers_in
from strom_storage.log.validator import (
    finalize_leader_batches,
    split_by_size,
    summarize,
    validate_follower_batches,
    validate_leader_batches,
)

if TYPE_CHECKING:
    from strom_server.runtime.clock import Clock

__all__ = ["ActiveProducer", "AppendInfo", "Log"]


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """The outcome of an append: offsets given, and what a Produce response reports."""

    first_offset: int
    last_offset: int
    #: The broker time stamped into the batches (LogAppendTime topics), else -1.
    log_append_time: int
    log_start_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int
    size_bytes: int
    #: True when an idempotent retry was answered with the original offsets; nothing written.
    duplicate: bool = False

    @classmethod
    def of_duplicate(
        cls, original: BatchMetadata, log_start_offset: int, log_append_time: bool
    ) -> AppendInfo:
        """An idempotent retry's outcome: the ``original`` append's offsets, nothing written."""
        return cls(
            first_offset=original.first_offset,
            last_offset=original.last_offset,
            log_append_time=original.max_timestamp if log_append_time else -1,
            log_start_offset=log_start_offset,
            max_timestamp=original.max_timestamp,
            offset_of_max_timestamp=original.first_offset,
            record_count=original.offset_delta + 1,
            size_bytes=0,
            duplicate=True,
        )

    @classmethod
    def combined(cls, infos: list[AppendInfo], size_bytes: int) -> AppendInfo:
        """One append's outcome from its consecutive parts' (a follower's split append)."""
        if len(infos) == 1:
            return infos[0]
        return dataclasses.replace(
            infos[-1],
            first_offset=infos[0].first_offset,
            record_count=sum(i.record_count for i in infos),
            size_bytes=size_bytes,
            max_timestamp=max(i.max_timestamp for i in infos),
        )


AppendListener = Callable[["Log", AppendInfo], None]


class Log:
    """One partition's log (see module docstring). Open with ``Log.open``.

    Thread-safety: thread-safe. Writers serialise on an internal lock and may run in worker
    threads; reads (``reader``) take no lock and run in parallel with writes.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock: Clock,
        loaded: LoadedLog,
    ) -> None:
        self.directory = directory
        self._config = config
        self._clock = clock
        self._lock = threading.RLock()
        self._local = LocalLog(
            directory,
            config,
            loaded.segments,
            recovery_point=loaded.recovery_point,
            next_offset=loaded.next_offset,
        )
        self._local.last_flush_ms = clock.time_ms()
        self._producers: ProducerStateManager = loaded.producer_state
        self._bounds = LogBounds(loaded.log_start_offset, loaded.high_watermark)
        #: Fetch and ListOffsets, lock-free: ``log.reader.read(...)``
        self.reader = LogReader(self._local, self._bounds, self._producers)
        self._listeners: list[AppendListener] = []
        self.had_clean_shutdown = loaded.had_clean_shutdown
        self.recovered_segments = loaded.recovered_segments
        self._epochs = LeaderEpochCache(directory)
        self._epochs.truncate_from_end(loaded.next_offset)
        self._epochs.truncate_from_start(loaded.log_start_offset)
        self._checkpoints = LogCheckpoints(directory)

    @classmethod
    def open(cls, directory: Path | str, config: LogConfig | None = None, *, clock: Clock) -> Log:
        """Open or create the partition log in ``directory`` (recovering it if needed)."""
        path = Path(directory)
        cfg = config if config is not None else LogConfig()
        loaded = load_log(path, cfg, now_ms=clock.time_ms())
        return cls(path, cfg, clock, loaded)

    # -- state --------------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """Apply new topic settings (takes effect for the next append, roll and retention)."""
        with self._lock:
            self._config = config
            self._local.config = config
            self._producers.producer_id_expiration_ms = config.producer_id_expiration_ms

    @property
    def log_start_offset(self) -> int:
        return self._bounds.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._local.end.offset

    @property
    def high_watermark(self) -> int:
        return self._bounds.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """What ``TXN_COMMITTED`` reads stop at (``LogReader.last_stable_offset``). Lock-free."""
        return self.reader.last_stable_offset

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @property
    def size_in_bytes(self) -> int:
        return self._local.segments.size_in_bytes()

    @property
    def segment_count(self) -> int:
        return len(self._local.segments)

    def segments(self) -> list[LogSegment]:
        """A snapshot of the segments, oldest first (the last one is active)."""
        return self._local.segments.values()

    @property
    def active_segment(self) -> LogSegment:
        return self._local.active_segment

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch with data in this log (-1 when none)."""
        return self._epochs.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest epoch <= ``epoch``, the offset where it ended).

        The latest epoch ends at the log end; (-1, -1) when no such epoch is known.
        """
        with self._lock:
            return self._epochs.end_offset_for(epoch, self._local.log_end_offset)

    def assign_leader_epoch(self, epoch: int) -> None:
        """This replica leads from ``epoch`` on: the epoch starts at the current log end (so
        OffsetForLeaderEpoch answers for it before its first batch)."""
        with self._lock:
            self._check_open()
            self._epochs.assign(epoch, self._local.log_end_offset)

    def epoch_start_offset(self, epoch: int) -> int:
        """Where ``epoch`` starts in this log; the log end when it has not started."""
        with self._lock:
            return self._epochs.start_offset_for(epoch, self._local.log_end_offset)

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producers

    def active_producers(self) -> list[ActiveProducer]:
        """The producers this partition remembers (DescribeProducers)."""
        with self._lock:
            return self._producers.active_producers()

    @property
    def closed(self) -> bool:
        return self._local.closed

    def add_append_listener(self, listener: AppendListener) -> None:
        """Call ``listener(log, info)`` after every append (see the thread-safety note)."""
        self._listeners.append(listener)

    def _check_open(self) -> None:
        if self._local.closed:
            raise StorageError(f"log {self.directory} is closed")

    # -- appends ------------------------------------------------------------------------------

    def transactions_to_verify(self, data: bytes | bytearray | memoryview) -> set[tuple[int, int]]:
        """(producer id, epoch) of the transactional batches in ``data`` that would start a
        transaction here: the caller verifies them with the transaction coordinator and passes
        the confirmed ones to ``append_as_leader(verified=...)``.

        A header walk, no lock. Raises ``InvalidProducerEpochError`` for an epoch a marker
        already ended here, ``InvalidRecordError`` for a control batch, ``CorruptRecordError``
        for bytes that are not whole batches.
        """
        headers = (h for _, h in walk_batches(data, check_crc=False))
        return self._producers.transactions_to_verify(headers)

    def append_as_leader(
        self,
        data: bytes | bytearray | memoryview,
        leader_epoch: int = 0,
        *,
        verified: Collection[tuple[int, int]] = (),
    ) -> AppendInfo:
        """Validate, assign offsets and append a producer's batches.

        A transactional batch that starts a transaction here must have its (producer id,
        epoch) in ``verified`` (see ``transactions_to_verify``). Raises
        ``CorruptRecordError`` (CRC, header), ``MessageTooLargeError``,
        ``RecordListTooLargeError``, ``InvalidTimestampError``, ``InvalidRecordError`` (also
        for control batches), ``OutOfOrderSequenceNumberError``, ``InvalidProducerEpochError``
        (also for a transactional batch of an epoch a marker ended), ``InvalidTxnStateError``
        (an unverified transaction, or a non-transactional batch from a producer with an open
        transaction) or ``StorageError``; a rejected append writes nothing. An idempotent
        retry returns the original offsets with ``duplicate=True``. The records are never
        copied (``finalize_leader_batches``).
        """
        with self._lock:
            self._check_open()
            now = self._clock.time_ms()
            batches = validate_leader_batches(data, self._config, now)
            duplicate = self._producers.check_leader_append((h for _, h in batches), verified)
            if duplicate is not None:
                return AppendInfo.of_duplicate(
                    duplicate, self._bounds.log_start_offset, self._config.log_append_time
                )
            final, final_batches, append_time = finalize_leader_batches(
                data,
                batches,
                self._config,
                now_ms=now,
                next_offset=self._local.log_end_offset,
                leader_epoch=leader_epoch,
            )
            return self._append(final, final_batches, now, append_time)

    def append_as_follower(self, data: bytes | bytearray | memoryview) -> AppendInfo:
        """Append replicated batches with the offsets and epochs the leader gave them."""
        with self._lock:
            self._check_open()
            batches = validate_follower_batches(data, self._config, self._local.log_end_offset)
            now = self._clock.time_ms()
            view = memoryview(data)
            infos = []
            # Split so that every chunk fits one segment (the leader's segments may be larger).
            for start, end, chunk in split_by_size(batches, self._config.segment_bytes):
                part = view[start:end]
                infos.append(self._append(part, chunk, now, None, markers_in(part, chunk)))
            return AppendInfo.combined(infos, len(view))

    def append_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        *,
        committed: bool,
        coordinator_epoch: int,
        leader_epoch: int,
    ) -> AppendInfo | None:
        """Write the COMMIT or ABORT marker ending ``producer_id``'s transaction at
        ``producer_epoch`` (also when it wrote nothing here: the epoch ends all the same).

        Returns None, writing nothing, for a duplicate or stale marker (``producer_epoch``
        below the epoch a marker already ended, or at it with no transaction of that epoch open:
        clients that keep their epoch run several transactions at one epoch). Raises
        ``TransactionCoordinatorFencedError`` when ``coordinator_epoch`` is below one a marker
        of this producer carried.
        """
        with self._lock:
            self._check_open()
            if not self._producers.marker_is_new(producer_id, producer_epoch, coordinator_epoch):
                return None
            now = self._clock.time_ms()
            batch = build_marker_batch(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                committed=committed,
                coordinator_epoch=coordinator_epoch,
                base_offset=self._local.log_end_offset,
                leader_epoch=leader_epoch,
                timestamp_ms=now,
                log_append_time=self._config.log_append_time,
            )
            marker = EndTxnMarker(committed, coordinator_epoch)
            append_time = now if self._config.log_append_time else None
            return self._append(
                batch, [(0, read_header(batch))], now, append_time, lambda _h: marker
            )

    def _append(
        self,
        data: bytes | bytearray | memoryview | ScatteredBatches,
        batches: list[tuple[int, BatchHeader]],
        now: int,
        append_time: int | None,
        marker_of: MarkerOf | None = None,
    ) -> AppendInfo:
        summary = summarize(batches)
        rolled = self._local.maybe_roll(
            len(data), summary.first_offset, summary.last_offset, summary.max_timestamp, now
        )
        if rolled is not None:
            self._on_roll(rolled)
        self._local.append(data, batches)
        completed = self._producers.update((h for _, h in batches), marker_of)
        if completed:
            self._index_aborted(completed)
        for _, header in batches:
            if header.partition_leader_epoch > self._epochs.latest_epoch:
                self._epochs.assign(header.partition_leader_epoch, header.base_offset)
        info = AppendInfo(
            first_offset=summary.first_offset,
            last_offset=summary.last_offset,
            log_append_time=append_time if append_time is not None else -1,
            log_start_offset=self._bounds.log_start_offset,
            max_timestamp=summary.max_timestamp,
            offset_of_max_timestamp=summary.offset_of_max_timestamp,
            record_count=summary.record_count,
            size_bytes=len(data),
        )
        if self._local.unflushed_messages >= self._config.flush_messages:
            self._local.flush(None, now)
        for listener in self._listeners:
            listener(self, info)
        return info

    def _index_aborted(self, completed: list[CompletedTxn]) -> None:
        # The markers were just written to the active segment: their entries go to its index.
        segment = self._local.active_segment
        for txn in completed:
            append_aborted(segment, txn)

    # -- log start, high watermark, truncation ------------------------------------------------

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (clamped to [log start, log end]); returns the value set."""
        with self._lock:
            value = min(max(offset, self._bounds.log_start_offset), self._local.log_end_offset)
            self._bounds.high_watermark = value
            if self._producers.unreplicated:
                self._producers.on_high_watermark(value)
            return value

    def delete_records(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (DeleteRecords); returns the new start.

        Raises ``OffsetOutOfRangeError`` above the high watermark. Whole segments below the new
        start are deleted right away.
        """
        with self._lock:
            self._check_open()
            if offset > self._bounds.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records up to {offset}: above the high watermark "
                    f"{self._bounds.high_watermark}"
                )
            if offset > self._bounds.log_start_offset:
                self._raise_log_start(offset)
                self._delete_by_retention(self._clock.time_ms(), policies=False)
            return self._bounds.log_start_offset

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch at or above ``offset`` (a follower realigning); True if changed."""
        with self._lock:
            self._check_open()
            if offset >= self._local.log_end_offset:
                return False
            now = self._clock.time_ms()
            if offset < self._bounds.log_start_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            self._local.truncate_to(offset, now)
            end = self._local.log_end_offset
            self._epochs.truncate_from_end(end)
            self._bounds.high_watermark = min(self._bounds.high_watermark, end)
            rebuild_producer_state(
                self._producers,
                self._local.segments,
                self._bounds.log_start_offset,
                end,
                high_watermark=self._bounds.high_watermark,
            )
            self.checkpoint()
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and restart the log empty at ``offset``."""
        with self._lock:
            self._check_open()
            self._local.truncate_fully_and_start_at(offset, self._clock.time_ms())
            self._producers.delete_snapshots_above(-1)
            self._producers.reset(offset)
            self._epochs.clear()
            self._bounds.log_start_offset = offset
            self._bounds.high_watermark = offset
            self.checkpoint()

    # -- roll, flush, retention, maintenance --------------------------------------------------

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end (returns it; no-op when the active is
        empty)."""
        with self._lock:
            self._check_open()
            before = self._local.active_segment
            segment = self._local.roll(self._clock.time_ms())
            if segment is not before:
                self._on_roll(segment)
            return segment

    def _on_roll(self, segment: LogSegment) -> None:
        # The producer state covers everything below the new base: snapshot it there (the
        # local log has the finished segments fsynced by maintenance, off the append path).
        self._producers.map_end_offset = segment.base_offset
        floor = self._local.recovery_floor(self._checkpoints.written("recovery", 0))
        self._producers.take_snapshot(sync=False, keep_from=floor)

    def flush(self, offset: int | None = None) -> None:
        """fsync everything below ``offset`` (default: the log end); moves the recovery point."""
        with self._lock:
            self._check_open()
            self._local.flush(offset, self._clock.time_ms())

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole segments past retention.ms / retention.bytes or below the log start.

        Never the active segment, never data at or above the high watermark. Returns the
        number of segments deleted; the log start offset moves to the first kept segment.
        """
        with self._lock:
            self._check_open()
            now = self._clock.time_ms() if now_ms is None else now_ms
            return self._delete_by_retention(now, policies=True)

    def _delete_by_retention(self, now: int, *, policies: bool) -> int:
        decision = deletable_segments(
            self._local.segments.values(),
            config=self._config,
            time_and_size=policies,
            now_ms=now,
            log_start_offset=self._bounds.log_start_offset,
            high_watermark=self._bounds.high_watermark,
        )
        if decision.segments:
            self._local.remove_segments(decision.segments, now)
            self._raise_log_start(decision.first_kept_offset)
        return len(decision.segments)

    def _raise_log_start(self, offset: int) -> None:
        """Move the log start offset up to ``offset`` (nothing when it is not above it)."""
        if offset > self._bounds.log_start_offset:
            self._bounds.log_start_offset = offset
            self._epochs.truncate_from_start(offset)
            with self._checkpoints.lock:
                self._checkpoints.write({"start": offset})

    def replace_segments(self, old: list[LogSegment], cleaned: LogSegment) -> bool:
        """Swap a cleaned segment (files ``*.cleaned``) in for ``old`` (the cleaner's commit).

        See ``LocalLog.replace_segments``: False, deleting the cleaned files, when ``old``
        is no longer a run of inactive segments of this log (or the log is closed).
        """
        with self._lock:
            if self._local.closed:
                cleaned.delete()
                return False
            return self._local.replace_segments(old, cleaned, self._clock.time_ms())

    def maintenance(self, now_ms: int | None = None, *, write_checkpoints: bool = True) -> None:
        """Periodic upkeep (the log manager's loop calls it).

        fsyncs segments finished by a roll and, per ``flush.ms``, the active one; deletes files
        of removed segments whose ``file.delete.delay.ms`` has passed; expires idle producers;
        writes changed checkpoints (unless ``write_checkpoints`` is false: the manager spaces
        them out, since each costs two fsyncs).
        """
        now = self._clock.time_ms() if now_ms is None else now_ms
        with self._lock:
            if self._local.closed:
                return
            flushes = self._local.due_flushes(now)
        for target in flushes:
            self._local.flush_outside(self._lock, target, now)
        with self._lock:
            if self._local.closed:
                return
            self._local.delete_pending(now)
            self._producers.remove_expired(now)
        if write_checkpoints:
            self._checkpoint_outside_lock()

    def checkpoint(self) -> None:
        """Write the recovery point, log start and high watermark checkpoints if changed."""
        with self._lock, self._checkpoints.lock:
            self._checkpoints.write(self._checkpoint_values())

    def _checkpoint_outside_lock(self) -> None:
        """Like ``checkpoint``, but the fsyncs happen after the log lock is released, so an
        append never waits for a periodic checkpoint."""
        self._checkpoints.write_after(
            self._lock, lambda: None if self._local.closed else self._checkpoint_values()
        )

    def _checkpoint_values(self) -> dict[str, int]:
        return {
            "recovery": self._local.recovery_point,
            "start": self._bounds.log_start_offset,
            "hw": self._bounds.high_watermark,
        }

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Flush, snapshot producer state, checkpoint, close files, mark the shutdown clean."""
        with self._lock:
            if self._local.closed:
                return
            self._local.flush(None, self._clock.time_ms())
            self._producers.map_end_offset = self._local.log_end_offset
            self._producers.take_snapshot()
            self.checkpoint()
            self._local.close()
            write_atomically(self.directory / CLEAN_SHUTDOWN_FILE, b"")

    def close_unclean(self) -> None:
        """Close the files without flushing or marking (tests simulating a crash use it)."""
        with self._lock:
            if not self._local.closed:
                self._local.close_handles()

    def delete(self) -> None:
        """Close and remove the partition directory with everything in it."""
        with self._lock:
            self._local.delete_all()

    def __repr__(self) -> str:
        return (
            f"Log({self.directory.name}, start={self._bounds.log_start_offset}, "
            f"end={self.log_end_offset}, hw={self._bounds.high_watermark})"
        )
