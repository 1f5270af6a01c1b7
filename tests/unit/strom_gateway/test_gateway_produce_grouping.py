"""A produce written in pieces (the Kafka listener's ``RawProduce``) through the gateway's relay:
grouped by leader once, by the relay, and each leader's share and each retry after a
leadership move written from the pieces and sent as written, never parsed back. Small
in-process storage nodes on real grpc.aio servers (they take their requests as bytes, to
compare them with what was written), the relay, router and metadata cache of the gateway."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

import grpc
import grpc.aio

from strom.errors import ErrorCode
from strom.protocol.v1 import common_pb2, controller_pb2, storage_pb2, storage_pb2_grpc
from strom_gateway.kafka.upstream_wire import ProduceRequestWriter
from strom_gateway.routing.byte_budget import ByteBudget
from strom_gateway.routing.controller import ControllerRouter
from strom_gateway.routing.data_path import DataPath
from strom_gateway.routing.leaders import LeaderRouter
from strom_gateway.routing.metadata_cache import MetadataCache
from strom_gateway.routing.produce_stream import ProduceStreamRelay, RawProduce
from strom_gateway.routing.wire import PartitionRef
from strom_server.rpc.raw_methods import add_with_raw_methods

TOPIC = "t"


class Leaders:
    """The controller's Metadata answer (partition p led by ``leaders[p]``) and the storage
    nodes, which record the bytes of every request and answer each partition they lead."""

    def __init__(self, leaders: list[int]) -> None:
        self.leaders = leaders
        self.ports: dict[int, int] = {}
        #: (node, RPC, the request's bytes) of each request received.
        self.received: list[tuple[int, str, bytes]] = []
        #: (node, partition) -> the partition's next leader: that node answers it
        #: NOT_LEADER_OR_FOLLOWER once, the controller names the next one from then on.
        self.moves: dict[tuple[int, int], int] = {}

    async def call(self, method: str, request: Any, timeout_s: float) -> Any:
        assert method == "Metadata"
        return controller_pb2.MetadataResponse(
            brokers=[
                common_pb2.Node(node_id=n, host="127.0.0.1", port=p) for n, p in self.ports.items()
            ],
            topics=[
                controller_pb2.TopicMetadata(
                    name=TOPIC,
                    partitions=[
                        controller_pb2.PartitionMetadata(partition=p, leader_id=n, leader_epoch=1)
                        for p, n in enumerate(self.leaders)
                    ],
                )
            ],
        )

    def answer(self, node: int, rpc: str, raw: bytes) -> storage_pb2.ProduceResponse:
        self.received.append((node, rpc, raw))
        results = []
        for p in storage_pb2.ProduceRequest.FromString(raw).partitions:
            code = common_pb2.NONE
            if (node, p.partition) in self.moves:
                self.leaders[p.partition] = self.moves.pop((node, p.partition))
                code = common_pb2.NOT_LEADER_OR_FOLLOWER
            offset = -1 if code else 100 * node + p.partition
            results.append(
                storage_pb2.ProducePartitionResult(
                    topic=p.topic, partition=p.partition, error_code=code, base_offset=offset
                )
            )
        return storage_pb2.ProduceResponse(partitions=results)


class Node(storage_pb2_grpc.StorageNodeServicer):
    def __init__(self, node: int, leaders: Leaders) -> None:
        self.node = node
        self.leaders = leaders

    async def Produce(self, raw: bytes, context: Any) -> storage_pb2.ProduceResponse:
        return self.leaders.answer(self.node, "Produce", raw)

    async def ProduceStream(
        self, requests: AsyncIterator[bytes], context: Any
    ) -> AsyncIterator[storage_pb2.ProduceResponse]:
        async for raw in requests:
            yield self.leaders.answer(self.node, "ProduceStream", raw)


async def relay_one(leaders: Leaders, records: Sequence[bytes]) -> tuple[Any, list[list[int]]]:
    """The answer to one produce of ``records[p]`` to partition p, and the partitions of each
    request written for it."""
    servers = []
    for node in sorted(set(leaders.leaders) | set(leaders.moves.values())):
        server = grpc.aio.server()
        add_with_raw_methods(
            storage_pb2_grpc.add_StorageNodeServicer_to_server,
            Node(node, leaders),
            server,
            raw_requests=("Produce", "ProduceStream"),
        )
        leaders.ports[node] = server.add_insecure_port("127.0.0.1:0")
        servers.append(server)
        await server.start()
    metadata = MetadataCache(cast(ControllerRouter, leaders), max_age_s=60)
    router = LeaderRouter(metadata, max_message_size=1 << 20)
    relay = ProduceStreamRelay(DataPath(router, ByteBudget(1 << 20)), timeout_s=5)
    entries = [(TOPIC, p, memoryview(r)) for p, r in enumerate(records)]
    writer = ProduceRequestWriter(
        acks=-1, timeout_ms=5000, client_id="kafka", transactional_id="", entries=entries
    )
    written: list[list[int]] = []
    wrote: list[bytes] = []

    def write(indexes: Sequence[int]) -> bytes:
        written.append(list(indexes))
        wrote.append(writer.write(indexes))
        return wrote[-1]

    refs = [PartitionRef(TOPIC, p, p) for p in range(len(records))]

    async def requests() -> AsyncIterator[RawProduce]:
        yield RawProduce(refs, write, writer.size)

    try:
        async with asyncio.timeout(20):
            [response] = [r async for r in relay.run(requests())]
    finally:
        await router.close()
        await asyncio.gather(*(s.stop(None) for s in servers))
    assert sorted(raw for _, _, raw in leaders.received) == sorted(wrote)  # sent as written
    return response, written


def outcome(response: Any) -> list[tuple[int, str, int]]:
    return [(p.partition, ErrorCode.Name(p.error_code), p.base_offset) for p in response.partitions]


def test_a_produce_over_two_leaders_is_split_from_its_pieces() -> None:
    leaders = Leaders([1, 2, 1])
    response, written = asyncio.run(relay_one(leaders, [b"a", b"b", b"c"]))
    assert written == [[0, 2], [1]]
    assert sorted((node, rpc) for node, rpc, _ in leaders.received) == [
        (1, "ProduceStream"),
        (2, "ProduceStream"),
    ]
    assert outcome(response) == [(0, "NONE", 100), (1, "NONE", 201), (2, "NONE", 102)]


def test_a_partition_whose_leader_moved_is_retried_from_its_piece() -> None:
    leaders = Leaders([1, 1, 2])
    leaders.moves[(1, 1)] = 2  # node 1 answers NOT_LEADER_OR_FOLLOWER for partition 1: now 2's
    response, written = asyncio.run(relay_one(leaders, [b"a", b"b", b"c"]))
    assert written == [[0, 1], [2], [1]]
    assert sorted((node, rpc) for node, rpc, _ in leaders.received) == [
        (1, "ProduceStream"),
        (2, "Produce"),
        (2, "ProduceStream"),
    ]
    assert outcome(response) == [(0, "NONE", 100), (1, "NONE", 201), (2, "NONE", 202)]


def test_a_produce_to_one_leader_is_written_whole_once() -> None:
    leaders = Leaders([3, 3])
    response, written = asyncio.run(relay_one(leaders, [b"a", b""]))
    assert written == [[0, 1]]
    assert outcome(response) == [(0, "NONE", 300), (1, "NONE", 301)]
