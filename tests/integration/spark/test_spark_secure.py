"""The Spark connector against a secure cluster: a user's credentials (``strom.security.*``
options) write a DataFrame to a topic and read it back; without them, or for a topic the user
may not read, the job fails with the authentication or authorization error."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_testkit import start_local_cluster
from pyspark.sql import DataFrame, SparkSession

from strom import Producer
from strom.security.acl import AclBinding
from strom.types import NewTopic

pytestmark = pytest.mark.integration

# The security tests' secure cluster class (tests/integration/security/security_testkit.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "security"))
from security_testkit import SecureCluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    """A secure cluster of this module's own (the folder's shared Spark session reaches it)."""
    yield from start_local_cluster(  # type: ignore[misc]
        tmp_path_factory.mktemp("secure-spark"), cluster_class=SecureCluster, secure=True
    )


def _options(cluster: SecureCluster, user: str, password: str) -> dict[str, str]:
    return {
        "strom.bootstrap.servers": cluster.gateway,
        "strom.security.protocol": "SASL_SSL",
        "strom.sasl.mechanism": "SCRAM-SHA-256",
        "strom.sasl.plain.username": user,
        "strom.sasl.plain.password": password,
        "strom.ssl.cafile": cluster.cafile,
    }


def _read(spark: SparkSession, topic: str, options: dict[str, str]) -> DataFrame:
    return spark.read.format("strom").options(**options).option("subscribe", topic).load()


def test_spark_reads_and_writes_with_credentials(
    spark: SparkSession, cluster: SecureCluster
) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("sam-t", 2, 1), NewTopic("sam-secret", 1, 1)])
    cluster.add_user("sam", "sam-secret")
    cluster.allow(
        *(AclBinding.create("TOPIC", "sam-t", "User:sam", op) for op in ("READ", "WRITE")),
        AclBinding.create("CLUSTER", "", "User:sam", "IDEMPOTENT_WRITE"),
    )
    sam = _options(cluster, "sam", "sam-secret")
    frame = spark.createDataFrame(
        [(f"k{i}", f"v{i}") for i in range(10)], "key string, value string"
    )
    frame.write.format("strom").mode("append").options(**sam).option("topic", "sam-t").save()
    rows = _read(spark, "sam-t", sam).selectExpr("CAST(value AS STRING) AS v").collect()
    assert sorted(r.v for r in rows) == sorted(f"v{i}" for i in range(10))

    with pytest.raises(Exception, match="TopicAuthorizationFailedError: not authorized"):
        _read(spark, "sam-secret", sam).collect()
    wrong = _options(cluster, "sam", "not-sams")
    with pytest.raises(Exception, match=r"SASL_AUTHENTICATION_FAILED|SaslAuthenticationFailed"):
        _read(spark, "sam-t", wrong).collect()


def test_a_task_refused_the_topic_fails_with_the_authorization_error(
    spark: SparkSession, cluster: SecureCluster
) -> None:
    """A user who may describe a topic but not read it: planning (Metadata, ListOffsets)
    succeeds, the tasks' Fetch is refused, and the job fails with that error, not empty."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("tess-t", 2, 1)])
    with Producer(cluster.gateway, **cluster.options()) as producer:
        for i in range(4):
            producer.send("tess-t", f"v{i}".encode(), partition=i % 2)
        producer.flush(30)
    cluster.add_user("tess", "tess-secret")
    cluster.allow(AclBinding.create("TOPIC", "tess-t", "User:tess", "DESCRIBE"))
    tess = _options(cluster, "tess", "tess-secret")
    with pytest.raises(Exception, match=r"TopicAuthorizationFailedError: .*may not READ"):
        _read(spark, "tess-t", tess).collect()
