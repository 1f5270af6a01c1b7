"""Raw calls through the gateway's data path (the Gateway stub with StorageNode's messages)."""

from __future__ import annotations

import time

import grpc

from strom.cluster import channel_options
from strom.protocol.v1 import gateway_pb2_grpc, storage_pb2
from strom.records import encode_batch

__all__ = ["batch_of", "fetch_request", "gateway_stub", "produce_request"]


def gateway_stub(address: str) -> tuple[grpc.Channel, gateway_pb2_grpc.GatewayStub]:
    channel = grpc.insecure_channel(address, options=channel_options())
    return channel, gateway_pb2_grpc.GatewayStub(channel)


def batch_of(values: list[bytes], key: bytes | None = None) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([(now, key, v) for v in values])


def produce_request(
    topic: str, batches: dict[int, bytes], *, acks: int = -1, correlation_id: int = 0
) -> storage_pb2.ProduceRequest:
    return storage_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=10000,
        correlation_id=correlation_id,
        partitions=[
            storage_pb2.ProducePartitionData(topic=topic, partition=p, records=b)
            for p, b in batches.items()
        ],
    )


def fetch_request(
    topic: str,
    partitions: list[int],
    *,
    max_bytes: int = 8 << 20,
    partition_max_bytes: int = 4 << 20,
) -> storage_pb2.FetchRequest:
    """A consumer's Fetch of ``partitions`` from offset 0."""
    return storage_pb2.FetchRequest(
        replica_id=-1,
        max_bytes=max_bytes,
        partitions=[
            storage_pb2.FetchPartition(
                topic=topic, partition=p, fetch_offset=0, partition_max_bytes=partition_max_bytes
            )
            for p in partitions
        ],
    )
