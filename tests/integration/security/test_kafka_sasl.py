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
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_testkit import start_local_cluster
from security_testkit import SecureCluster

from strom.security.acl import AclBinding
from strom.types import NewTopic
from strom_server.local import secure

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration

ALLOWED, REFUSED, GROUP = "kafka-sasl-a", "kafka-sasl-b", "kafka-sasl-group"
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
            admin.create_topics([NewTopic(ALLOWED, 1, 3), NewTopic(REFUSED, 1, 3)])
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                admin.upsert_scram_user(USER, PASSWORD, mechanism=mechanism)
        principal = f"User:{USER}"
        secured.allow(
            AclBinding.create("TOPIC", ALLOWED, principal, "READ"),
            AclBinding.create("TOPIC", ALLOWED, principal, "WRITE"),
            AclBinding.create("GROUP", GROUP, principal, "READ"),
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


def deliver(producer: Any, topic: str, value: bytes) -> Any:
    """Produce one record; the delivery error (None when written)."""
    outcome: list[Any] = []
    producer.produce(topic, value=value, on_delivery=lambda err, _msg: outcome.append(err))
    assert producer.flush(60) == 0
    return outcome[0]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_librdkafka_scram_user_reaches_only_its_topic(
    cluster: SecureCluster, mechanism: str
) -> None:
    settings = rdkafka(cluster, mechanism)
    producer = confluent_kafka.Producer({**settings, "acks": "all"})
    value = mechanism.encode()
    assert deliver(producer, ALLOWED, value) is None
    refused = deliver(producer, REFUSED, b"nope")
    assert refused is not None
    assert refused.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
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
