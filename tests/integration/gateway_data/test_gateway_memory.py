"""The gateway frees every request's record bytes by reference counting.

Services collect cyclic garbage rarely (``strom_server.runtime.gc_tuning``), so record bytes caught
in a reference cycle live on until a collection: a cycle in the fetch path once grew a
gateway's memory by its whole fetch rate (~140 MB/s). Here a gateway runs in this process
against a real cluster; with the cycle collector off, each data RPC is called 50 times and
the collector then must find no record bytes, only grpc.aio's own 5 objects per call.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable

import grpc
import pytest
from cluster_testkit import LocalCluster
from gateway_data_testkit import batch_of, fetch_request, produce_request

from strom import NewTopic
from strom.cluster import channel_options
from strom.protocol.v1 import gateway_pb2, gateway_pb2_grpc, storage_pb2
from strom_gateway.__main__ import build
from strom_gateway.config import GatewayConfig
from strom_server.rpc.server import GrpcServer
from strom_server.runtime.config import load_config

TOPIC = "gateway-memory"
CALLS = 50
BIG = 4096  # bytes: record data, not a small key or header


def _cycles_left() -> tuple[int, int]:
    """(objects the collector found, record-sized byte strings they held)."""
    found = gc.collect()
    held = {
        id(r)
        for o in gc.garbage
        for r in gc.get_referents(o)
        if isinstance(r, bytes | bytearray | memoryview) and len(r) >= BIG
    }
    gc.garbage.clear()
    return found, len(held)


@pytest.mark.parametrize(
    "rpc",
    ["produce", "produce_two_leaders", "fetch", "fetch_two_leaders", "records", "fetch_records"],
)
def test_data_rpcs_leave_no_record_bytes_to_the_cycle_collector(
    cluster: LocalCluster, rpc: str
) -> None:
    with cluster.admin() as admin:
        if TOPIC not in admin.list_topics():
            admin.create_topics([NewTopic(TOPIC, 2, 1)])
    for partition in (0, 1):
        cluster.produce(TOPIC, partition, [b"v" * 10_000] * 5)
    batch = batch_of([b"r" * 10_000] * 3)
    etcd = f"127.0.0.1:{cluster.spec.etcd_client_port}"

    async def scenario() -> tuple[int, int]:
        config = load_config(
            GatewayConfig,
            ["--listen", "127.0.0.1:0", "--kafka-port", "127.0.0.1:0", "--etcd-endpoints", etcd],
        )
        server = GrpcServer(config, "strom-gateway")
        await build(config, server)
        port = await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=channel_options())
        stub = gateway_pb2_grpc.GatewayStub(channel)

        def fetch(*partitions: int) -> storage_pb2.FetchRequest:
            return fetch_request(TOPIC, list(partitions), partition_max_bytes=1 << 20)

        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "produce": lambda: stub.Produce(produce_request(TOPIC, {0: batch}, acks=1)),
            "produce_two_leaders": lambda: stub.Produce(
                produce_request(TOPIC, {0: batch, 1: batch}, acks=1)
            ),
            "fetch": lambda: stub.Fetch(fetch(0)),
            "fetch_two_leaders": lambda: stub.Fetch(fetch(0, 1)),
            "records": lambda: stub.ProduceRecords(
                gateway_pb2.ProduceRecordsRequest(
                    topic=TOPIC,
                    partition=-1,
                    acks=1,
                    records=[gateway_pb2.Record(value=b"x" * 10_000) for _ in range(3)],
                )
            ),
            "fetch_records": lambda: stub.FetchRecords(
                gateway_pb2.FetchRecordsRequest(topic=TOPIC, partition=0, offset=0)
            ),
        }
        call = calls[rpc]
        try:
            for _ in range(5):  # warm-up: channels, metadata, handler wrappers
                await call()
            gc.collect()
            gc.disable()
            gc.set_debug(gc.DEBUG_SAVEALL)
            try:
                for _ in range(CALLS):
                    await call()
                return _cycles_left()
            finally:
                gc.set_debug(0)
                gc.enable()
        finally:
            await channel.close()
            await server.stop()

    found, big = asyncio.run(scenario())
    assert big == 0, f"{big} record-sized byte strings were left in reference cycles"
    # grpc.aio leaves 5 objects per server call in a cycle of its own; ours would add more.
    assert found <= 6 * CALLS, f"{found} objects in reference cycles after {CALLS} calls"
