"""Calls to partition leaders: offset lookups (``ListOffsets``) and single storage-node RPCs.

Shared by the consumer and the admin, and public (``strom.cluster``) for services and tools
that read partitions as a client (the coordinator's offsets log, the Spark connector).
``list_offsets`` groups requests per leader node; leader moves and network errors refresh the
metadata and retry within the caller's timeout. ``storage_call`` is one RPC to a node with its
gRPC errors as ``strom.errors``; ``METADATA_ERRORS`` are the codes after which the caller should
refresh the metadata and retry.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from strom.cluster.client import ClusterClient
from strom.cluster.transport import translate_errors
from strom.errors import (
    StromError,
    StromTimeoutError,
    for_code,
)
from strom.protocol.v1 import common_pb2, storage_pb2
from strom.types import TopicPartition

__all__ = ["METADATA_ERRORS", "list_offsets", "storage_call", "where"]

_E = common_pb2.ErrorCode
#: Errors that mean "your metadata is out of date": refresh, then retry.
METADATA_ERRORS = frozenset(
    {
        _E.NOT_LEADER_OR_FOLLOWER,
        _E.FENCED_LEADER_EPOCH,
        _E.UNKNOWN_LEADER_EPOCH,
        _E.LEADER_NOT_AVAILABLE,
        _E.UNKNOWN_TOPIC_OR_PARTITION,
        _E.REPLICA_NOT_AVAILABLE,
        _E.KAFKA_STORAGE_ERROR,
        _E.NETWORK_EXCEPTION,
    }
)


def where(tp: TopicPartition, message: str) -> str:
    """``topic-partition: message`` for error messages."""
    name = f"{tp.topic}-{tp.partition}"
    return f"{name}: {message}" if message else name


async def storage_call(
    cluster: ClusterClient, node: int, method: str, request: Any, timeout_s: float
) -> Any:
    """One RPC to a storage node; gRPC errors become ``strom.errors`` (NetworkExceptionError
    when the node is unreachable, LeaderNotAvailableError when it is not in the metadata)."""
    stub = cluster.storage(node)
    # (A node shutting down cancels the calls it serves: CANCELLED becomes a retriable
    # NetworkExceptionError in strom.cluster.transport.)
    with translate_errors(lambda: cluster.node_address(node)):
        return await getattr(stub, method)(request, timeout=timeout_s)


async def list_offsets(
    cluster: ClusterClient,
    specs: dict[TopicPartition, tuple[int, int]],
    *,
    isolation_level: int = common_pb2.READ_UNCOMMITTED,
    timeout_s: float = 30.0,
    backoff_s: float = 0.1,
) -> dict[TopicPartition, tuple[int, int]]:
    """ListOffsets for ``{tp: (OffsetSpec, timestamp_ms)}``; returns ``{tp: (offset,
    timestamp)}`` (offset -1 when no record matches a timestamp)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    remaining = dict(specs)
    found: dict[TopicPartition, tuple[int, int]] = {}
    last: StromError | None = None
    while remaining:
        by_node: dict[int, list[tuple[TopicPartition, int]]] = defaultdict(list)
        for tp in remaining:
            leader = await cluster.leader(tp)
            by_node[leader.leader].append((tp, leader.leader_epoch))
        calls = [
            _list_node(
                cluster,
                node,
                parts,
                remaining,
                isolation_level=isolation_level,
                timeout_s=timeout_s,
            )
            for node, parts in by_node.items()
        ]
        for outcome in await asyncio.gather(*calls, return_exceptions=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, StromError) or not outcome.retriable:
                    raise outcome
                last = outcome
                cluster.mark_stale()
                continue
            for tp, (code, message, offset, timestamp) in outcome.items():
                if code == _E.NONE:
                    found[tp] = (offset, timestamp)
                    remaining.pop(tp)
                    continue
                last = for_code(code, where(tp, message))
                if code not in METADATA_ERRORS and not last.retriable:
                    raise last
                cluster.mark_stale(tp.topic)
        if remaining:
            if loop.time() + backoff_s > deadline:
                raise StromTimeoutError(f"list offsets did not complete in time: {last}")
            await asyncio.sleep(backoff_s)  # retry backoff, not synchronisation
    return found


async def _list_node(
    cluster: ClusterClient,
    node: int,
    parts: list[tuple[TopicPartition, int]],
    specs: dict[TopicPartition, tuple[int, int]],
    *,
    isolation_level: int,
    timeout_s: float,
) -> dict[TopicPartition, tuple[int, str, int, int]]:
    request = storage_pb2.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level)  # type: ignore[arg-type]
    for tp, epoch in parts:
        spec, timestamp = specs[tp]
        request.partitions.add(
            topic=tp.topic,
            partition=tp.partition,
            spec=spec,
            timestamp_ms=timestamp,
            current_leader_epoch=epoch,
        )
    response = await storage_call(cluster, node, "ListOffsets", request, timeout_s)
    return {
        TopicPartition(r.topic, r.partition): (
            r.error_code,
            r.error_message,
            r.offset,
            r.timestamp_ms,
        )
        for r in response.partitions
    }
