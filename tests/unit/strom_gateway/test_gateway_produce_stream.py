"""The gateway's ProduceStream relay against leaders that leave partitions out of their answers:
small in-process storage nodes on real grpc.aio servers (a real leader never does that; these
stand for a faulty or mismatched one), the relay, router and metadata cache of the gateway."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

import grpc
import grpc.aio

from strom.errors import ErrorCode, is_retriable
from strom.protocol.v1 import common_pb2, controller_pb2, storage_pb2, storage_pb2_grpc
from strom_gateway.routing.byte_budget import ByteBudget
from strom_gateway.routing.controller import ControllerRouter
from strom_gateway.routing.data_path import DataPath
from strom_gateway.routing.leaders import LeaderRouter
from strom_gateway.routing.metadata_cache import MetadataCache
from strom_gateway.routing.produce_stream import ProduceStreamRelay

TOPIC = "t"


class ShortLeader(storage_pb2_grpc.StorageNodeServicer):
    """Answers each ProduceStream request with every partition but the last one."""

    async def ProduceStream(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        async for request in request_iterator:
            answered = list(request.partitions)[:-1]
            yield storage_pb2.ProduceResponse(
                correlation_id=request.correlation_id,
                partitions=[
                    storage_pb2.ProducePartitionResult(
                        topic=p.topic, partition=p.partition, base_offset=10 + p.partition
                    )
                    for p in answered
                ],
            )


class Metadata:
    """The controller's Metadata answer: partition p led by node ``leaders[p]``."""

    def __init__(self, leaders: Sequence[int], ports: dict[int, int]) -> None:
        self._answer = controller_pb2.MetadataResponse(
            brokers=[
                common_pb2.Node(node_id=n, host="127.0.0.1", port=port) for n, port in ports.items()
            ],
            topics=[
                controller_pb2.TopicMetadata(
                    name=TOPIC,
                    partitions=[
                        controller_pb2.PartitionMetadata(partition=p, leader_id=n, leader_epoch=1)
                        for p, n in enumerate(leaders)
                    ],
                )
            ],
        )

    async def call(self, method: str, request: Any, timeout_s: float) -> Any:
        assert method == "Metadata"
        return self._answer


async def relay_answers(leaders: Sequence[int], requests: list[list[int]]) -> list[Any]:
    """Responses to produce requests (each a list of partitions) sent on one relayed stream."""
    ports: dict[int, int] = {}
    servers = []
    for node in sorted(set(leaders)):
        server = grpc.aio.server()
        storage_pb2_grpc.add_StorageNodeServicer_to_server(ShortLeader(), server)
        ports[node] = server.add_insecure_port("127.0.0.1:0")
        servers.append(server)
        await server.start()
    metadata = MetadataCache(cast(ControllerRouter, Metadata(leaders, ports)), max_age_s=60)
    router = LeaderRouter(metadata, max_message_size=1 << 20)
    relay = ProduceStreamRelay(DataPath(router, ByteBudget(1 << 20)), timeout_s=5)

    async def produce() -> AsyncIterator[storage_pb2.ProduceRequest]:
        for n, partitions in enumerate(requests):
            yield storage_pb2.ProduceRequest(
                acks=-1,
                timeout_ms=5000,
                correlation_id=n,
                partitions=[
                    storage_pb2.ProducePartitionData(topic=TOPIC, partition=p, records=b"x")
                    for p in partitions
                ],
            )

    try:
        async with asyncio.timeout(20):
            return [r async for r in relay.run(produce())]
    finally:
        await router.close()
        await asyncio.gather(*(s.stop(None) for s in servers))


def outcome(response: Any) -> list[tuple[int, str, int]]:
    return [(p.partition, ErrorCode.Name(p.error_code), p.base_offset) for p in response.partitions]


def test_a_partition_the_leader_left_out_fails_retriably() -> None:
    """One leader for the whole request: the answer is not passed on short."""
    [response] = asyncio.run(relay_answers([1, 1], [[0, 1]]))
    assert response.correlation_id == 0
    assert outcome(response) == [(0, "NONE", 10), (1, "NETWORK_EXCEPTION", -1)]
    assert "answered 1 of the 2 partitions" in response.partitions[1].error_message


def test_short_answers_of_several_leaders_fail_only_the_partitions_left_out() -> None:
    """Shares on two leaders, each answering one partition fewer than sent; the stream goes
    on with the next request."""
    first, second = asyncio.run(relay_answers([1, 2, 1, 2], [[0, 1, 2, 3], [2]]))
    assert outcome(first) == [
        (0, "NONE", 10),
        (1, "NONE", 11),
        (2, "NETWORK_EXCEPTION", -1),
        (3, "NETWORK_EXCEPTION", -1),
    ]
    assert outcome(second) == [(2, "NETWORK_EXCEPTION", -1)]
    assert is_retriable(ErrorCode.NETWORK_EXCEPTION)
