"""Kafka clients against a secure cluster's Kafka listener (SASL_SSL): SCRAM-SHA-256 and -512
logins with librdkafka, kafka-python (PLAIN) and aiokafka, a user allowed one topic only
(writes and reads it, is refused the other with TOPIC_AUTHORIZATION_FAILED and does not see
it in Metadata), a wrong password, a plaintext client on the TLS port, and kcat with the
``kafka-client.properties`` that ``strom cluster up --secure`` writes."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_testkit import start_local_cluster
from security_testkit import SecureCluster

from strom.records import encode_batch
from strom.security.acl import AclBinding
from strom.security.scram import ScramClient
from strom.types import NewTopic
from strom_gateway.kafka.protocol.codec import decode, encode
from strom_gateway.kafka.protocol.messages import (
    ADD_PARTITIONS_TO_TXN,
    ALTER_CONFIGS,
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DESCRIBE_CONFIGS,
    FETCH,
    FIND_COORDINATOR,
    INCREMENTAL_ALTER_CONFIGS,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    METADATA,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
)
from strom_gateway.kafka.protocol.schema import Api
from strom_server.local import secure

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration

ALLOWED, REFUSED, GROUP = "kafka-sasl-a", "kafka-sasl-b", "kafka-sasl-group"
#: Topics the user may only read, only write.
READ_ONLY, WRITE_ONLY = "kafka-sasl-r", "kafka-sasl-w"
USER, PASSWORD = "kafka-user", "kafka-user-secret"
#: librdkafka settings for a test: fast metadata, generous timeouts on a loaded machine.
LIBRDKAFKA = {"topic.metadata.refresh.interval.ms": 2000, "socket.timeout.ms": 30000}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    """A secure cluster with two topics and a user allowed only the first (and its group)."""
    for secured in start_local_cluster(
        tmp_path_factory.mktemp("kafka-sasl"),
        cluster_class=SecureCluster,
        secure=True,
        coordinator_flags=("--group.initial.rebalance.delay.ms", "0",
                           "--offsets.topic.num.partitions", "1"),
    ):  # fmt: skip
        assert isinstance(secured, SecureCluster)
        with secured.admin() as admin:
            # Three partitions each on three nodes: leaders hold partitions of several.
            admin.create_topics(
                [NewTopic(t, 3, 3) for t in (ALLOWED, REFUSED, READ_ONLY, WRITE_ONLY)]
            )
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                admin.upsert_scram_user(USER, PASSWORD, mechanism=mechanism)
        principal = f"User:{USER}"
        secured.allow(
            AclBinding.create("TOPIC", ALLOWED, principal, "READ"),
            AclBinding.create("TOPIC", ALLOWED, principal, "WRITE"),
            AclBinding.create("GROUP", GROUP, principal, "READ"),
            AclBinding.create("TOPIC", READ_ONLY, principal, "READ"),
            AclBinding.create("TOPIC", WRITE_ONLY, principal, "WRITE"),
        )
        yield secured


def rdkafka(cluster: SecureCluster, mechanism: str, password: str = PASSWORD) -> dict[str, Any]:
    return {
        "bootstrap.servers": cluster.spec.kafka_address,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": USER,
        "sasl.password": password,
        "ssl.ca.location": cluster.cafile,
        **LIBRDKAFKA,
    }


def deliver(producer: Any, value: bytes, *topics: str) -> dict[str, set[Any]]:
    """Produce ``value`` to every partition of ``topics`` at once (one request when they fit
    in a linger); the delivery errors per topic (None when written)."""
    outcome: dict[str, set[Any]] = {topic: set() for topic in topics}
    for topic in topics:
        for partition in range(3):
            producer.produce(
                topic, value=value, partition=partition,
                on_delivery=lambda err, msg: outcome[msg.topic()].add(err and err.code()),
            )  # fmt: skip
    assert producer.flush(60) == 0
    return outcome


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_librdkafka_scram_user_reaches_only_its_topic(
    cluster: SecureCluster, mechanism: str
) -> None:
    settings = rdkafka(cluster, mechanism)
    producer = confluent_kafka.Producer({**settings, "acks": "all", "linger.ms": 100})
    value = mechanism.encode()
    refused = confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert deliver(producer, value, ALLOWED, REFUSED) == {ALLOWED: {None}, REFUSED: {refused}}
    listed = producer.list_topics(timeout=30).topics
    assert ALLOWED in listed and REFUSED not in listed

    consumer = confluent_kafka.Consumer(
        {**settings, "group.id": GROUP, "auto.offset.reset": "earliest",
         "enable.auto.commit": False, "session.timeout.ms": 10000}
    )  # fmt: skip
    try:
        consumer.subscribe([ALLOWED])
        deadline = time.monotonic() + 60
        seen: list[bytes] = []
        while value not in seen:
            assert time.monotonic() < deadline, f"consumed {seen}"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_a_wrong_password_is_an_authentication_error(cluster: SecureCluster) -> None:
    errors: list[Any] = []
    producer = confluent_kafka.Producer(
        {**rdkafka(cluster, "SCRAM-SHA-256", "wrong"), "error_cb": errors.append}
    )
    deadline = time.monotonic() + 30
    while not errors:
        assert time.monotonic() < deadline, "no error reported"
        producer.poll(0.2)
    assert errors[0].code() == confluent_kafka.KafkaError._AUTHENTICATION, errors[0]
    assert "invalid credentials" in errors[0].str()


def test_a_plaintext_client_on_the_tls_port_is_closed(cluster: SecureCluster) -> None:
    host, _, port = cluster.spec.kafka_address.rpartition(":")
    api_versions_v0 = b"\x00\x00\x00\x0c" + b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x02id"
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(api_versions_v0)
        received = b""
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except ConnectionResetError:
            pass
    assert not received.startswith(b"\x00\x00\x00"), "a Kafka answer in plaintext"
    # The listener still serves TLS clients afterwards.
    producer = confluent_kafka.Producer(rdkafka(cluster, "SCRAM-SHA-256"))
    assert ALLOWED in producer.list_topics(timeout=30).topics


def test_kafka_python_plain_and_aiokafka_scram(cluster: SecureCluster) -> None:
    kafka = pytest.importorskip("kafka")
    aiokafka = pytest.importorskip("aiokafka")
    producer = kafka.KafkaProducer(
        bootstrap_servers=cluster.spec.kafka_address,
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_plain_username=USER,
        sasl_plain_password=PASSWORD,
        ssl_cafile=cluster.cafile,
        request_timeout_ms=30000,
    )
    try:
        producer.send(ALLOWED, b"kafka-python").get(timeout=60)
    finally:
        producer.close()

    async def scram() -> None:
        context = ssl.create_default_context(cafile=cluster.cafile)
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=cluster.spec.kafka_address,
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username=USER,
            sasl_plain_password=PASSWORD,
            ssl_context=context,
            request_timeout_ms=30000,
        )
        await producer.start()
        try:
            await producer.send_and_wait(ALLOWED, b"aiokafka")
            with pytest.raises(aiokafka.errors.TopicAuthorizationFailedError):
                await producer.send_and_wait(REFUSED, b"nope")
        finally:
            await producer.stop()

    asyncio.run(scram())


def test_kcat_lists_with_the_clusters_kafka_properties(cluster: SecureCluster) -> None:
    """kcat over PLAIN: Debian's kcat links librdkafka 2.0, whose SCRAM client-final repeats
    the client nonce (fixed in librdkafka 2.6.1), which Strom refuses as Kafka 4 does."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    properties = secure.write_kafka_properties(cluster.spec.data_dir, cluster.spec.kafka_address)
    plain = ["-X", "sasl.mechanisms=PLAIN"]
    listed = subprocess.run(
        [kcat, "-F", str(properties), *plain, "-L", "-m", "30"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert ALLOWED in listed.stdout and REFUSED in listed.stdout  # the admin sees both
    as_user = subprocess.run(
        [kcat, "-b", cluster.spec.kafka_address, "-X", "security.protocol=SASL_SSL", *plain,
         "-X", f"sasl.username={USER}", "-X", f"sasl.password={PASSWORD}",
         "-X", f"ssl.ca.location={cluster.cafile}", "-L", "-m", "30"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert as_user.returncode == 0, as_user.stderr
    assert ALLOWED in as_user.stdout and REFUSED not in as_user.stdout


class RawClient:
    """Kafka requests by hand over TLS: what a client sends, byte for byte."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0

    @classmethod
    async def connect(cls, cluster: SecureCluster) -> RawClient:
        host, _, port = cluster.spec.kafka_address.rpartition(":")
        context = ssl.create_default_context(cafile=cluster.cafile)
        return cls(*await asyncio.open_connection(host, int(port), ssl=context))

    def send(self, api: Api, version: int, body: dict[str, Any]) -> None:
        self.correlation_id += 1
        flexible = api.flexible(version)
        header = struct.pack(">hhih", api.key, version, self.correlation_id, 3) + b"raw"
        payload = (
            header + (b"\x00" if flexible else b"") + encode(api.request, version, flexible, body)
        )
        self.writer.write(struct.pack(">i", len(payload)) + payload)

    async def call(self, api: Api, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.send(api, version, body)
        head = await asyncio.wait_for(self.reader.readexactly(4), 60)
        frame = await self.reader.readexactly(struct.unpack(">i", head)[0])
        assert struct.unpack_from(">i", frame)[0] == self.correlation_id
        flexible = api.flexible(version)
        start = 5 if flexible and api.key != API_VERSIONS.key else 4
        return decode(api.response, version, flexible, frame[start:])

    async def login(self, mechanism: str = "SCRAM-SHA-256") -> dict[str, Any]:
        """SaslHandshake v1 and SaslAuthenticate v2 (flexible); the last answer."""
        shaken = await self.call(SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        assert shaken == {"error_code": 0,
                          "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]}  # fmt: skip
        client = ScramClient(mechanism, USER, PASSWORD)
        first = await self.call(SASL_AUTHENTICATE, 2, {"auth_bytes": client.first()})
        assert first["error_code"] == 0, first
        final = await self.call(
            SASL_AUTHENTICATE, 2, {"auth_bytes": client.final(bytes(first["auth_bytes"]))}
        )
        client.verify(bytes(final["auth_bytes"]))
        return final

    async def closed_by_server(self) -> bool:
        try:
            return await asyncio.wait_for(self.reader.read(1), 30) == b""
        except ConnectionError:
            return True

    async def close(self) -> None:
        self.writer.close()


def test_raw_protocol_gate_and_per_topic_authorization(cluster: SecureCluster) -> None:
    """Before login only ApiVersions and SASL are served (Metadata closes the connection);
    after it, a Produce and a Fetch naming several topics fail only for the refused ones:
    TOPIC_AUTHORIZATION_FAILED for a topic the user may not use, hidden (REFUSED) or not."""

    async def scenario() -> None:
        early = await RawClient.connect(cluster)
        versions = await early.call(API_VERSIONS, 3, {"client_software_name": "raw",
                                                      "client_software_version": "1"})  # fmt: skip
        served = {a["api_key"]: a["max_version"] for a in versions["api_keys"]}
        assert served[SASL_HANDSHAKE.key] == 1 and served[SASL_AUTHENTICATE.key] == 2
        early.send(METADATA, 1, {"topics": [{"name": ALLOWED}]})
        assert await early.closed_by_server()
        unserved = await RawClient.connect(cluster)  # DescribeAcls v1: not served at all
        unserved.writer.write(struct.pack(">ihhih", 10, 29, 1, 1, 0))
        assert await unserved.closed_by_server()
        await unserved.close()

        client = await RawClient.connect(cluster)
        try:
            final = await client.login()
            assert final["error_code"] == 0
            # token.lifetime.ms less the margin (a tenth, at most 30 s)
            assert final["session_lifetime_ms"] == 870_000
            batch = encode_batch([(int(time.time() * 1000), b"k", b"raw")])
            produced = await client.call(PRODUCE, 8, {
                "transactional_id": None, "acks": -1, "timeout_ms": 30000,
                "topic_data": [
                    {"name": topic,
                     "partition_data": [{"index": p, "records": batch} for p in range(3)]}
                    for topic in (ALLOWED, READ_ONLY, REFUSED)
                ],
            })  # fmt: skip
            codes = {
                (t["name"], p["index"]): p["error_code"]
                for t in produced["responses"]
                for p in t["partition_responses"]
            }
            assert codes == {(t, p): 0 if t == ALLOWED else 29
                             for t in (ALLOWED, READ_ONLY, REFUSED) for p in range(3)}  # fmt: skip
            fetched = await client.call(FETCH, 11, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [
                    {"topic": topic, "partitions": [
                        {"partition": p, "fetch_offset": 0, "log_start_offset": -1,
                         "partition_max_bytes": 1 << 16} for p in range(3)]}
                    for topic in (ALLOWED, WRITE_ONLY, REFUSED)
                ],
                "forgotten_topics_data": [], "rack_id": "",
            })  # fmt: skip
            fetch_codes = {
                (t["topic"], p["partition_index"]): p["error_code"]
                for t in fetched["responses"]
                for p in t["partitions"]
            }
            fetchable = (ALLOWED, WRITE_ONLY, REFUSED)
            expected = {(t, p): 0 if t == ALLOWED else 29 for t in fetchable for p in range(3)}
            assert fetch_codes == expected
            # KIP-368: logging in again on the same connection keeps it serving.
            again = await client.login()
            assert again["error_code"] == 0 and again["session_lifetime_ms"] == 870_000
            listed = await client.call(METADATA, 1, {"topics": None})
            names = {t["name"] for t in listed["topics"]}
            assert {ALLOWED, READ_ONLY, WRITE_ONLY} <= names and REFUSED not in names
        finally:
            await client.close()
            await early.close()

    asyncio.run(scenario())


def test_a_consumers_requests_for_a_hidden_topic_are_refused_not_unknown(
    cluster: SecureCluster,
) -> None:
    """Metadata naming a topic the user may not describe, and the ListOffsets,
    OffsetForLeaderEpoch and DeleteRecords a consumer (or a client with older metadata) sends
    for it, are answered TOPIC_AUTHORIZATION_FAILED (29), as Kafka does, not
    UNKNOWN_TOPIC_OR_PARTITION: Kafka's clients raise the one and retry the other forever."""

    async def scenario() -> None:
        client = await RawClient.connect(cluster)
        try:
            await client.login()
            named = await client.call(METADATA, 12, {
                "topics": [{"topic_id": bytes(16), "name": REFUSED}],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
            })  # fmt: skip
            assert [(t["name"], t["error_code"]) for t in named["topics"]] == [(REFUSED, 29)]
            listed = await client.call(LIST_OFFSETS, 7, {
                "replica_id": -1, "isolation_level": 0,
                "topics": [{"name": REFUSED, "partitions": [
                    {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}],
            })  # fmt: skip
            epochs = await client.call(OFFSET_FOR_LEADER_EPOCH, 4, {
                "replica_id": -1,
                "topics": [{"topic": REFUSED, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}],
            })  # fmt: skip
            deleted = await client.call(DELETE_RECORDS, 2, {
                "topics": [{"name": REFUSED,
                            "partitions": [{"partition_index": 0, "offset": 0}]}],
                "timeout_ms": 30000,
            })  # fmt: skip
            codes = [
                p["error_code"]
                for answer in (listed, epochs, deleted)
                for t in answer["topics"]
                for p in t["partitions"]
            ]
            assert codes == [29, 29, 29], (listed, epochs, deleted)
        finally:
            await client.close()

    asyncio.run(scenario())


def test_kafka_consumers_assigned_a_refused_topic_get_the_authorization_error(
    cluster: SecureCluster,
) -> None:
    """librdkafka assigned a partition of a topic the user may not describe reports
    TOPIC_AUTHORIZATION_FAILED from poll; librdkafka and kafka-python assigned one it may
    write but not read (WRITE implies DESCRIBE) report it from the refused Fetch."""
    kafka = pytest.importorskip("kafka")
    settings = {**rdkafka(cluster, "SCRAM-SHA-256"), "group.id": GROUP,
                "auto.offset.reset": "earliest", "enable.auto.commit": False}  # fmt: skip
    for topic in (REFUSED, WRITE_ONLY):
        consumer = confluent_kafka.Consumer(settings)
        try:
            consumer.assign([confluent_kafka.TopicPartition(topic, 0)])
            deadline = time.monotonic() + 30
            while True:
                assert time.monotonic() < deadline, f"no error for {topic}"
                message = consumer.poll(0.5)
                if message is not None and message.error() is not None:
                    code = message.error().code()
                    assert code == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
                    break
        finally:
            consumer.close()
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=cluster.spec.kafka_address,
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_plain_username=USER,
        sasl_plain_password=PASSWORD,
        ssl_cafile=cluster.cafile,
        auto_offset_reset="earliest",
        request_timeout_ms=30000,
    )
    try:
        consumer.assign([kafka.TopicPartition(WRITE_ONLY, 0)])
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                consumer.poll(500)
    finally:
        consumer.close()


def test_group_transactional_id_and_cluster_refusals_have_their_codes(
    cluster: SecureCluster,
) -> None:
    """GROUP_ (30), TRANSACTIONAL_ID_ (53), CLUSTER_ (31) and TOPIC_AUTHORIZATION_FAILED (29)
    in the fields Kafka puts them in; the user's own group is found."""

    async def scenario() -> None:
        client = await RawClient.connect(cluster)
        try:
            await client.login("SCRAM-SHA-512")
            own = await client.call(FIND_COORDINATOR, 1, {"key": GROUP, "key_type": 0})
            assert own["error_code"] == 0, own
            other = await client.call(FIND_COORDINATOR, 1, {"key": "not-mine", "key_type": 0})
            assert other["error_code"] == 30, other
            init = {"transactional_id": "not-mine", "transaction_timeout_ms": 60000}
            txn = await client.call(INIT_PRODUCER_ID, 1, init)
            assert txn["error_code"] == 53, txn
            broker = await client.call(DESCRIBE_CONFIGS, 1, {
                "resources": [{"resource_type": 4, "resource_name": "1",
                               "configuration_keys": None}],
                "include_synonyms": False,
            })  # fmt: skip
            assert [r["error_code"] for r in broker["results"]] == [31], broker
            created = await client.call(CREATE_TOPICS, 2, {
                "topics": [{"name": "kafka-sasl-new", "num_partitions": 1,
                            "replication_factor": 1, "assignments": [], "configs": []}],
                "timeout_ms": 30000, "validate_only": False,
            })  # fmt: skip
            assert [t["error_code"] for t in created["topics"]] == [29], created
        finally:
            await client.close()

    asyncio.run(scenario())


def test_transaction_and_config_requests_are_answered_per_entry(cluster: SecureCluster) -> None:
    """AddPartitionsToTxn of an allowed and a refused topic adds neither: the refused answers
    TOPIC_AUTHORIZATION_FAILED (29), the other OPERATION_NOT_ATTEMPTED (55); DescribeConfigs,
    IncrementalAlterConfigs and AlterConfigs serve the allowed topic and answer the refused one
    29."""
    principal = f"User:{USER}"
    cluster.allow(
        AclBinding.create("TRANSACTIONAL_ID", "kafka-sasl-tx", principal, "WRITE"),
        AclBinding.create("TOPIC", ALLOWED, principal, "ALTER_CONFIGS"),
    )

    async def scenario() -> None:
        client = await RawClient.connect(cluster)
        try:
            await client.login()
            init = {"transactional_id": "kafka-sasl-tx", "transaction_timeout_ms": 60000}
            producer = await client.call(INIT_PRODUCER_ID, 1, init)
            assert producer["error_code"] == 0, producer
            added = await client.call(ADD_PARTITIONS_TO_TXN, 1, {
                "transactional_id": "kafka-sasl-tx",
                "producer_id": producer["producer_id"],
                "producer_epoch": producer["producer_epoch"],
                "topics": [{"name": t, "partitions": [0]} for t in (ALLOWED, REFUSED)],
            })  # fmt: skip
            codes = {
                (t["name"], p["partition_index"]): p["partition_error_code"]
                for t in added["results"]
                for p in t["results"]
            }
            assert codes == {(ALLOWED, 0): 55, (REFUSED, 0): 29}, added
            described = await client.call(DESCRIBE_CONFIGS, 1, {
                "resources": [{"resource_type": 2, "resource_name": t,
                               "configuration_keys": None} for t in (REFUSED, ALLOWED)],
                "include_synonyms": False,
            })  # fmt: skip
            results = {r["resource_name"]: r for r in described["results"]}
            assert results[ALLOWED]["error_code"] == 0 and results[ALLOWED]["configs"]
            assert results[REFUSED]["error_code"] == 29 and not results[REFUSED]["configs"]
            altered = await client.call(INCREMENTAL_ALTER_CONFIGS, 1, {
                "resources": [{"resource_type": 2, "resource_name": t,
                               "configs": [{"name": "retention.ms", "config_operation": 0,
                                            "value": "7654000"}]}
                              for t in (ALLOWED, REFUSED)],
                "validate_only": True,
            })  # fmt: skip
            codes = {r["resource_name"]: r["error_code"] for r in altered["responses"]}
            assert codes == {ALLOWED: 0, REFUSED: 29}, altered
            replaced = await client.call(ALTER_CONFIGS, 1, {
                "resources": [{"resource_type": 2, "resource_name": t,
                               "configs": [{"name": "retention.ms", "value": "7654000"}]}
                              for t in (REFUSED, ALLOWED)],
                "validate_only": True,
            })  # fmt: skip
            codes = {r["resource_name"]: r["error_code"] for r in replaced["responses"]}
            assert codes == {ALLOWED: 0, REFUSED: 29}, replaced
        finally:
            await client.close()

    asyncio.run(scenario())
