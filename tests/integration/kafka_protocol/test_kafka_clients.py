"""Kafka's own clients against a real Strom cluster through the gateway's Kafka listener:
confluent-kafka (librdkafka) admin, idempotent producer and a consumer group of two with a
rebalance; kafka-python and aiokafka; kcat; records crossing between Kafka clients and
Strom's own client in both directions (lz4 and snappy, raw and xerial-framed); a topic's
compression.type recompressing what a Kafka client sends; ListOffsets' max timestamp."""

from __future__ import annotations

import asyncio
import shutil
import socket
import struct
import subprocess
import time
from typing import Any

import grpc
import pytest
from cluster_testkit import LocalCluster
from strom_testkit import wait_until

from strom import Consumer as StromConsumer
from strom import NewTopic, TopicPartition
from strom import Producer as StromProducer
from strom.protocol.v1 import common_pb2, storage_pb2, storage_pb2_grpc
from strom.records import Compression
from strom.records.header import walk_batches
from strom_gateway.kafka.protocol.codec import decode, encode
from strom_gateway.kafka.protocol.messages import (
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS,
    OFFSET_FOR_LEADER_EPOCH,
)
from strom_gateway.kafka.protocol.schema import Api

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_module = pytest.importorskip("confluent_kafka.admin")

pytestmark = pytest.mark.integration

#: librdkafka settings for a test: fast metadata and group timers on a loaded machine.
LIBRDKAFKA = {"topic.metadata.refresh.interval.ms": 2000, "socket.timeout.ms": 30000}
GROUP = {"session.timeout.ms": 10000, "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest"}


def make_topic(cluster: LocalCluster, name: str, partitions: int) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(name, partitions, 3)])
    for p in range(partitions):
        cluster.wait_hosted(name, p)


def produce(kafka: str, topic: str, values: list[bytes], **settings: Any) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka, **LIBRDKAFKA, **settings})
    failures: list[Any] = []
    for i, value in enumerate(values):
        producer.produce(
            topic, key=b"k%d" % i, value=value, headers=[("n", str(i).encode())],
            on_delivery=lambda err, _msg: failures.append(err) if err else None,
        )  # fmt: skip
    assert producer.flush(60) == 0
    assert failures == []


