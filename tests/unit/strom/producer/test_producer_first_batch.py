"""The idempotent producer's first batch of a partition goes alone.

A storage node takes any sequence as the first from a producer it does not know. Were a second
request for the partition sent before the first one's answer, a node that starts hosting a
just-created partition between the two would refuse the first (UNKNOWN_TOPIC_OR_PARTITION) and
append the second: the first batches would then be out of order for good, retried until
delivery_timeout_ms (seen in tests/integration/clients/test_producer.py, whose flush timed out).
The sender is driven by hand here; its node stream points at a port nothing listens on and is
never awaited, so no request leaves and answers are handed to ``on_response`` directly.
"""

from __future__ import annotations

import asyncio
import time

from strom.aio import Producer as AioProducer
from strom.cluster.client import PartitionLeader
from strom.protocol.v1 import storage_pb2

NOWHERE = "127.0.0.1:1"
TOPIC = "t"


def _requests_in_flight(producer: AioProducer) -> int:
    return sum(len(stream.pending) for stream in producer._sender._streams.values())


def test_a_partition_pipelines_only_once_its_first_batch_is_acknowledged() -> None:
    async def run() -> None:
        producer = AioProducer(NOWHERE, linger_ms=0, max_in_flight_requests_per_connection=5)
        sender, acc, cluster = producer._sender, producer._acc, producer._cluster
        cluster._brokers[1] = NOWHERE
        cluster._topics[TOPIC] = (PartitionLeader(TOPIC, 0, 1, 0, (1,), (1,)),)
        cluster._refreshed_at[TOPIC] = time.monotonic()
        sender.pid.set_id(7, 0)

        def send_one(value: bytes) -> None:
            assert acc.append(TOPIC, 0, 1000, None, value, None, 20) is not None
            sender._drain(time.monotonic() + 1)

        send_one(b"first")
        assert _requests_in_flight(producer) == 1
        send_one(b"second")
        assert _requests_in_flight(producer) == 1  # held back: the first is unanswered

        (stream,) = sender._streams.values()
        first = stream.pending.popleft()
        sender.on_response(
            stream,
            first,
            storage_pb2.ProduceResponse(
                correlation_id=first.correlation_id,
                partitions=[storage_pb2.ProducePartitionResult(topic=TOPIC, partition=0)],
            ),
        )
        sender._drain(time.monotonic() + 1)
        assert _requests_in_flight(producer) == 1  # the second, now the partition is known
        send_one(b"third")
        assert _requests_in_flight(producer) == 2  # pipelined from now on
        # A new epoch of the same producer id (a transaction's): the leader knows the producer
        # and takes the new epoch only from sequence 0, so the partition keeps pipelining.
        sender.pid.set_id(7, 1)
        assert not sender._unproven((TOPIC, 0))
        # A new producer id: unknown to the leader again.
        sender.pid.set_id(8, 0)
        assert sender._unproven((TOPIC, 0))
        await producer.close(0)

    asyncio.run(run())
