"""The driver's view of the cluster: which partitions a query reads and where its ranges lie.

``ClusterView`` runs a ``strom.aio`` ``ClusterClient`` (bootstrap through the gateway,
``Metadata``) on a private background loop and answers synchronously: the partitions of a
subscription and ``ListOffsets`` (earliest, latest, by timestamp) on the partition leaders.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from strom.cluster import BackgroundLoop, ClusterClient, list_offsets
from strom.errors import UnknownTopicOrPartitionError
from strom.protocol.v1 import common_pb2
from strom.security import SecurityConfig
from strom.types import TopicPartition
from strom_spark.options import EARLIEST, LATEST, Bound, SourceOptions

__all__ = ["ClusterView", "DataLossError", "data_loss", "resolve"]

log = logging.getLogger("strom_spark")
T = TypeVar("T")


class DataLossError(RuntimeError):
    """Records a query was meant to read are gone (retention, delete-records, truncation)."""


def data_loss(tp: TopicPartition, start: int, end: int, why: str, fail: bool) -> None:
    """Raise (``fail``) or log that the records ``[start, end)`` of ``tp`` cannot be read."""
    text = f"{tp.topic}-{tp.partition}: records [{start}, {end}) are no longer available ({why}); "
    if fail:
        raise DataLossError(text + "set the option failOnDataLoss=false to skip lost records")
    log.warning("%sskipped (failOnDataLoss=false)", text)


class ClusterView:
    """Synchronous metadata and offset lookups for the driver (close it when done)."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._bg = BackgroundLoop("strom-spark-driver")
        self._cluster = ClusterClient(
            options.bootstrap_servers,
            request_timeout_ms=options.request_timeout_ms,
            client_id="strom-spark",
            security=SecurityConfig(**options.security) if options.security else None,  # type: ignore[arg-type]
        )

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._bg.run(coro)

    def close(self) -> None:
        try:
            self._run(self._cluster.close())
        finally:
            self._bg.stop()

    def partitions(self, *, must_exist: bool) -> list[TopicPartition]:
        """The subscription's partitions now (``must_exist``: a named topic or an assigned
        partition the cluster lacks is an error; else it is left out until it appears)."""
        return self._run(self._partitions(must_exist))

    async def _partitions(self, must_exist: bool) -> list[TopicPartition]:
        opts, cluster = self._options, self._cluster
        cluster.mark_stale()  # each plan sees new topics and partitions at once
        if opts.subscribe_pattern is not None:
            pattern = re.compile(opts.subscribe_pattern)
            names = [
                t for t in await cluster.topics() if pattern.fullmatch(t) and not t.startswith("__")
            ]
        elif opts.subscribe is not None:
            names = list(opts.subscribe)
        else:
            names = sorted({tp.topic for tp in opts.assign or ()})
        found: list[TopicPartition] = []
        for name in names:
            try:
                leaders = await cluster.partitions(name)
            except UnknownTopicOrPartitionError:
                if must_exist:
                    raise
                continue
            found += [TopicPartition(name, p.partition) for p in leaders]
        if opts.assign is not None:
            present = set(found)
            missing = [tp for tp in opts.assign if tp not in present]
            if missing and must_exist:
                raise UnknownTopicOrPartitionError(
                    "assigned partitions not in the cluster: "
                    + ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
                )
            found = [tp for tp in opts.assign if tp in present]
        return sorted(found)

    def list_offsets(
        self, tps: Iterable[TopicPartition], spec: int, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """ListOffsets on the leaders: ``spec`` is a ``common_pb2.OffsetSpec``; with TIMESTAMP,
        ``timestamps`` gives each partition's (offset -1: no record at or after it)."""
        specs = {tp: (spec, timestamps.get(tp, 0)) for tp in tps}
        if not specs:
            return {}
        found = self._run(
            list_offsets(
                self._cluster,
                specs,
                isolation_level=(
                    common_pb2.READ_COMMITTED
                    if self._options.read_committed
                    else common_pb2.READ_UNCOMMITTED
                ),
                timeout_s=self._options.request_timeout_ms / 1000,
            )
        )
        return {tp: offset for tp, (offset, _) in found.items()}

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self.list_offsets(tps, common_pb2.EARLIEST, {})

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self.list_offsets(tps, common_pb2.LATEST, {})


def resolve(
    view: ClusterView,
    bound: Bound,
    tps: list[TopicPartition],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """Concrete offsets of ``bound`` for ``tps`` (earliest/latest already looked up)."""
    if bound.kind == "earliest":
        return {tp: earliest[tp] for tp in tps}
    if bound.kind == "latest":
        return {tp: latest[tp] for tp in tps}
    if bound.kind == "offsets":
        given = bound.offsets or {}
        out = {}
        for tp in tps:
            value = given.get(tp, bound.default)
            out[tp] = (
                earliest[tp] if value == EARLIEST else latest[tp] if value == LATEST else value
            )
        return out
    if bound.kind == "timestamp":
        stamps = {tp: bound.timestamp or 0 for tp in tps}
    else:
        given = bound.offsets or {}
        stamps = {tp: given[tp] for tp in tps if tp in given}
    found = view.list_offsets(stamps, common_pb2.TIMESTAMP, stamps)
    out = {}
    for tp in tps:
        if tp not in stamps:
            out[tp] = earliest[tp] if bound.default == EARLIEST else latest[tp]
        elif found[tp] >= 0:
            out[tp] = found[tp]
        elif bound.no_match == "latest":
            out[tp] = latest[tp]
        else:
            raise ValueError(
                f"{tp.topic}-{tp.partition} has no record at or after timestamp {stamps[tp]} "
                "(set startingOffsetsByTimestampStrategy=latest to start at the end instead)"
            )
    return out
