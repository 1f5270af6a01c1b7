"""Records handed to the user: decoded from the fetched chunks when taken, a partition at a
time in turn (Kafka's FetchCollector). The fetcher fills each partition's buffer
(``PartitionState.raw``); ``collect`` decodes and takes up to a limit, starting after the
partition it stopped at last, and advances the positions; ``raise_pending`` raises the error a
partition or the fetcher left for the user."""

from __future__ import annotations

from strom.consumer._fetcher import Fetcher, decode_records
from strom.consumer._subscription import PartitionState, SubscriptionState
from strom.consumer.config import Deserializer
from strom.errors import OffsetOutOfRangeError
from strom.types import ConsumerRecord, TopicPartition

__all__ = ["RecordCollector"]


class RecordCollector:
    """Takes buffered records for ``poll``, fairly across partitions."""

    def __init__(
        self,
        subscriptions: SubscriptionState,
        fetcher: Fetcher,
        key_deserializer: Deserializer | None,
        value_deserializer: Deserializer | None,
    ) -> None:
        self._subs = subscriptions
        self._fetcher = fetcher
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._next_partition = 0

    def raise_pending(self) -> None:
        if self._fetcher.error is not None:
            error, self._fetcher.error = self._fetcher.error, None
            raise error
        for tp, st in self._subs.assignment.items():
            if st.error is not None:
                error, st.error = st.error, None
                self._fetcher.wake()
                raise error
            if st.position is None and st.reset is None and not st.awaiting_committed:
                raise OffsetOutOfRangeError(
                    f"{tp.topic}-{tp.partition} has no position (no committed offset) and "
                    "auto_offset_reset is 'none': seek() first"
                )

    def collect(self, limit: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Take up to ``limit`` buffered records, starting after the partition last drained."""
        found: dict[TopicPartition, list[ConsumerRecord]] = {}
        items = list(self._subs.assignment.items())
        count = len(items)
        for i in range(count):
            index = (self._next_partition + i) % count
            tp, st = items[index]
            if st.paused or not st.has_valid_position:
                continue
            if not st.buffered():
                if st.reset_after_buffer is not None:  # out of range once this was delivered
                    st.request_reset(st.reset_after_buffer)
                    self._fetcher.wake()
                continue
            records = self._take(tp, st, limit)
            if records:
                found[tp] = records
                limit -= len(records)
                if limit <= 0:
                    self._next_partition = index + 1
                    break
        return found

    def _take(self, tp: TopicPartition, st: PartitionState, limit: int) -> list[ConsumerRecord]:
        taken: list[ConsumerRecord] = []
        while limit > 0:
            if st.index >= len(st.records):
                if not st.raw:
                    break
                raw = st.raw.popleft()
                aborted = st.raw_aborted.popleft() if st.raw_aborted else None
                st.raw_bytes -= len(raw)
                self._fetcher.wake()
                position = st.position
                assert position is not None
                try:
                    st.records, st.records_next = decode_records(
                        raw,
                        tp,
                        position,
                        self._key_deserializer,
                        self._value_deserializer,
                        aborted,
                    )
                except Exception:
                    # Nothing of the chunk was delivered: fetch it again from the position,
                    # so the error repeats rather than records being skipped.
                    st.seek(position)
                    if taken:
                        return taken
                    raise
                st.index = 0
                if not st.records:
                    st.position = max(position, st.records_next)
                    continue
            records, start = st.records, st.index
            end = min(start + limit, len(records))
            chunk = records if start == 0 and end == len(records) else records[start:end]
            st.index = end
            limit -= end - start
            taken = chunk if not taken else taken + chunk
            last = chunk[-1]
            st.position_epoch = last.leader_epoch
            if end == len(records):
                st.position = max(last.offset + 1, st.records_next)
                st.records, st.index = [], 0
            else:
                st.position = last.offset + 1
        return taken
