"""Who wrote each copy of a duplicated pipeline record: read from the output topic's log itself.

Every committed copy of an input record in ``txn-out`` is named by its offset, the producer id
and epoch of the batch that holds it (one epoch per transaction, KIP-890, so the pair names the
transaction), the transactional id that owns the producer id, and the offset of the COMMIT
marker that made it visible. A duplicated input then shows which transactions wrote it twice.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import grpc
from cluster_testkit import LocalCluster

from strom.cluster import channel_options
from strom.protocol.v1 import common_pb2, storage_pb2, storage_pb2_grpc
from strom.records import ControlRecordType, DecodedBatch, decode_batches, decode_control_record

__all__ = ["OutputCopy", "committed_copies", "describe_duplicates"]

_FETCH_BYTES = 8 << 20


@dataclass(frozen=True)
class OutputCopy:
    """One committed output record carrying an input id."""

    partition: int
    offset: int
    producer_id: int
    producer_epoch: int
    #: The offset of the COMMIT marker of its transaction.
    marker_offset: int

    def describe(self, topic: str, owners: dict[int, str]) -> str:
        owner = owners.get(self.producer_id, "transactional id unknown")
        return (
            f"{topic}-{self.partition}@{self.offset} by {owner} (producer id {self.producer_id}, "
            f"epoch {self.producer_epoch}, committed by the marker at {self.marker_offset})"
        )


def committed_copies(
    cluster: LocalCluster, topic: str, partitions: int
) -> dict[str, list[OutputCopy]]:
    """``{input id: [copy, ...]}`` over the committed records of ``topic`` (values are
    ``<in partition>:<in offset>:<input id>``)."""
    copies: dict[str, list[OutputCopy]] = defaultdict(list)
    for partition in range(partitions):
        # (producer id, epoch) -> [(offset, input id)] of the transaction still open in the log.
        open_txns: dict[tuple[int, int], list[tuple[int, str]]] = defaultdict(list)
        for batch in _log_batches(cluster, topic, partition):
            h = batch.header
            key = (h.producer_id, h.producer_epoch)
            if not h.is_control:
                for record in batch.records:
                    input_id = (record.value or b"").decode().split(":", 2)[2]
                    open_txns[key].append((record.offset, input_id))
                continue
            (control,) = batch.records
            marker = decode_control_record(control.key, control.value)
            written = open_txns.pop(key, [])
            if marker.type == ControlRecordType.COMMIT:
                for offset, input_id in written:
                    copies[input_id].append(OutputCopy(partition, offset, *key, h.base_offset))
    return copies


def describe_duplicates(
    copies: dict[str, list[OutputCopy]], topic: str, owners: dict[int, str]
) -> list[str]:
    """One line per input record with more than one committed copy."""
    return [
        f"input {input_id}: " + "; ".join(c.describe(topic, owners) for c in found)
        for input_id, found in sorted(copies.items())
        if len(found) > 1
    ]


def _log_batches(cluster: LocalCluster, topic: str, partition: int) -> list[DecodedBatch]:
    """Every batch of ``topic``-``partition`` below its high watermark, from its leader."""
    leader = cluster.describe(topic).partitions[partition].leader
    found: list[DecodedBatch] = []
    offset = 0
    with grpc.insecure_channel(cluster.storage_address(leader), options=channel_options()) as ch:
        stub = storage_pb2_grpc.StorageNodeStub(ch)
        while True:
            fetch = storage_pb2.FetchPartition(
                topic=topic,
                partition=partition,
                fetch_offset=offset,
                partition_max_bytes=_FETCH_BYTES,
            )
            request = storage_pb2.FetchRequest(
                replica_id=-1, max_bytes=_FETCH_BYTES, partitions=[fetch]
            )
            (result,) = stub.Fetch(request, timeout=30).partitions
            if result.error_code != common_pb2.NONE:
                raise AssertionError(f"{topic}-{partition}@{offset}: {result.error_message}")
            batches = list(decode_batches(result.records, allow_truncated_tail=True))
            if not batches:
                return found
            found += batches
            offset = batches[-1].header.last_offset + 1
