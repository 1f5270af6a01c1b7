"""Produce, Fetch, ListOffsets and DeleteRecords through a real gateway: split by leader,
merged in request order, batches passed through byte for byte, pipelined streams, long poll,
the record RPCs, and a second gateway with a small in-flight budget."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import grpc
import pytest
from cluster_testkit import LocalCluster
from extreme_requests import send_extreme_requests
from gateway_data_testkit import batch_of, fetch_request, gateway_stub, produce_request
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from strom_testkit import free_port, wait_until

from strom import NewTopic
from strom.errors import ErrorCode
from strom.producer.partitioner import murmur2_partition
from strom.protocol.v1 import common_pb2, gateway_pb2, storage_pb2, storage_pb2_grpc
from strom.records import iter_records
from strom_server.rpc.health_probe import grpc_serving

TOPIC = "gw-data"
PARTITIONS = 6


@pytest.fixture(scope="module")
def topic(cluster: LocalCluster) -> str:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
    wait_until(lambda: all(p.leader >= 0 for p in cluster.describe(TOPIC).partitions))
    return TOPIC


@pytest.fixture(scope="module")
def stub(cluster: LocalCluster) -> Iterator[object]:
    channel, gateway = gateway_stub(cluster.gateway)
    yield gateway
    channel.close()


def fetch_all(stub: object, topic: str, partitions: list[int]) -> storage_pb2.FetchResponse:
    return stub.Fetch(fetch_request(topic, partitions), timeout=30)  # type: ignore[attr-defined,no-any-return]


def test_multi_leader_produce_and_fetch_keep_request_order(
    cluster: LocalCluster, topic: str, stub: object
) -> None:
    leaders = {p.partition: p.leader for p in cluster.describe(topic).partitions}
    assert len(set(leaders.values())) > 1, "the test needs partitions on several leaders"
    order = [4, 1, 5, 0, 3, 2]
    batches = {p: batch_of([f"p{p}-{i}".encode() for i in range(3)]) for p in order}
    response = stub.Produce(produce_request(topic, batches, correlation_id=77), timeout=30)  # type: ignore[attr-defined]
    assert response.correlation_id == 77
    assert [r.partition for r in response.partitions] == order
    assert all(r.error_code == 0 and r.base_offset == 0 for r in response.partitions)

    fetched = fetch_all(stub, topic, order)
    assert [r.partition for r in fetched.partitions] == order
    for result in fetched.partitions:
        assert result.error_code == 0
        assert result.high_watermark == 3
        values = [r.value for r in iter_records(result.records)]
        assert values == [f"p{result.partition}-{i}".encode() for i in range(3)]


def test_fetched_batches_are_the_leaders_bytes(
    cluster: LocalCluster, topic: str, stub: object
) -> None:
    """Design rule 1: the gateway passes batches through untouched."""
    partition = 2
    through_gateway = fetch_all(stub, topic, [partition]).partitions[0].records
    leader = cluster.describe(topic).partitions[partition].leader
    with grpc.insecure_channel(cluster.storage_address(leader)) as channel:
        direct = fetch_all(storage_pb2_grpc.StorageNodeStub(channel), topic, [partition])
    assert through_gateway == direct.partitions[0].records
    assert len(through_gateway) > 0


def test_unknown_topic_fails_at_once(stub: object) -> None:
    started = time.monotonic()
    response = stub.Produce(produce_request("no-such-topic", {0: batch_of([b"x"])}), timeout=30)  # type: ignore[attr-defined]
    assert response.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert time.monotonic() - started < 5


def test_list_offsets_and_delete_records(topic: str, stub: object) -> None:
    request = storage_pb2.ListOffsetsRequest(
        replica_id=-1,
        partitions=[
            storage_pb2.ListOffsetsPartition(topic=topic, partition=p, spec=common_pb2.LATEST)
            for p in (5, 0)
        ],
    )
    answer = stub.ListOffsets(request, timeout=30)  # type: ignore[attr-defined]
    assert [(r.partition, r.error_code, r.offset) for r in answer.partitions] == [
        (5, 0, 3),
        (0, 0, 3),
    ]
    deleted = stub.DeleteRecords(  # type: ignore[attr-defined]
        storage_pb2.DeleteRecordsRequest(
            partitions=[storage_pb2.DeleteRecordsPartition(topic=topic, partition=5, offset=1)],
            timeout_ms=10000,
        ),
        timeout=30,
    )
    assert [(r.error_code, r.low_watermark) for r in deleted.partitions] == [(0, 1)]


def test_delete_records_answers_once_the_in_sync_replicas_start_there(
    cluster: LocalCluster, stub: object
) -> None:
    """As Kafka's delayed DeleteRecords: the leader's log starts at the offset at once
    (ListOffsets earliest says so), the answer waits for every in-sync follower's log to start
    there too: a paused follower holds it (REQUEST_TIMED_OUT), a running one lets it through."""
    name = "gw-trim"
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(name, 1, 3)])
    cluster.wait_hosted(name, 0)
    produced = stub.Produce(  # type: ignore[attr-defined]
        produce_request(name, {0: batch_of([b"a", b"b", b"c", b"d"])}), timeout=30
    )
    assert produced.partitions[0].error_code == 0
    (partition,) = cluster.describe(name).partitions
    wait_until(lambda: len(cluster.describe(name).partitions[0].isr) == 3, 30, "a full ISR")
    follower = next(r for r in partition.replicas if r != partition.leader)

    def delete(offset: int, timeout_ms: int) -> tuple[int, int]:
        answer = stub.DeleteRecords(  # type: ignore[attr-defined]
            storage_pb2.DeleteRecordsRequest(
                partitions=[
                    storage_pb2.DeleteRecordsPartition(topic=name, partition=0, offset=offset)
                ],
                timeout_ms=timeout_ms,
            ),
            timeout=30,
        )
        (result,) = answer.partitions
        return result.error_code, result.low_watermark

    def earliest() -> int:
        spec = storage_pb2.ListOffsetsPartition(topic=name, partition=0, spec=common_pb2.EARLIEST)
        answer = stub.ListOffsets(  # type: ignore[attr-defined]
            storage_pb2.ListOffsetsRequest(replica_id=-1, partitions=[spec]), timeout=30
        )
        return answer.partitions[0].offset  # type: ignore[no-any-return]

    assert delete(1, 10000) == (0, 1)
    cluster.signal(f"storage-{follower}", signal.SIGSTOP)
    try:
        assert delete(3, 1000) == (ErrorCode.REQUEST_TIMED_OUT, -1)
        assert earliest() == 3  # the leader's log starts there already
    finally:
        cluster.signal(f"storage-{follower}", signal.SIGCONT)
    assert delete(3, 10000) == (0, 3)
    assert earliest() == 3


def test_produce_stream_is_pipelined_in_order(topic: str, stub: object) -> None:
    partition = 1
    start = fetch_all(stub, topic, [partition]).partitions[0].high_watermark
    requests = [
        produce_request(topic, {partition: batch_of([b"s%d" % i])}, correlation_id=i)
        for i in range(40)
    ]
    responses = list(stub.ProduceStream(iter(requests), timeout=60))  # type: ignore[attr-defined]
    assert [r.correlation_id for r in responses] == list(range(40))
    offsets = [r.partitions[0].base_offset for r in responses]
    assert offsets == list(range(start, start + 40))


def test_fetch_long_polls_through_the_gateway(topic: str, stub: object) -> None:
    partition = 3
    end = fetch_all(stub, topic, [partition]).partitions[0].high_watermark
    request = storage_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=600,
        min_bytes=1,
        partitions=[storage_pb2.FetchPartition(topic=topic, partition=partition, fetch_offset=end)],
    )
    started = time.monotonic()
    result = stub.Fetch(request, timeout=30).partitions[0]  # type: ignore[attr-defined]
    assert result.error_code == 0 and result.records == b""
    assert time.monotonic() - started >= 0.5


def test_produce_records_and_fetch_records(topic: str, stub: object) -> None:
    key = b"user-42"
    produced = stub.ProduceRecords(  # type: ignore[attr-defined]
        gateway_pb2.ProduceRecordsRequest(
            topic=topic,
            partition=-1,
            acks=-1,
            compression=gateway_pb2.COMPRESSION_LZ4,
            records=[
                gateway_pb2.Record(
                    key=key,
                    value=b"v%d" % i,
                    headers=[
                        gateway_pb2.RecordHeader(key="h", value=b"1"),
                        gateway_pb2.RecordHeader(key="none"),
                    ],
                    timestamp_ms=1_700_000_000_000 + i,
                )
                for i in range(5)
            ],
        ),
        timeout=30,
    )
    assert produced.error_code == 0, produced.error_message
    assert produced.partition == murmur2_partition(key, PARTITIONS)

    fetched = stub.FetchRecords(  # type: ignore[attr-defined]
        gateway_pb2.FetchRecordsRequest(
            topic=topic,
            partition=produced.partition,
            offset=produced.base_offset + 1,
            max_records=3,
        ),
        timeout=30,
    )
    assert fetched.error_code == 0, fetched.error_message
    assert [r.value for r in fetched.records] == [b"v1", b"v2", b"v3"]
    assert [r.offset for r in fetched.records] == [produced.base_offset + i for i in (1, 2, 3)]
    assert fetched.next_offset == produced.base_offset + 4
    first = fetched.records[0]
    assert first.key == key and first.timestamp_ms == 1_700_000_000_001
    assert [(h.key, h.HasField("value")) for h in first.headers] == [("h", True), ("none", False)]


def test_produce_records_refuses_keys_of_several_partitions(topic: str, stub: object) -> None:
    keys = [b"a", b"b", b"c", b"d", b"e", b"f", b"g"]
    assert len({murmur2_partition(k, PARTITIONS) for k in keys}) > 1
    answer = stub.ProduceRecords(  # type: ignore[attr-defined]
        gateway_pb2.ProduceRecordsRequest(
            topic=topic,
            partition=-1,
            acks=-1,
            records=[gateway_pb2.Record(key=k, value=b"x") for k in keys],
        ),
        timeout=30,
    )
    assert answer.error_code == ErrorCode.INVALID_REQUEST
    missing = stub.ProduceRecords(  # type: ignore[attr-defined]
        gateway_pb2.ProduceRecordsRequest(
            topic="nope", partition=-1, acks=-1, records=[gateway_pb2.Record(value=b"x")]
        ),
        timeout=30,
    )
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_second_gateway_with_a_small_budget(cluster: LocalCluster, topic: str) -> None:
    """Gateways run side by side; a request larger than the whole budget is refused clearly,
    smaller ones wait their turn."""
    address = f"127.0.0.1:{free_port()}"
    log = open(cluster.spec.data_dir / "logs" / "gateway-small.log", "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "strom_gateway",
            "--listen",
            address,
            "--kafka-port",
            "127.0.0.1:0",
            "--etcd-endpoints",
            f"127.0.0.1:{cluster.spec.etcd_client_port}",
            "--max-inflight-bytes",
            "1MiB",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: grpc_serving(address), 30, "second gateway serving")
        channel, small = gateway_stub(address)
        with channel:
            big = produce_request(topic, {0: batch_of([b"x" * (1 << 20), b"y"])})
            with pytest.raises(grpc.RpcError) as raised:
                small.Produce(big, timeout=30)
            assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max-inflight-bytes" in (raised.value.details() or "")
            requests = [
                produce_request(topic, {0: batch_of([b"z" * 300_000])}, correlation_id=i)
                for i in range(8)
            ]
            answers = list(small.ProduceStream(iter(requests), timeout=60))
            assert [a.partitions[0].error_code for a in answers] == [0] * 8
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def test_produce_follows_a_new_leader(cluster: LocalCluster, topic: str, stub: object) -> None:
    """The gateway's cached leader is stopped: NOT_LEADER / unreachable -> metadata refresh
    -> the same request succeeds on the new leader, within the deadline."""
    partition = 0
    stub.Produce(produce_request(topic, {partition: batch_of([b"warm"])}), timeout=30)  # type: ignore[attr-defined]
    old = cluster.describe(topic).partitions[partition].leader
    cluster.stop(f"storage-{old}")
    try:
        response = stub.Produce(  # type: ignore[attr-defined]
            produce_request(topic, {partition: batch_of([b"after failover"])}), timeout=60
        )
        assert response.partitions[0].error_code == 0, response.partitions[0].error_message
        assert cluster.describe(topic).partitions[partition].leader != old
    finally:
        cluster.restart(f"storage-{old}")
        cluster.wait_for_brokers()


def test_health_and_reflection(cluster: LocalCluster) -> None:
    assert grpc_serving(cluster.gateway)
    with grpc.insecure_channel(cluster.gateway) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        (answer,) = stub.ServerReflectionInfo(iter([request]), timeout=10)
    names = {s.name for s in answer.list_services_response.service}
    assert {"strom.protocol.v1.Gateway", "grpc.health.v1.Health"} <= names


def test_topics_created_or_grown_after_the_gateway_cached_them(
    cluster: LocalCluster, stub: object
) -> None:
    """A topic the gateway saw missing, or a partition it has not seen yet, is looked up again
    rather than refused from the cache."""
    topic = "gw-late"
    missing = stub.Produce(produce_request(topic, {0: batch_of([b"x"])}), timeout=30)  # type: ignore[attr-defined]
    assert missing.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    wait_until(lambda: cluster.describe(topic).partitions[0].leader >= 0)
    created = stub.Produce(produce_request(topic, {0: batch_of([b"x"])}), timeout=30)  # type: ignore[attr-defined]
    assert created.partitions[0].error_code == 0, created.partitions[0].error_message

    with cluster.admin() as admin:
        admin.create_partitions({topic: 2})
    wait_until(lambda: len(cluster.describe(topic).partitions) == 2)
    wait_until(lambda: cluster.describe(topic).partitions[1].leader >= 0)
    grown = stub.Produce(produce_request(topic, {1: batch_of([b"y"])}), timeout=30)  # type: ignore[attr-defined]
    assert grown.partitions[0].error_code == 0, grown.partitions[0].error_message


# Unary RPCs that neither change cluster metadata nor wait for other group members.
FUZZED_METHODS = [
    "Metadata", "Produce", "Fetch", "ListOffsets", "ProduceRecords", "FetchRecords",
    "FindCoordinator", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch", "ListGroups",
    "DescribeGroups", "InitProducerId", "DescribeConfigs", "ListPartitionReassignments",
]  # fmt: skip


@pytest.mark.parametrize("method", FUZZED_METHODS)
def test_requests_with_extreme_field_values_never_fail_the_gateway(
    cluster: LocalCluster, topic: str, method: str
) -> None:
    # A response (errors in its fields) or a clean INVALID_ARGUMENT; never INTERNAL/UNKNOWN.
    service = gateway_pb2.DESCRIPTOR.services_by_name["Gateway"]
    channel, _ = gateway_stub(cluster.gateway)
    try:
        outcomes = send_extreme_requests(channel, service, method, 20, names=[topic] * 4)
    finally:
        channel.close()
    assert sum(outcomes.values()) == 20
