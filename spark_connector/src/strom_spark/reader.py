"""Batch and streaming readers of the ``strom`` data source.

Planning (offsets, partitions) runs on the driver; ``read`` runs in each Spark task and reads
its offset range from the partition leader (``strom_spark.fetch``). A streaming query's offsets
are JSON like Spark's Kafka source: ``{"topic": {"0": 42, "1": 17}}`` (the next offset to read
per partition), kept by Spark in the query's checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, Filter, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from strom.types import TopicPartition
from strom_spark.avro_values import decode_values
from strom_spark.fetch import read_range
from strom_spark.offsets import ClusterView, data_loss, resolve
from strom_spark.options import SourceOptions
from strom_spark.planning import OffsetRange, cap_by_volume, split_ranges
from strom_spark.pushdown import Pushdown, push_filters

__all__ = [
    "StromBatchReader",
    "StromPushdownReader",
    "StromStreamReader",
    "offsets_from_json",
    "offsets_to_json",
]

Offsets = dict[TopicPartition, int]


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def offsets_from_json(value: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {
        TopicPartition(topic, int(p)): int(offset)
        for topic, partitions in value.items()
        for p, offset in partitions.items()
    }


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, OffsetRange):  # Spark sends InputPartition(None) for no ranges
        return
    if options.value_avro is None:
        yield from read_range(options, partition)
        return
    for batch in read_range(options, partition):
        yield decode_values(batch, options.value_avro)


class StromBatchReader(DataSourceReader):
    """``spark.read.format("strom")``: the ranges are fixed when the query is planned."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.pushed = Pushdown()

    def partitions(self) -> list[InputPartition]:  # type: ignore[override]
        opts, pushed = self.options, self.pushed
        view = ClusterView(opts)
        try:
            tps = [tp for tp in view.partitions(must_exist=True) if pushed.keeps(tp)]
            earliest, latest = view.earliest(tps), view.latest(tps)
            start = resolve(view, opts.starting, tps, earliest, latest)
            end = resolve(view, opts.ending, tps, earliest, latest)
        finally:
            view.close()
        ranges = []
        for tp in tps:
            first, last = start[tp], end[tp]
            name = f"{tp.topic}-{tp.partition}"
            if last > latest[tp]:
                raise ValueError(
                    f"{name}: ending offset {last} is past the end of the partition ({latest[tp]})"
                )
            if first < earliest[tp]:
                lost_to = min(earliest[tp], last)
                lost = pushed.clamp(first, lost_to) if pushed.clamps_offsets else (first, lost_to)
                if not pushed.clamps_offsets or lost[0] < lost[1]:  # lost records it would read
                    why = f"the log now starts at {earliest[tp]}"
                    data_loss(tp, *lost, why, opts.fail_on_data_loss)
                first = lost_to
            if first > last:
                raise ValueError(f"{name}: starting offset {first} is after ending offset {last}")
            ranges.append(OffsetRange(tp.topic, tp.partition, *pushed.clamp(first, last)))
        return list(
            split_ranges(
                ranges,
                min_partitions=opts.min_partitions,
                max_records_per_partition=opts.max_records_per_partition,
            )
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return _read(self.options, partition)


class StromPushdownReader(StromBatchReader):
    """The batch reader with filter pushdown (``strom_spark.pushdown``): only what the pushed
    filters allow is planned, so empty partitions and ranges become no Spark task. The records
    of a clamped range are cut to it when decoded, so each pushed filter holds exactly."""

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:  # type: ignore[override]
        self.pushed, rest = push_filters(self.pushed, filters)
        return rest


class StromStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("strom")``: micro-batches between JSON offsets, with
    ``maxOffsetsPerTrigger`` through Spark's admission control (``getDefaultReadLimit`` and
    ``latestOffset(start, limit)``, PySpark >= 4.2) and ``Trigger.AvailableNow``."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._view: ClusterView | None = None
        self._target: Offsets | None = None  # Trigger.AvailableNow: the ends to stop at

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_view": None, "_target": None}

    @property
    def view(self) -> ClusterView:
        if self._view is None:
            self._view = ClusterView(self.options)
        return self._view

    def initialOffset(self) -> dict[str, Any]:
        tps = self.view.partitions(must_exist=False)
        earliest, latest = self.view.earliest(tps), self.view.latest(tps)
        return offsets_to_json(resolve(self.view, self.options.starting, tps, earliest, latest))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # type: ignore[override]
        begin = offsets_from_json(start)
        tps = self.view.partitions(must_exist=False)
        end = self.view.latest(tps)
        if self._target is not None:  # partitions new since the query started wait for the next
            target = self._target
            end = {
                tp: min(o, target.get(tp, begin.get(tp, o)))
                for tp, o in end.items()
                if tp in target or tp in begin
            }
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in tps if tp not in begin]
            begin = {**self.view.earliest(new), **begin}
            # A partition whose end went backwards is data loss for partitions() to report,
            # not a reason to hold back the others.
            counted = {tp: min(begin.get(tp, o), o) for tp, o in end.items()}
            end = cap_by_volume(counted, end, limit.max_rows)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        tps = self.view.partitions(must_exist=False)
        return offsets_to_json(self.view.latest(tps))

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.view.latest(self.view.partitions(must_exist=False))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:  # type: ignore[override]
        opts = self.options
        begin, until = offsets_from_json(start), offsets_from_json(end)
        for tp in sorted(set(begin) - set(until)):
            data_loss(tp, begin[tp], begin[tp], "the partition is gone", opts.fail_on_data_loss)
        new = [tp for tp in until if tp not in begin]
        begin = {**self.view.earliest(new), **begin}
        ranges = []
        for tp in sorted(until):
            first, last = begin[tp], until[tp]
            if last < first:
                why = f"the partition's end moved back from {first} to {last}"
                data_loss(tp, last, first, why, opts.fail_on_data_loss)
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, first, last))
        return list(
            split_ranges(
                ranges,
                min_partitions=opts.min_partitions,
                max_records_per_partition=opts.max_records_per_partition,
            )
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return _read(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the checkpoint holds the offsets (no consumer group is involved)."""

    def stop(self) -> None:
        if self._view is not None:
            self._view.close()
            self._view = None