def test_confluent_admin_creates_describes_alters_and_deletes_topics(kafka: str) -> None:
    admin = admin_module.AdminClient({"bootstrap.servers": kafka, **LIBRDKAFKA})
    topic = "kafka-admin"
    created = admin.create_topics(
        [admin_module.NewTopic(topic, 2, 3, config={"retention.ms": "3600000"})]
    )
    created[topic].result(60)
    duplicate = admin.create_topics([admin_module.NewTopic(topic, 2, 3)])
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        duplicate[topic].result(60)
    assert raised.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS

    described = admin.list_topics(topic, timeout=30).topics[topic]
    assert sorted(described.partitions) == [0, 1]
    assert all(len(p.replicas) == 3 for p in described.partitions.values())

    resource = admin_module.ConfigResource(admin_module.ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "3600000"
    change = admin_module.ConfigResource(
        admin_module.ResourceType.TOPIC,
        topic,
        incremental_configs=[
            admin_module.ConfigEntry(
                "retention.ms", "7200000",
                incremental_operation=admin_module.AlterConfigOpType.SET,
            )
        ],
    )  # fmt: skip
    admin.incremental_alter_configs([change])[change].result(30)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "7200000"

    admin.create_partitions([admin_module.NewPartitions(topic, 3)])[topic].result(60)
    wait_until(
        lambda: len(admin.list_topics(topic, timeout=30).topics[topic].partitions) == 3,
        30,
        "three partitions",
    )

    admin.delete_topics([topic])[topic].result(60)
    wait_until(lambda: topic not in admin.list_topics(timeout=30).topics, 30, "topic deleted")


def stored_codecs(cluster: LocalCluster, topic: str) -> list[list[int]]:
    """The codec of every batch each replica of partition 0 holds, read from its segment."""
    out = []
    for node in (1, 2, 3):
        log = cluster.spec.data_dir / f"storage-{node}" / f"{topic}-0" / f"{0:020d}.log"
        out.append([h.compression for _, h in walk_batches(log.read_bytes())])
    return out


def test_topic_compression_type_recompresses_what_kafka_clients_send(
    cluster: LocalCluster, kafka: str
) -> None:
    admin = admin_module.AdminClient({"bootstrap.servers": kafka, **LIBRDKAFKA})
    topic = "kafka-compression-type"
    # compression.type and configs Kafka accepts that have no effect in Strom.
    configs = {"compression.type": "zstd", "compression.zstd.level": "5", "preallocate": "true",
               "segment.jitter.ms": "1000", "message.downconversion.enable": "false",
               "leader.replication.throttled.replicas": "*"}  # fmt: skip
    admin.create_topics([admin_module.NewTopic(topic, 1, 3, config=configs)])[topic].result(60)
    cluster.wait_hosted(topic, 0)
    resource = admin_module.ConfigResource(admin_module.ResourceType.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(30)
    assert {name: described[name].value for name in configs} == configs

    values = [b"from librdkafka %d " % i * 10 for i in range(40)]
    produce(kafka, topic, values, **{"compression.type": "lz4", "acks": "all"})
    with StromProducer(bootstrap_servers=cluster.gateway, compression_type="none") as producer:
        producer.send(topic, value=b"from strom", partition=0)
        producer.flush(30)
    wait_until(lambda: all(len(c) == 2 for c in stored_codecs(cluster, topic)), 30, "replicated")
    assert stored_codecs(cluster, topic) == [[Compression.ZSTD, Compression.ZSTD]] * 3
    assert _librdkafka_reads(kafka, topic, "read_committed", 41) == [*values, b"from strom"]


def test_max_timestamp_offset_spec_names_the_record_with_the_largest_timestamp(
    cluster: LocalCluster, kafka: str
) -> None:
    topic = "kafka-max-timestamp"
    make_topic(cluster, topic, 1)
    base = int(time.time() * 1000) - 60_000
    stamps = [base + d for d in (5, 3, 9, 1, 9, 2)]  # the largest first at offset 2
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": kafka, "linger.ms": 50, "compression.type": "lz4", **LIBRDKAFKA}
    )
    for i, stamp in enumerate(stamps):
        producer.produce(topic, value=b"v%d" % i, partition=0, timestamp=stamp)
    assert producer.flush(60) == 0

    admin = admin_module.AdminClient({"bootstrap.servers": kafka, **LIBRDKAFKA})
    tp = confluent_kafka.TopicPartition(topic, 0)
    answer = admin.list_offsets({tp: admin_module.OffsetSpec.max_timestamp()})[tp].result(30)
    assert (answer.offset, answer.timestamp) == (2, base + 9)
    with cluster.admin() as strom_admin:
        (found,) = strom_admin.list_offsets({TopicPartition(topic, 0): "max_timestamp"}).values()
    assert (found.offset, found.timestamp) == (2, base + 9)


def test_confluent_idempotent_producer_and_a_group_of_two_with_a_rebalance(
    cluster: LocalCluster, kafka: str
) -> None:
    topic = "kafka-group"
    make_topic(cluster, topic, 4)
    values = [b"v%d" % i for i in range(400)]
    produce(kafka, topic, values, **{"enable.idempotence": True, "linger.ms": 5})

    def consumer() -> Any:
        c = confluent_kafka.Consumer(
            {"bootstrap.servers": kafka, "group.id": "kafka-group-g", **LIBRDKAFKA, **GROUP,
             "enable.auto.commit": False}
        )  # fmt: skip
        c.subscribe([topic])
        return c

    first = consumer()
    seen: dict[int, bytes] = {}

    def drain(c: Any, timeout: float = 0.1) -> None:
        messages = [m for m in c.consume(100, timeout) if m.error() is None]
        for message in messages:
            seen[int(dict(message.headers())["n"])] = message.value()
        if messages:
            c.commit(messages[-1], asynchronous=True)

    deadline = time.monotonic() + 60
    while len(first.assignment()) != 4 or len(seen) < 100:
        assert time.monotonic() < deadline, f"first consumer: {first.assignment()} {len(seen)}"
        drain(first)
    second = consumer()
    deadline = time.monotonic() + 60
    while not (len(first.assignment()) == 2 and len(second.assignment()) == 2):
        assert time.monotonic() < deadline, f"rebalance: {first.assignment()} {second.assignment()}"
        drain(first)
        drain(second)
    owned = {tp.partition for tp in first.assignment()} | {
        tp.partition for tp in second.assignment()
    }
    assert owned == {0, 1, 2, 3}
    deadline = time.monotonic() + 60
    while len(seen) < len(values):
        assert time.monotonic() < deadline, f"read {len(seen)} of {len(values)}"
        drain(first)
        drain(second)
    assert [seen[i] for i in range(len(values))] == values

    # The group and the topic as Kafka's admin client sees them.
    admin = admin_module.AdminClient({"bootstrap.servers": kafka, **LIBRDKAFKA})
    group = "kafka-group-g"
    listed = admin.list_consumer_groups().result(30).valid
    assert group in [g.group_id for g in listed]
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert len(described.members) == 2
    committed = admin.list_consumer_group_offsets(
        [confluent_kafka.ConsumerGroupTopicPartitions(group)]
    )[group].result(30)
    ends = {
        tp.partition: future.result(30).offset
        for tp, future in admin.list_offsets(
            {confluent_kafka.TopicPartition(topic, p): admin_module.OffsetSpec.latest()
             for p in range(4)}
        ).items()
    }  # fmt: skip
    assert sum(ends.values()) == len(values)
    # Commits were asynchronous: each committed position is one a consumer had reached.
    positions = {tp.partition: tp.offset for tp in committed.topic_partitions if tp.offset >= 0}
    assert positions
    assert all(0 < offset <= ends[p] for p, offset in positions.items()), (positions, ends)
    first.close()
    second.close()
    admin.delete_consumer_groups([group])[group].result(30)
    (trimmed,) = admin.delete_records([confluent_kafka.TopicPartition(topic, 0, 10)]).values()
    assert trimmed.result(30).low_watermark == 10


def test_kafka_python_and_aiokafka_produce_and_consume(cluster: LocalCluster, kafka: str) -> None:
    kafka_python = pytest.importorskip("kafka")
    aiokafka = pytest.importorskip("aiokafka")
    topic = "kafka-python-aio"
    make_topic(cluster, topic, 2)

    producer = kafka_python.KafkaProducer(bootstrap_servers=kafka, acks="all")
    for i in range(25):
        producer.send(topic, key=b"p%d" % i, value=b"kafka-python %d" % i)
    producer.flush(30)
    producer.close()
    # acks=0: Produce requests that get no response at all.
    producer = kafka_python.KafkaProducer(bootstrap_servers=kafka, acks=0)
    for i in range(25, 50):
        producer.send(topic, key=b"p%d" % i, value=b"kafka-python %d" % i)
    producer.flush(30)
    producer.close()

    async def aio() -> list[bytes]:
        sender = aiokafka.AIOKafkaProducer(bootstrap_servers=kafka, enable_idempotence=True)
        await sender.start()
        try:
            for i in range(50):
                await sender.send_and_wait(topic, key=b"a%d" % i, value=b"aiokafka %d" % i)
        finally:
            await sender.stop()
        reader = aiokafka.AIOKafkaConsumer(
            topic, bootstrap_servers=kafka, group_id="aio-group", auto_offset_reset="earliest",
            isolation_level="read_committed",
        )  # fmt: skip
        await reader.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                async for message in reader:
                    got.append(message.value)
                    if len(got) == 100:
                        break
            await reader.commit()
        finally:
            await reader.stop()
        return got

    got = asyncio.run(aio())
    assert sorted(got) == sorted(
        [b"kafka-python %d" % i for i in range(50)] + [b"aiokafka %d" % i for i in range(50)]
    )
    consumer = kafka_python.KafkaConsumer(
        topic, bootstrap_servers=kafka, group_id="kp-group", auto_offset_reset="earliest",
        consumer_timeout_ms=30000,
    )  # fmt: skip
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == 100:
            break
    consumer.close()
    assert sorted(values) == sorted(got)


def test_aiokafka_writes_and_reads_xerial_snappy(cluster: LocalCluster, kafka: str) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    topic = "kafka-aio-snappy"
    make_topic(cluster, topic, 1)
    with StromProducer(bootstrap_servers=cluster.gateway, compression_type="snappy") as producer:
        for i in range(20):
            producer.send(topic, value=b"from strom %d" % i, partition=0)
        producer.flush(30)

    async def aio() -> list[bytes]:
        # aiokafka writes snappy in xerial framing, as Kafka's Java client does.
        sender = aiokafka.AIOKafkaProducer(bootstrap_servers=kafka, compression_type="snappy")
        await sender.start()
        try:
            batch = sender.create_batch()
            for i in range(20):
                batch.append(key=None, value=b"from aiokafka %d" % i, timestamp=None)
            await (await sender.send_batch(batch, topic, partition=0))
        finally:
            await sender.stop()
        reader = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=kafka, auto_offset_reset="earliest", enable_auto_commit=False
        )
        await reader.start()
        reader.assign([aiokafka.TopicPartition(topic, 0)])
        got: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                while len(got) < 40:
                    for messages in (await reader.getmany(timeout_ms=500)).values():
                        got += [m.value for m in messages]
        finally:
            await reader.stop()
        return got

    strom_values = [b"from strom %d" % i for i in range(20)]
    expected = strom_values + [b"from aiokafka %d" % i for i in range(20)]
    assert asyncio.run(aio()) == expected
    snappy = [Compression.SNAPPY, Compression.SNAPPY]
    wait_until(lambda: stored_codecs(cluster, topic) == [snappy] * 3, 30, "replicated")
    # Both batches are in xerial framing (Strom's and aiokafka's), not raw snappy.
    segment = cluster.spec.data_dir / "storage-1" / f"{topic}-0" / f"{0:020d}.log"
    data = segment.read_bytes()
    assert [data[pos + 61 : pos + 69] for pos, _ in walk_batches(data)] == [b"\x82SNAPPY\x00"] * 2
    with StromConsumer(
        bootstrap_servers=cluster.gateway, auto_offset_reset="earliest", enable_auto_commit=False
    ) as reader:
        reader.assign([TopicPartition(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 40:
            assert time.monotonic() < deadline, f"Strom's consumer read {len(got)}"
            got += [r.value for rs in reader.poll(timeout_ms=300).values() for r in rs]
    assert got == expected


def test_kcat_lists_produces_and_consumes(cluster: LocalCluster, kafka: str) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed (Debian package kcat; .ci/run installs it)")
    topic = "kafka-kcat"
    make_topic(cluster, topic, 1)
    listing = subprocess.run(
        [kcat, "-b", kafka, "-L", "-t", topic], capture_output=True, text=True, timeout=60,
        check=True,
    )  # fmt: skip
    assert f'topic "{topic}" with 1 partitions' in listing.stdout
    lines = "".join(f"line {i}\n" for i in range(20))
    subprocess.run(
        [kcat, "-b", kafka, "-P", "-t", topic, "-p", "0"], input=lines, text=True, timeout=60,
        check=True,
    )  # fmt: skip
    consumed = subprocess.run(
        [kcat, "-b", kafka, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert consumed.stdout == lines


@pytest.mark.parametrize("codec", ["lz4", "snappy"])
def test_records_cross_between_kafka_clients_and_strom_clients(
    cluster: LocalCluster, kafka: str, codec: str
) -> None:
    topic = f"kafka-crossing-{codec}"
    make_topic(cluster, topic, 1)
    values = [b"from librdkafka %d" % i for i in range(30)]
    produce(kafka, topic, values, **{"compression.type": codec})

    with StromConsumer(
        bootstrap_servers=cluster.gateway, auto_offset_reset="earliest", enable_auto_commit=False
    ) as reader:
        reader.assign([TopicPartition(topic, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < len(values):
            assert time.monotonic() < deadline, f"Strom's consumer read {len(got)}"
            got += [r for rs in reader.poll(timeout_ms=300).values() for r in rs]
    assert [r.value for r in got] == values
    assert [r.key for r in got] == [b"k%d" % i for i in range(30)]
    assert [dict(r.headers)["n"] for r in got] == [str(i).encode() for i in range(30)]

    with StromProducer(
        bootstrap_servers=cluster.gateway, acks="all", compression_type=codec
    ) as producer:
        for i in range(30):
            producer.send(topic, value=b"from strom %d" % i, key=b"s%d" % i, partition=0)
        producer.flush(30)
    reader = confluent_kafka.Consumer(
        {"bootstrap.servers": kafka, "group.id": f"crossing-{codec}", "enable.auto.commit": False,
         **LIBRDKAFKA, **GROUP}
    )  # fmt: skip
    reader.assign([confluent_kafka.TopicPartition(topic, 0, 30)])
    read: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(read) < 30:
        assert time.monotonic() < deadline, f"librdkafka read {len(read)}"
        message = reader.poll(0.5)
        if message is not None and message.error() is None:
            read.append(message.value())
    reader.close()
    assert read == [b"from strom %d" % i for i in range(30)]
    # Where the newest epoch ends: the log end, as librdkafka validates a position with it.
    (result,) = kafka_call(
        kafka, OFFSET_FOR_LEADER_EPOCH, 3,
        {"topics": [{"topic": topic, "partitions": [{"partition": 0, "leader_epoch": 1000}]}]},
    )["topics"][0]["partitions"]  # fmt: skip
    assert (result["error_code"], result["end_offset"]) == (0, 60)
    assert 0 <= result["leader_epoch"] < 1000


def kafka_call(kafka: str, api: Api, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """One request in Kafka's framing (Strom's codec), for APIs the Python clients lack."""
    host, port = kafka.rsplit(":", 1)
    flexible = api.flexible(version)
    header = struct.pack(">hhih", api.key, version, 1, 4) + b"test" + (b"\x00" if flexible else b"")
    payload = header + encode(api.request, version, flexible, body)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        reply = sock.makefile("rb")
        size = struct.unpack(">i", reply.read(4))[0]
        frame = reply.read(size)
    assert struct.unpack_from(">i", frame)[0] == 1
    start = 5 if flexible else 4  # the response header's tagged fields
    return dict(decode(api.response, version, flexible, frame[start:]))


def _librdkafka_reads(kafka: str, topic: str, isolation: str, count: int) -> list[bytes]:
    """What a librdkafka consumer with ``isolation`` reads of partition 0: ``count`` records
    (within 30 s), and whatever else a further second of polling brings."""
    reader = confluent_kafka.Consumer(
        {"bootstrap.servers": kafka, "group.id": f"txn-{isolation}", "isolation.level": isolation,
         "enable.auto.commit": False, **LIBRDKAFKA}
    )  # fmt: skip
    reader.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        values += [m.value() for m in reader.consume(500, 0.2) if m.error() is None]
    values += [m.value() for m in reader.consume(500, 1.0) if m.error() is None]
    reader.close()
    return values


def test_read_committed_kafka_consumers_skip_aborted_and_open_transactions(
    cluster: LocalCluster, kafka: str
) -> None:
    """Transactions written by Strom's producer, read through the listener: librdkafka's
    read_committed consumer (its default) sees committed records only and stops at the last
    stable offset of an open transaction; read_uncommitted sees everything."""
    topic = "kafka-txn"
    make_topic(cluster, topic, 1)
    with StromProducer(bootstrap_servers=cluster.gateway, transactional_id="kafka-txn") as txn:
        txn.init_transactions()
        for name, commit in (("a", True), ("b", False), ("c", True), ("d", None)):
            txn.begin_transaction()
            for i in range(5):
                txn.send(topic, value=f"{name}{i}".encode(), partition=0)
            txn.flush(30)
            if commit is True:
                txn.commit_transaction()
            elif commit is False:
                txn.abort_transaction()
        # "d" is still open: the last stable offset stays at its first record.
        committed = [f"{n}{i}".encode() for n in "ac" for i in range(5)]
        assert _librdkafka_reads(kafka, topic, "read_committed", 10) == committed
        everything = [f"{n}{i}".encode() for n in "abcd" for i in range(5)]
        assert _librdkafka_reads(kafka, topic, "read_uncommitted", 20) == everything
        # The admin side of the open transaction, in Kafka's messages.
        states = kafka_call(kafka, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["kafka-txn"]})
        (described,) = states["transaction_states"]
        assert (described["error_code"], described["transaction_state"]) == (0, "Ongoing")
        assert described["topics"] == [{"topic": topic, "partitions": [0]}]
        listed = kafka_call(kafka, LIST_TRANSACTIONS, 1, {"state_filters": ["Ongoing"]})
        assert "kafka-txn" in [t["transactional_id"] for t in listed["transaction_states"]]
        producers = kafka_call(
            kafka, DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]}
        )
        (partition,) = producers["topics"][0]["partitions"]
        (producer,) = partition["active_producers"]
        assert producer["producer_id"] == described["producer_id"]
        assert producer["current_txn_start_offset"] >= 0
        txn.commit_transaction()
    wanted = [f"{n}{i}".encode() for n in "acd" for i in range(5)]
    assert _librdkafka_reads(kafka, topic, "read_committed", 15) == wanted


def test_librdkafka_transactional_producer_runs_transactions_in_a_row(
    cluster: LocalCluster, kafka: str
) -> None:
    """librdkafka's transactional producer (EndTxn < v5) keeps its epoch across transactions:
    commit, abort, commit at one producer id and epoch; read_committed sees the commits only."""
    topic = "kafka-txn-librdkafka"
    make_topic(cluster, topic, 2)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": kafka, "transactional.id": "librdkafka-txn",
         "transaction.timeout.ms": 60000, **LIBRDKAFKA}
    )  # fmt: skip
    producer.init_transactions(60)
    request = {"transactional_ids": ["librdkafka-txn"]}
    (initial,) = kafka_call(kafka, DESCRIBE_TRANSACTIONS, 0, request)["transaction_states"]
    for name, commit in (("a", True), ("b", False), ("c", True)):
        producer.begin_transaction()
        for i in range(4):
            producer.produce(topic, value=f"{name}{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    def completed() -> dict[str, Any] | None:
        (state,) = kafka_call(kafka, DESCRIBE_TRANSACTIONS, 0, request)["transaction_states"]
        return state if state["transaction_state"] == "CompleteCommit" else None

    described = wait_until(completed, 30, "the last commit's markers")
    # Never bumped after InitProducerId.
    assert (described["producer_id"], described["producer_epoch"]) == (
        initial["producer_id"], initial["producer_epoch"],
    )  # fmt: skip
    committed = [f"{n}{i}".encode() for n in "ac" for i in (0, 2)]
    assert _librdkafka_reads(kafka, topic, "read_committed", 4) == committed


def test_list_offsets_after_delete_records_answers_the_new_start(
    cluster: LocalCluster, kafka: str
) -> None:
    """Read-your-writes through Kafka's admin client: once DeleteRecords answered a low
    watermark, ListOffsets(earliest) answers it. Each round moves the leadership first, so the
    gateway's routing still names the old leader (now a follower, which must not answer either
    request), then trims, produces (which finds the new leader) and lists."""
    topic = "kafka-trim"
    admin = admin_module.AdminClient({"bootstrap.servers": kafka, **LIBRDKAFKA})
    admin.create_topics([admin_module.NewTopic(topic, 1, 3)])[topic].result(60)
    cluster.wait_hosted(topic, 0)
    end = 20
    produce(kafka, topic, [b"v%d" % i for i in range(end)])
    tp = TopicPartition(topic, 0)
    earliest = admin_module.OffsetSpec.earliest()

    def high_watermark(node_id: int) -> int:
        """The high watermark as ``node_id`` answers it, asked directly (not through the
        gateway, whose routing the test keeps stale)."""
        latest = storage_pb2.ListOffsetsPartition(topic=topic, partition=0, spec=common_pb2.LATEST)
        with grpc.insecure_channel(cluster.storage_address(node_id)) as channel:
            answer = storage_pb2_grpc.StorageNodeStub(channel).ListOffsets(
                storage_pb2.ListOffsetsRequest(replica_id=-1, partitions=[latest]), timeout=10
            )
        (result,) = answer.partitions
        return result.offset if result.error_code == 0 else -1

    def move_leader(strom_admin: Any) -> None:
        (before,) = cluster.describe(topic).partitions
        replicas = [*before.replicas[1:], before.replicas[0]]
        strom_admin.alter_partition_reassignments({tp: replicas})
        wait_until(lambda: list(cluster.describe(topic).partitions[0].replicas) == replicas, 30,
                   "the new replica order")  # fmt: skip
        strom_admin.elect_leaders("preferred", [tp])
        wait_until(lambda: cluster.describe(topic).partitions[0].leader == replicas[0], 30,
                   "the preferred leader elected")  # fmt: skip
        # A new leader knows the high watermark once its followers fetched from it.
        wait_until(lambda: high_watermark(replicas[0]) == end, 30, "the new leader caught up")

    with cluster.admin() as strom_admin:
        for offset in range(2, 8):
            move_leader(strom_admin)
            deleted = admin.delete_records(
                [confluent_kafka.TopicPartition(topic, 0, offset)], request_timeout=30
            )
            (low,) = [future.result(30).low_watermark for future in deleted.values()]
            assert low == offset
            produce(kafka, topic, [b"after-%d" % offset])  # finds the new leader
            end += 1
            # A new client: the first one's cached leader epoch may be the previous leader's.
            lister = admin_module.AdminClient({"bootstrap.servers": kafka, **LIBRDKAFKA})
            listed = lister.list_offsets({confluent_kafka.TopicPartition(topic, 0): earliest})
            (start,) = [future.result(30).offset for future in listed.values()]
            assert start == offset, f"DeleteRecords answered {low}, ListOffsets {start}"


def test_a_produce_over_several_leaders_is_retried_on_a_moved_one(
    cluster: LocalCluster, kafka: str
) -> None:
    """One Produce request carries partitions of several leaders (kafka-python sends every
    partition's batch to its one broker, the listener, in one request). After partition 1's
    leadership moves, the gateway's routing still names its old leader, which refuses its
    share: the gateway retries that share alone on the new leader, and every record is
    written once, in order."""
    kafka_python = pytest.importorskip("kafka")
    topic = "kafka-moving-leader"
    make_topic(cluster, topic, 3)
    assert len({p.leader for p in cluster.describe(topic).partitions}) > 1
    producer = kafka_python.KafkaProducer(bootstrap_servers=kafka, acks="all", linger_ms=200)

    def send(tag: bytes) -> None:
        sent = [producer.send(topic, value=b"%s-%d" % (tag, i), partition=i % 3) for i in range(30)]
        producer.flush(60)
        for future in sent:
            future.get(30)

    send(b"before")
    before = cluster.describe(topic).partitions[1]
    replicas = [*before.replicas[1:], before.replicas[0]]
    tp = TopicPartition(topic, 1)
    with cluster.admin() as strom_admin:
        strom_admin.alter_partition_reassignments({tp: replicas})
        wait_until(lambda: list(cluster.describe(topic).partitions[1].replicas) == replicas, 30,
                   "the new replica order")  # fmt: skip
        strom_admin.elect_leaders("preferred", [tp])
    wait_until(lambda: cluster.describe(topic).partitions[1].leader == replicas[0], 30,
               "the preferred leader elected")  # fmt: skip
    send(b"after")
    producer.close()

    reader = confluent_kafka.Consumer(
        {"bootstrap.servers": kafka, "group.id": "moving-leader", "enable.auto.commit": False,
         **LIBRDKAFKA, **GROUP}
    )  # fmt: skip
    reader.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(3)])
    read: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + 60
    while sum(map(len, read.values())) < 60:
        assert time.monotonic() < deadline, f"librdkafka read {read}"
        message = reader.poll(0.5)
        if message is not None and message.error() is None:
            read[message.partition()].append(message.value())
    reader.close()
    for p in range(3):
        expected = [b"%s-%d" % (tag, i) for tag in (b"before", b"after") for i in range(p, 30, 3)]
        assert read[p] == expected, p
