"""``MarkerSender``: writes the markers that end a transaction, the manager's ``MarkerWriter``.

Data partitions are grouped by their leader (metadata from the coordinator's ClusterClient) and
each leader gets one StorageNode.WriteTxnMarkers carrying the transaction's producer id, its
epoch, the decision and this coordinator's epoch of the ``__transaction_state`` partition.
The transaction's groups go to the coordinator owning each group (``runtime.peers``: found
through the ownership of ``__consumer_offsets``, possibly this very process) as
GroupCoordinator.WriteTxnMarkers with ``group_ids``: WriteTxnMarkers is internal, so never
through the gateway.

Everything is retried with backoff until acknowledged (a leader move refreshes the metadata);
only TRANSACTION_COORDINATOR_FENCED stops: a newer owner of the transaction's state partition
exists and finishes the transaction itself. A partition of a topic deleted meanwhile needs no
marker.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import grpc

from strom.cluster import METADATA_ERRORS, ClusterClient, from_rpc_error, storage_call
from strom.cluster.retry import Backoff
from strom.errors import (
    StromError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from strom.protocol.v1 import common_pb2, transaction_pb2
from strom.types import TopicPartition
from strom_coordinator.group.records import OFFSETS_TOPIC
from strom_coordinator.runtime.peers import PeerCoordinators
from strom_coordinator.txn.completion import MarkerJob
from strom_server.runtime.logs import get_logger

__all__ = ["MarkerSender"]

log = get_logger(__name__)

_E = common_pb2.ErrorCode
_BACKOFF_S = 0.1
_BACKOFF_MAX_S = 2.0


class MarkerSender:
    """Implements ``txn.completion.MarkerWriter`` (see the module docstring)."""

    def __init__(
        self, cluster: ClusterClient, peers: PeerCoordinators, *, timeout_s: float = 10.0
    ) -> None:
        self._cluster = cluster
        self._peers = peers
        self._timeout_s = timeout_s

    async def write(self, job: MarkerJob) -> None:
        partitions = {TopicPartition(t, p) for t, p in job.partitions if t != OFFSETS_TOPIC}
        groups = set(job.groups)
        backoff = Backoff(_BACKOFF_S, _BACKOFF_MAX_S)
        while True:
            done_partitions, done_groups = await asyncio.gather(
                self._to_leaders(job, partitions), self._to_groups(job, groups)
            )
            partitions -= done_partitions
            groups -= done_groups
            if not partitions and not groups:
                return
            await backoff.sleep()

    # --- partition leaders ---------------------------------------------------------------

    async def _to_leaders(
        self, job: MarkerJob, partitions: set[TopicPartition]
    ) -> set[TopicPartition]:
        done: set[TopicPartition] = set()
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in partitions:
            try:
                by_leader[(await self._cluster.leader(tp)).leader].append(tp)
            except UnknownTopicOrPartitionError:
                log.info("no marker for a deleted partition", topic=tp.topic,
                         partition=tp.partition)  # fmt: skip
                done.add(tp)
            except StromError as exc:
                log.info("marker leader unknown; retrying", topic=tp.topic,
                         partition=tp.partition, error=str(exc))  # fmt: skip
                self._cluster.mark_stale(tp.topic)
        results = await asyncio.gather(
            *(self._to_leader(job, node, tps) for node, tps in by_leader.items())
        )
        for acknowledged in results:
            done |= acknowledged
        return done

    async def _to_leader(
        self, job: MarkerJob, node: int, partitions: list[TopicPartition]
    ) -> set[TopicPartition]:
        request = transaction_pb2.WriteTxnMarkersRequest(
            markers=[self._marker(job, partitions)], timeout_ms=int(self._timeout_s * 1000)
        )
        try:
            response = await storage_call(
                self._cluster, node, "WriteTxnMarkers", request, self._timeout_s + 1
            )
        except StromError as exc:
            log.info("markers not written; retrying", node=node, error=str(exc))
            for tp in partitions:
                self._cluster.mark_stale(tp.topic)
            return set()
        done: set[TopicPartition] = set()
        for marker in response.markers:
            for result in marker.partitions:
                tp = TopicPartition(result.topic, result.partition)
                code = result.error_code
                if code == _E.NONE:
                    done.add(tp)
                elif code == _E.TRANSACTION_COORDINATOR_FENCED:
                    raise TransactionCoordinatorFencedError(
                        f"{tp.topic}-{tp.partition}: {result.error_message}"
                    )
                else:
                    if code in METADATA_ERRORS:
                        self._cluster.mark_stale(tp.topic)
                    log.info("marker refused; retrying", topic=tp.topic, partition=tp.partition,
                             error_code=_E.Name(code), error=result.error_message)  # fmt: skip
        return done

    # --- group coordinators ----------------------------------------------------------------

    async def _to_groups(self, job: MarkerJob, groups: set[str]) -> set[str]:
        results = await asyncio.gather(*(self._to_group(job, g) for g in sorted(groups)))
        return {g for g, ok in zip(sorted(groups), results, strict=True) if ok}

    async def _to_group(self, job: MarkerJob, group_id: str) -> bool:
        located = self._peers.locate(OFFSETS_TOPIC, group_id)
        if located is None:
            log.info("group coordinator unknown; retrying", group=group_id)
            return False
        address, offsets_partition = located
        marker = self._marker(job, [TopicPartition(OFFSETS_TOPIC, offsets_partition)])
        marker.group_ids.append(group_id)
        request = transaction_pb2.WriteTxnMarkersRequest(
            markers=[marker], timeout_ms=int(self._timeout_s * 1000)
        )
        try:
            response = await self._peers.groups(address).WriteTxnMarkers(
                request, timeout=self._timeout_s + 1
            )
        except grpc.RpcError as exc:
            log.info("group markers not written; retrying", group=group_id,
                     error=str(from_rpc_error(exc, address)))  # fmt: skip
            return False
        codes = [
            (g.error_code, g.error_message)
            for m in response.markers
            for g in m.groups
            if g.group_id == group_id
        ]
        if not codes:  # answered per partition only
            codes = [
                (p.error_code, p.error_message) for m in response.markers for p in m.partitions
            ]
        if not codes:
            log.info("group markers not acknowledged; retrying", group=group_id)
            return False
        for code, message in codes:
            if code == _E.TRANSACTION_COORDINATOR_FENCED:
                raise TransactionCoordinatorFencedError(f"group {group_id}: {message}")
            if code != _E.NONE:
                log.info("group marker refused; retrying", group=group_id,
                         error_code=_E.Name(code), error=message)  # fmt: skip
                return False
        return True

    @staticmethod
    def _marker(job: MarkerJob, partitions: list[TopicPartition]) -> transaction_pb2.WriteTxnMarker:
        return transaction_pb2.WriteTxnMarker(
            producer_id=job.producer_id,
            producer_epoch=job.producer_epoch,
            committed=job.committed,
            coordinator_epoch=job.coordinator_epoch,
            partitions=[
                common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)
                for tp in partitions
            ],
            transactional_id=job.transactional_id,
        )
